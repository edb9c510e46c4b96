"""imapd end to end: SEARCH on decoded text. Bodies in base64 and quoted-printable, charsets
UTF-8 and ISO-8859-1, RFC 2047 encoded words in header fields, and a body whose match
straddles the server's read chunks, compared case-insensitively (exact responses).

Usage: test_imapd_search.py IMAPD_BINARY DELIVER_BINARY"""
import base64
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, assert_eq, run_suite  # noqa: E402

IMAPD = DELIVER = None
D = None  # the imapd the tests talk to

B64_UTF8 = (
    b"From: a@heron.test\r\nSubject: one\r\nMIME-Version: 1.0\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
    base64.encodebytes("Grüße aus MÜNCHEN, sagt das Zebra.\n".encode()).replace(b"\n", b"\r\n"))
QP_LATIN1 = (
    b"From: b@heron.test\r\nSubject: two\r\nMIME-Version: 1.0\r\n"
    b"Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\n"
    b"Content-Type: text/plain; charset=ISO-8859-1\r\n"
    b"Content-Transfer-Encoding: quoted-printable\r\n\r\n"
    b"Caf=E9 cr=E8me br=FBl=E9e, a lon=\r\ng word.\r\n--x--\r\n")
ENCODED_WORDS = (
    b"From: =?ISO-8859-1?Q?Andr=E9?= <andre@heron.test>\r\n"
    b"Subject: =?UTF-8?B?w5xiZXJyYXNjaHVuZw==?= =?UTF-8?Q?_Party?=\r\n"
    b"X-Greeting: =?UTF-8?Q?Hello?= =?UTF-8?Q?World?=\r\n\r\nplain body\r\n")


def straddling():
    """A plain message whose word "straddle" crosses byte 65536 of the file."""
    head = b"From: c@heron.test\r\nSubject: big\r\n\r\n"
    pad_len = 65536 - 4 - len(head)
    pad = (b"x" * 70 + b"\r\n") * (pad_len // 72) + b"y" * (pad_len % 72)
    return head + pad + b"STRADDLE in the middle\r\n" + b"z" * 1000 + b"\r\n"


def test_decoded_search():
    r = D.raw("bob")
    r.cmd("c", "CREATE Dec")
    for msg in (B64_UTF8, QP_LATIN1, ENCODED_WORDS, straddling()):
        r.append(msg, "Dec")
    assert_eq(r.cmd("s", "SELECT Dec")[-1], "s OK [READ-WRITE] SELECT completed")
    cases = [
        ('BODY "münchen"', "1"), ('BODY "GRÜSSE"', ""), ('BODY "grüße"', "1"),
        ("BODY zebra", "1"), ('CHARSET UTF-8 BODY "MÜNCHEN"', "1"),
        ("BODY R3LDvMOfZSBhdXM", ""),  # the base64 text itself is not searched
        ('BODY "café crème"', "2"), ('BODY "BRÛLÉE"', "2"), ('BODY "long word"', "2"),
        ("BODY Caf=E9", ""), ('TEXT "café"', "2"),
        ('SUBJECT "überraschung party"', "3"), ('FROM "andré"', "3"),
        ('HEADER X-Greeting "helloworld"', "3"), ('TEXT "ÜBERRASCHUNG"', "3"),
        ('BODY "überraschung"', ""), ("BODY straddle", "4"), ("TEXT STRADDLE", "4"),
        ("BODY nowhere", ""),
    ]
    for key, want in cases:
        assert_eq(r.cmd("s", "SEARCH " + key),
                  ["* SEARCH" + (" " + want if want else ""),
                   "s OK SEARCH completed"], key)


def main():
    global IMAPD, DELIVER, D
    IMAPD, DELIVER = sys.argv[1], sys.argv[2]
    D = Imapd(IMAPD, deliver=DELIVER)
    return run_suite(D, [test_decoded_search], D.dir)


if __name__ == "__main__":
    sys.exit(main())
