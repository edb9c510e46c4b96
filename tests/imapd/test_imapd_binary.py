"""imapd end to end: BINARY (RFC 3516) and MULTIAPPEND (RFC 3502), with exact responses on the
wire: decoded base64 and quoted-printable parts, BINARY.SIZE, partial fetches, literal8 for NUL
bytes, [UNKNOWN-CTE], APPEND with literal8, several messages in one APPEND (all or none).

Usage: test_imapd_binary.py IMAPD_BINARY DELIVER_BINARY"""
import base64
import os
import quopri
import random
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, run_suite  # noqa: E402
from heronlib import assert_eq, assert_re  # noqa: E402
from messages import SIMPLE  # noqa: E402

D = None  # the imapd the running tests talk to

PAYLOAD = bytes(range(256)) * 3  # NUL bytes and every other octet
# trailing white space on a quoted-printable line is transport padding, deleted (RFC 2045)
QP_TEXT = "caf\u00e9 \u2014 a soft\r\nbreak and =3D  sign\r\nend".encode()
QP_BODY = b"caf=C3=A9 =E2=80=94 a so=\r\nft  \r\nbreak and =3D3D  sign \t\r\nend \t"


def mime(parts):
    out = (b"From: Alice <alice@heron.test>\r\nTo: bob@heron.test\r\nSubject: Parts\r\n"
           b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n")
    for headers, body in parts:
        out += b"--b1\r\n" + headers + b"\r\n" + body + b"\r\n"
    return out + b"--b1--\r\n"


def b64lines(data):
    enc = base64.b64encode(data)
    return b"\r\n".join(enc[i:i + 76] for i in range(0, len(enc), 76))


MULTI = mime([
    (b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n",
     QP_BODY),
    (b"Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: BASE64\r\n",
     b64lines(PAYLOAD)),
    (b"Content-Type: text/plain\r\n", b"plain seven bit"),
])
UNKNOWN = (b"From: Alice <alice@heron.test>\r\nSubject: Old\r\nMIME-Version: 1.0\r\n"
           b"Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: x-uuencode\r\n"
           b"\r\nbegin 644 a\r\n#86)C\r\n`\r\nend\r\n")


def fetch_literal(r, tag, text):
    """Sends a FETCH of one literal item: (the line before the literal, the literal's bytes,
    the rest of the response, the tagged line)."""
    r.send("%s %s\r\n" % (tag, text))
    head = r.line()
    n = int(head[head.rindex("{") + 1:-1])
    data = r.read(n)
    rest = r.line()
    return head, data, rest, r.until_tag(tag)


def box(name, *msgs):
    r = D.raw()
    r.cmd("c", "CREATE %s" % name)
    for m in msgs:
        r.append(m, name)
    assert_eq(r.cmd("s", "SELECT %s" % name)[-1], "s OK [READ-WRITE] SELECT completed")
    return r


def test_base64_part():
    r = box("Bin1", MULTI)
    head, data, rest, tail = fetch_literal(r, "a", "FETCH 1 BINARY.PEEK[2]")
    assert_eq(head, "* 1 FETCH (BINARY[2] ~{768}")
    assert_eq(data, PAYLOAD)
    assert_eq((rest, tail), (")", ["a OK Fetch completed"]))
    assert_eq(r.cmd("b", "FETCH 1 (BINARY.SIZE[2] BINARY.SIZE[1] BINARY.SIZE[3])"), [
        "* 1 FETCH (BINARY.SIZE[2] 768 BINARY.SIZE[1] %d BINARY.SIZE[3] 15)" % len(QP_TEXT),
        "b OK Fetch completed"])
    # PEEK and SIZE leave \Seen alone
    assert_eq(r.cmd("c", "FETCH 1 FLAGS"),
              ["* 1 FETCH (FLAGS (\\Recent))", "c OK Fetch completed"])


def test_quoted_printable_and_seen():
    r = box("Bin2", MULTI)
    head, data, rest, tail = fetch_literal(r, "a", "FETCH 1 BINARY[1]")
    assert_eq(head, "* 1 FETCH (BINARY[1] {%d}" % len(QP_TEXT))
    assert_eq(data, QP_TEXT)
    assert_eq((rest, tail), (" FLAGS (\\Seen \\Recent))", ["a OK Fetch completed"]))
    assert_eq(r.cmd("b", "FETCH 1 BINARY.PEEK[3]"), [
        "* 1 FETCH (BINARY[3] {15}\r\nplain seven bit)", "b OK Fetch completed"])


def test_partial():
    r = box("Bin3", MULTI)
    head, data, rest, tail = fetch_literal(r, "a", "FETCH 1 BINARY.PEEK[2]<100.50>")
    assert_eq(head, "* 1 FETCH (BINARY[2]<100> ~{50}")
    assert_eq(data, PAYLOAD[100:150])
    head, data, rest, tail = fetch_literal(r, "b", "FETCH 1 BINARY.PEEK[2]<700.100>")
    assert_eq(head, "* 1 FETCH (BINARY[2]<700> ~{68}")
    assert_eq(data, PAYLOAD[700:])
    head, data, rest, tail = fetch_literal(r, "c", "FETCH 1 BINARY.PEEK[1]<3.4>")
    assert_eq((head, data), ("* 1 FETCH (BINARY[1]<3> {4}", QP_TEXT[3:7]))
    assert_eq(r.cmd("d", "FETCH 1 BINARY.PEEK[3]<20.5>"), [
        "* 1 FETCH (BINARY[3]<20> {0}\r\n)", "d OK Fetch completed"])


def test_sections():
    r = box("Bin4", MULTI, SIMPLE)
    assert_eq(r.cmd("a", "FETCH 1 BINARY.PEEK[4]"),
              ["* 1 FETCH (BINARY[4] NIL)", "a OK Fetch completed"])
    assert_eq(r.cmd("b", "FETCH 1 BINARY.SIZE[4]"),
              ["* 1 FETCH (BINARY.SIZE[4] 0)", "b OK Fetch completed"])
    assert_eq(r.cmd("c", "FETCH 1 BINARY.PEEK[1.HEADER]"),
              ["c BAD Invalid FETCH item"])
    assert_eq(r.cmd("d", "FETCH 1 BINARY.SIZE[1]<0.5>"),
              ["d BAD Invalid FETCH item"])
    # BINARY[] is the message as stored; BINARY[1] of a single-part message its body
    head, data, rest, tail = fetch_literal(r, "e", "FETCH 2 BINARY.PEEK[]")
    assert_eq((head, data), ("* 2 FETCH (BINARY[] {%d}" % len(SIMPLE), SIMPLE))
    body = SIMPLE.split(b"\r\n\r\n", 1)[1]
    head, data, rest, tail = fetch_literal(r, "f", "UID FETCH 2 BINARY.PEEK[1]")
    assert_eq((head, data), ("* 2 FETCH (UID 2 BINARY[1] {%d}" % len(body), body))


def test_unknown_cte():
    r = box("Bin5", SIMPLE, UNKNOWN)
    assert_eq(r.cmd("a", "FETCH 2 BINARY.PEEK[1]"), [
        "a NO [UNKNOWN-CTE] Cannot decode a part's Content-Transfer-Encoding"])
    assert_eq(r.cmd("b", "FETCH 2 BINARY.SIZE[1]"), [
        "b NO [UNKNOWN-CTE] Cannot decode a part's Content-Transfer-Encoding"])
    # the messages before it were answered; BODY[] needs no decoding
    assert_eq(r.cmd("c", "FETCH 1:2 BINARY.SIZE[1]"), [
        "* 1 FETCH (BINARY.SIZE[1] 49)",
        "c NO [UNKNOWN-CTE] Cannot decode a part's Content-Transfer-Encoding"])
    assert_eq(r.cmd("d", "FETCH 2 BODY.PEEK[1]"), [
        "* 2 FETCH (BODY[1] {28}\r\nbegin 644 a\r\n#86)C\r\n`\r\nend\r\n)",
        "d OK Fetch completed"])


def test_large_attachment_imaplib():
    # decoded across many stream chunks and output back-pressure, read by imaplib
    rnd = random.Random(7)
    blob = bytes(rnd.getrandbits(8) for _ in range(400 * 1024))
    msg = mime([(b"Content-Type: application/octet-stream\r\n"
                 b"Content-Transfer-Encoding: base64\r\n", b64lines(blob))])
    c = D.login("alice")
    c.create("Bin6")
    assert_eq(c.append("Bin6", None, None, msg)[0], "OK")
    c.select("Bin6")
    typ, data = c.fetch("1", "(BINARY.SIZE[1] BINARY.PEEK[1])")
    assert_eq(typ, "OK")
    assert_eq(data[0][0], b"1 (BINARY.SIZE[1] 409600 BINARY[1] ~{409600}")
    assert_eq(data[0][1], blob)
    typ, data = c.fetch("1", "(BINARY.PEEK[1]<300000.70000>)")
    assert_eq(data[0][1], blob[300000:370000])
    # quoted-printable escapes, soft breaks and padding cut by the stream's chunks
    text = b"".join(b"l\xe9ne %d = %s\n" % (i, b"x" * (i % 150)) for i in range(4000))
    enc = re.sub(rb"(?<!=)\r\n", b" \t\r\n",
                 quopri.encodestring(text).replace(b"\n", b"\r\n"))
    msg = mime([(b"Content-Type: text/plain; charset=iso-8859-1\r\n"
                 b"Content-Transfer-Encoding: quoted-printable\r\n", enc)])
    assert_eq(c.append("Bin6", None, None, msg)[0], "OK")
    want = text.replace(b"\n", b"\r\n")
    typ, data = c.fetch("2", "(BINARY.SIZE[1] BINARY.PEEK[1])")
    assert_eq(data[0][0], b"2 (BINARY.SIZE[1] %d BINARY[1] {%d}" % (
        len(want), len(want)))
    assert_eq(data[0][1], want)
    typ, data = c.fetch("2", "(BINARY.PEEK[1]<65000.70000>)")
    assert_eq(data[0][1], want[65000:135000])
    c.logout()


def test_append_literal8():
    r = D.raw()
    r.cmd("c", "CREATE Bin7")
    body = b"\x00\x01binary\x00\r\nbytes\xff\x00"
    msg = (b"Subject: raw\r\nMIME-Version: 1.0\r\nContent-Type: application/octet-stream\r\n"
           b"Content-Transfer-Encoding: binary\r\n\r\n" + body)
    r.send(b"a APPEND Bin7 ~{%d}\r\n" % len(msg))
    assert_eq(r.line(), "+ Ready for literal data")
    r.send(msg + b"\r\n")
    out = r.until_tag("a")
    assert_re(out[-1], r"^a OK \[APPENDUID \d+ 1\] APPEND completed$")
    r.send(b"b APPEND Bin7 ~{%d+}\r\n%s\r\n" % (len(msg), msg))
    assert_re(r.until_tag("b")[-1], r"^b OK \[APPENDUID \d+ 2\] APPEND completed$")
    r.cmd("s", "SELECT Bin7")
    head, data, rest, tail = fetch_literal(r, "d", "FETCH 1 BINARY.PEEK[1]")
    assert_eq((head, data), ("* 1 FETCH (BINARY[1] ~{%d}" % len(body), body))
    # BODY[] is a plain literal, which cannot hold NUL (RFC 3501 CHAR8): each goes as
    # 0x80, the size as stored
    head, data, rest, tail = fetch_literal(r, "e", "FETCH 2 BODY.PEEK[]")
    assert_eq(data, msg.replace(b"\x00", b"\x80"))
    # NUL only in a literal8; literal8 only for APPEND messages
    r.send(b"f APPEND Bin7 {%d+}\r\n%s\r\n" % (len(msg), msg))
    assert_eq(r.until_tag("f"),
              ["f BAD NUL in a literal: send binary messages as literal8"])
    assert_eq(r.cmd("g", "STATUS Bin7 (MESSAGES)"),
              ["* STATUS Bin7 (MESSAGES 2)", "g OK STATUS completed"])
    assert_eq(r.cmd("h", "LOGIN ~{3}"),
              ["h BAD literal8 (~{n}) only for APPEND messages and SETMETADATA values"])
    assert_eq(r.cmd("i", "LIST \"\" ~Bin*"), ["i OK List completed"])


def status(r, box):
    return r.cmd("st", "STATUS %s (MESSAGES UIDNEXT)" % box)[0]


def test_multiappend():
    r = D.raw("bob")
    r.cmd("c", "CREATE Ma1")
    r.send(b"a APPEND Ma1 (\\Seen) {%d+}\r\n%s (\\Flagged) \"08-Feb-1994 10:00:00 +0000\" "
           b"{%d}\r\n" % (len(SIMPLE), SIMPLE, len(MULTI)))
    assert_eq(r.line(), "+ Ready for literal data")
    r.send(MULTI + b" ~{%d+}\r\n%s\r\n" % (len(SIMPLE), SIMPLE))
    out = r.until_tag("a")
    assert_re(out[-1], r"^a OK \[APPENDUID \d+ 1:3\] APPEND completed$")
    assert_eq(status(r, "Ma1"), "* STATUS Ma1 (MESSAGES 3 UIDNEXT 4)")
    r.cmd("s", "EXAMINE Ma1")
    assert_eq(r.cmd("f", "FETCH 1:3 (FLAGS INTERNALDATE RFC822.SIZE)")[1:3], [
        '* 2 FETCH (FLAGS (\\Flagged \\Recent) INTERNALDATE "08-Feb-1994 10:00:00 +0000" '
        'RFC822.SIZE %d)' % len(MULTI),
        '* 3 FETCH (FLAGS (\\Recent) INTERNALDATE %s RFC822.SIZE %d)' % (
            r.cmd("g", "FETCH 3 INTERNALDATE")[0].split("INTERNALDATE ")[1][:-1],
            len(SIMPLE))])


def test_all_or_none():
    r = D.raw("bob")
    r.cmd("c", "CREATE Ma2")
    r.append(SIMPLE, "Ma2")
    before = status(r, "Ma2")
    assert_eq(before, "* STATUS Ma2 (MESSAGES 1 UIDNEXT 2)")
    # the second message's flag is refused inside the commit: the first goes too
    r.send(b"a APPEND Ma2 {%d+}\r\n%s (\\Bogus) {%d+}\r\n%s\r\n" % (
        len(SIMPLE), SIMPLE, len(SIMPLE), SIMPLE))
    assert_eq(r.until_tag("a")[-1][:6], "a BAD ")
    assert_eq(status(r, "Ma2"), before)
    # a bad date-time on the second message
    r.send(b"b APPEND Ma2 {%d+}\r\n%s \"31-Foo-2020 00:00:00 +0000\" {%d+}\r\n%s\r\n" % (
        len(SIMPLE), SIMPLE, len(SIMPLE), SIMPLE))
    assert_eq(r.until_tag("b"), ["b BAD Invalid date-time"])
    # the second message is too large: refused before its data is sent
    r.send(b"d APPEND Ma2 {%d+}\r\n%s {999999999}\r\n" % (len(SIMPLE), SIMPLE))
    assert_eq(r.until_tag("d"), ["d NO [TOOBIG] Message too large"])
    assert_eq(status(r, "Ma2"), before)
    # and the session goes on: a good pair
    r.send(b"e APPEND Ma2 {%d+}\r\n%s {%d+}\r\n%s\r\n" % (
        len(SIMPLE), SIMPLE, len(SIMPLE), SIMPLE))
    assert_re(r.until_tag("e")[-1], r"^e OK \[APPENDUID \d+ 2:3\] APPEND completed$")


def main():
    global D
    imapd, deliver = sys.argv[1], sys.argv[2]
    groups = [  # each group on a fresh imapd and store
        [test_base64_part, test_quoted_printable_and_seen, test_partial, test_sections,
         test_unknown_cte, test_large_attachment_imaplib, test_append_literal8],
        [test_multiappend, test_all_or_none],
    ]
    rc = 0
    for tests in groups:
        D = Imapd(imapd, deliver=deliver)
        rc |= run_suite(D, tests, D.dir)
    return rc


if __name__ == "__main__":
    sys.exit(main())
