"""imapd end to end: nothing cut where the message cache is. A message whose header passes the
256 KiB the cache keeps is answered from its file: BODY[HEADER] and RFC822.HEADER whole,
HEADER.FIELDS and HEADER.FIELDS.NOT of fields that come late, SEARCH SUBJECT/FROM/HEADER on
them, BINARY[1] of its plain 7bit body; a message whose cache is bigger than the store kept
before (about 1,000 parts with long descriptions) has its real ENVELOPE and BODYSTRUCTURE,
and `mailctl verify` finds the store clean.

Usage: test_imapd_bigheader.py IMAPD_BINARY DELIVER_BINARY"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, assert_eq, assert_in, run_suite  # noqa: E402

IMAPD = DELIVER = None
D = None

FILLER = b"".join(b"X-Filler-%05d: %s\r\n" % (i, b"f" * 990) for i in range(320))  # ~320 KiB
LATE = (b"Subject: late subject zqxlate\r\nFrom: Late Sender <late@heron.test>\r\n"
        b"X-Late: marker-kvw\r\n")
BIG_HEADER = b"Date: Mon, 7 Feb 1994 21:52:25 -0800\r\n" + FILLER + LATE + b"\r\n"
BIG_BODY = b"a plain 7bit body\r\nsecond line\r\n"
NPARTS, DESC = 950, 2600


def literal(r, tag, cmd):
    """The one literal of a FETCH answer (bytes) and its tagged line."""
    r.send("%s %s\r\n" % (tag, cmd))
    line = r.line()
    m = re.search(rb"\{(\d+)\}$", line.encode())
    assert m, line
    data = r.read(int(m.group(1)))
    rest = r.until_tag(tag)
    assert rest[-1].startswith(tag + " OK"), rest
    return data


def search(r, key):
    out = r.cmd("s", "UID SEARCH " + key)
    assert out[-1].startswith("s OK"), out
    return [int(x) for l in out if l.startswith("* SEARCH") for x in l.split()[2:]]


def test_header_past_the_cache():
    r = D.raw("alice")
    r.cmd("c", "CREATE big")
    uid = r.append(BIG_HEADER + BIG_BODY, "big")
    small = r.append(b"Subject: other\r\nFrom: x@heron.test\r\n\r\nsmall\r\n", "big")
    assert r.cmd("x", "SELECT big")[-1].startswith("x OK")
    assert len(BIG_HEADER) > 256 * 1024
    assert_eq(literal(r, "f", "UID FETCH %d BODY.PEEK[HEADER]" % uid), BIG_HEADER)
    assert_eq(literal(r, "f", "UID FETCH %d RFC822.HEADER" % uid), BIG_HEADER)
    assert_eq(literal(r, "f", "UID FETCH %d BODY.PEEK[HEADER]<262000.1000>" % uid),
              BIG_HEADER[262000:263000])
    assert_eq(literal(r, "f", "UID FETCH %d BODY.PEEK[HEADER.FIELDS (SUBJECT FROM)]" % uid),
              b"Subject: late subject zqxlate\r\nFrom: Late Sender <late@heron.test>\r\n\r\n")
    got = literal(r, "f", "UID FETCH %d BODY.PEEK[HEADER.FIELDS.NOT (X-FILLER-00000 DATE)]"
                  % uid)
    assert got.endswith(LATE + b"\r\n") and b"X-Filler-00319" in got, got[-300:]
    assert_eq(search(r, "SUBJECT zqxlate"), [uid])
    assert_eq(search(r, "FROM late@heron.test"), [uid])
    assert_eq(search(r, "HEADER X-Late marker-kvw"), [uid])
    assert_eq(search(r, "NOT HEADER X-Late marker-kvw"), [small])
    assert_eq(literal(r, "f", "UID FETCH %d BINARY.PEEK[1]" % uid), BIG_BODY)
    out = r.cmd("f", "UID FETCH %d (BINARY.SIZE[1] ENVELOPE)" % uid)
    assert out[-1].startswith("f OK"), out
    assert_in("BINARY.SIZE[1] %d" % len(BIG_BODY), out[0])
    assert_in('"late subject zqxlate" (("Late Sender" NIL "late" "heron.test"))', out[0])


def many_parts():
    parts = []
    for i in range(NPARTS):
        parts.append(b"--b0\r\nContent-Type: text/plain; charset=us-ascii\r\n"
                     b"Content-Description: part %d %s\r\n\r\nbody of part %d\r\n"
                     % (i + 1, b"d" * DESC, i + 1))
    return (b"From: Parts <parts@heron.test>\r\nSubject: a thousand parts\r\n"
            b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b0\r\n\r\n" +
            b"".join(parts) + b"--b0--\r\n")


def test_message_too_big_to_cache_before():
    r = D.raw("bob")
    uid = r.append(many_parts())
    assert r.cmd("x", "SELECT INBOX")[-1].startswith("x OK")
    r.send("f UID FETCH %d (ENVELOPE BODYSTRUCTURE)\r\n" % uid)
    out = r.until_tag("f")
    assert out[-1].startswith("f OK"), out[-1]
    text = "\r\n".join(out[:-1])
    assert_in('"a thousand parts" (("Parts" NIL "parts" "heron.test"))', text)
    assert "BODYSTRUCTURE ((\"text\" \"plain\"" in text, text[:300]
    assert_in("part %d %s" % (NPARTS, "d" * 20), text)
    assert_in('"mixed" ("boundary" "b0")', text)
    assert_eq(literal(r, "f", "UID FETCH %d BODY.PEEK[%d]" % (uid, NPARTS)),
              b"body of part %d" % NPARTS)
    assert_eq(search(r, "SUBJECT thousand"), [uid])


def test_verify_clean():
    mailctl = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(IMAPD))),
                           "mailctl", "mailctl")
    v = subprocess.run([mailctl, "-c", D.conf, "verify"], capture_output=True, text=True,
                       timeout=120)
    assert v.returncode == 0, (v.returncode, v.stdout, v.stderr)


def main():
    global IMAPD, DELIVER, D
    IMAPD, DELIVER = sys.argv[1], sys.argv[2]
    D = Imapd(IMAPD, deliver=DELIVER, extra={"line_max": "64k"},)
    return run_suite(D, [test_header_past_the_cache, test_message_too_big_to_cache_before,
                         test_verify_clean], D.dir)


if __name__ == "__main__":
    sys.exit(main())
