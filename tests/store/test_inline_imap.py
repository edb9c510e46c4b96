#!/usr/bin/env python3
"""Inline bodies through imapd: mtad takes a small multipart message (kept in the index:
format 3, [store] inline_max 16K by default) and a large one (a file); imapd's FETCH gives
each back byte-exact (BODY[] ends with what was sent, RFC822.SIZE its length), a partial
BODY[]<100.50> and BODY[1] / BODY[2] of the inline one are the right bytes, and the store
holds one message file (the large one) for the two.

  test_inline_imap.py SOURCE_ROOT MTAD IMAPD"""
import imaplib
import os
import re
import smtplib
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import DOMAIN, Daemon, run_main, run_tests, shared_conf  # noqa: E402

ROOT, MTAD, IMAPD = sys.argv[1:4]
TMP = SMTP_PORT = IMAP_PORT = None

PART1 = b"".join(b"line %d of the first part, plain text\r\n" % i for i in range(80))
PART2 = b"".join(b"QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2\r\n"
                 for _ in range(30))
SMALL = (b"From: a@example.org\r\nTo: user1@" + DOMAIN.encode() + b"\r\n"
         b"Subject: inline multipart\r\nMIME-Version: 1.0\r\n"
         b"Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n"
         b"--b1\r\nContent-Type: text/plain\r\n\r\n" + PART1 +
         b"\r\n--b1\r\nContent-Type: application/octet-stream\r\n"
         b"Content-Transfer-Encoding: base64\r\n\r\n" + PART2 + b"\r\n--b1--\r\n")
LARGE = (b"From: a@example.org\r\nTo: user1@" + DOMAIN.encode() + b"\r\n"
         b"Subject: large\r\n\r\n" + b"".join(b"large body line %05d\r\n" % i
                                            for i in range(2000)))


def fetch(c, uid, item):
    typ, data = c.uid("FETCH", str(uid), f"({item})")
    assert typ == "OK", data
    for d in data:
        if isinstance(d, tuple):
            return d[1]
    raise AssertionError(f"no literal in {data!r}")


def message_files(store):
    n = 0
    for root, _dirs, files in os.walk(store):
        n += sum(1 for f in files if "/blobs/" in root + "/" and re.fullmatch(r"[0-9a-f]{16}", f))
    return n


def test_inline_and_file_bodies():
    c = imaplib.IMAP4("127.0.0.1", IMAP_PORT, timeout=60)
    c.login("user1", "user1")
    with smtplib.SMTP("127.0.0.1", SMTP_PORT, timeout=60) as s:
        s.sendmail("a@example.org", [f"user1@{DOMAIN}"], SMALL)
        s.sendmail("a@example.org", [f"user1@{DOMAIN}"], LARGE)
    typ, data = c.select("INBOX", readonly=True)
    assert typ == "OK" and data[0] == b"2", data
    for uid, sent in ((1, SMALL), (2, LARGE)):
        whole = fetch(c, uid, "BODY.PEEK[]")
        assert whole.endswith(sent), (uid, whole[-200:])
        typ, data = c.uid("FETCH", str(uid), "(RFC822.SIZE)")
        size = int(re.search(rb"RFC822\.SIZE (\d+)", data[0]).group(1))
        assert size == len(whole), (uid, size, len(whole))
        part = fetch(c, uid, "BODY.PEEK[]<100.50>")
        assert part == whole[100:150], (uid, part, whole[100:150])
    assert fetch(c, 1, "BODY.PEEK[1]") == PART1, "BODY[1]"
    assert fetch(c, 1, "BODY.PEEK[2]") == PART2, "BODY[2]"
    assert fetch(c, 1, "BODY.PEEK[1]<10.20>") == PART1[10:30], "BODY[1]<10.20>"
    c.logout()
    files = message_files(os.path.join(TMP, "store"))
    assert files == 1, f"{files} message files for 1 large and 1 inline message"


def main():
    global TMP, SMTP_PORT, IMAP_PORT
    TMP = tempfile.mkdtemp(prefix="heron-inline-")
    conf, SMTP_PORT, IMAP_PORT = shared_conf(TMP, ["user1"])
    daemons = [Daemon(MTAD, conf, os.path.join(TMP, "mtad.log"), SMTP_PORT),
               Daemon(IMAPD, conf, os.path.join(TMP, "imapd.log"), IMAP_PORT)]

    def body():
        for d in daemons:
            d.start(timeout=60)
        return run_tests([test_inline_and_file_bodies])
    return run_main(body, TMP, daemons)


if __name__ == "__main__":
    sys.exit(main())
