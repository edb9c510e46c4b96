"""imapd end to end: SORT, THREAD and ESORT (RFC 5256, RFC 5957, RFC 5267) on a mailbox built to
cover the algorithms' corners: base subjects with Re:/Fwd:/[blob]/(fwd)/[fwd: ...], a missing
Date (the internal date stands in), References chains through a message that is not there
(a dummy parent), In-Reply-To alone, a reference that would make a loop, display names in RFC
2047 words. The expected answers follow the RFCs' algorithms step by step (and are what
Dovecot answers for the same mailbox: bench/imap/sort_thread compares the two).

Usage: test_imapd_sort.py IMAPD_BINARY DELIVER_BINARY"""
import os
import imaplib
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import IMAP_PASSWORD as PASSWORD, Imapd, assert_eq, run_suite  # noqa: E402

IMAPD = DELIVER = None
D = None  # the imapd the tests talk to

HEADERS = [
    "Subject: Hello\r\nDate: Mon, 1 Jan 2001 10:00:00 +0000\r\nFrom: Zed <zed@b.example>\r\n"
    "To: amy@x\r\nMessage-ID: <1@x>\r\n",
    "Subject: Re: hello\r\nDate: Mon, 1 Jan 2001 11:00:00 +0000\r\nFrom: amy@a.example\r\n"
    "To: Bob <bob@x>\r\nMessage-ID: <2@x>\r\nReferences: <1@x>\r\n",
    "Subject: [list] Re: Fwd: HELLO (fwd)\r\nDate: Mon, 1 Jan 2001 09:00:00 +0000\r\n"
    "From: \"Carl\" <carl@c.example>\r\nMessage-ID: <3@x>\r\nIn-Reply-To: <2@x>\r\n",
    "Subject: other\r\nDate: Tue, 2 Jan 2001 10:00:00 +0000\r\nFrom: bob@b.example\r\n"
    "Cc: x@y\r\nMessage-ID: <4@x>\r\nReferences: <gone@x>\r\n",
    "Subject: Re: other\r\nDate: Tue, 2 Jan 2001 12:00:00 +0000\r\nFrom: dan@d.example\r\n"
    "Message-ID: <5@x>\r\nReferences: <gone@x>\r\n",
    "Subject: [fwd: other]\r\nDate: Wed, 3 Jan 2001 12:00:00 +0000\r\nFrom: eve@e.example\r\n"
    "Message-ID: <6@x>\r\n",
    "Subject: lone\r\nFrom: =?utf-8?q?=C3=84rne?= <fay@f.example>\r\nMessage-ID: <7@x>\r\n"
    "References: <4@x> <5@x>\r\n",
]


def test_fill_mailbox():
    D.raw("carol")  # the first login makes the user
    for h in HEADERS:
        D.deliver("carol", (h + "\r\nbody\r\n").encode())


def check(cases):
    r = D.raw("carol")
    assert r.cmd("s", "SELECT INBOX")[-1].startswith("s OK")
    for cmd, want in cases:
        out = r.cmd("t", cmd)
        assert_eq(out[:-1], [want], cmd)
        assert out[-1].startswith("t OK "), (cmd, out)


def test_sort():
    check([
        ("SORT (SUBJECT) UTF-8 ALL", "* SORT 1 2 3 7 4 5 6"),
        ("SORT (REVERSE SUBJECT DATE) UTF-8 ALL", "* SORT 4 5 6 7 3 1 2"),
        ("SORT (FROM) UTF-8 ALL", "* SORT 2 4 3 5 6 7 1"),
        ("SORT (DISPLAYFROM) UTF-8 ALL", "* SORT 2 4 3 5 6 1 7"),
        ("SORT (DATE) UTF-8 ALL", "* SORT 3 1 2 4 5 6 7"),
        ("SORT (REVERSE DATE) UTF-8 ALL", "* SORT 7 6 5 4 2 1 3"),
        ("SORT (CC) UTF-8 ALL", "* SORT 1 2 3 5 6 7 4"),
        ("SORT (TO DATE) UTF-8 ALL", "* SORT 3 4 5 6 7 1 2"),
        ("SORT (DISPLAYTO) UTF-8 ALL", "* SORT 3 4 5 6 7 1 2"),
        ("SORT (SUBJECT) US-ASCII FROM b.example", "* SORT 1 4"),
        ("UID SORT (REVERSE DATE) UTF-8 2:4", "* SORT 4 2 3"),
        ("SORT (SUBJECT) UTF-8 SUBJECT nothing", "* SORT"),
    ])


def test_esort():
    check([
        ("SORT RETURN (MIN MAX COUNT ALL) (DATE) UTF-8 ALL",
         '* ESEARCH (TAG "t") MIN 3 MAX 7 COUNT 7 ALL 3,1,2,4,5,6,7'),
        ("SORT RETURN () (REVERSE SUBJECT) UTF-8 1:3",
         '* ESEARCH (TAG "t") ALL 1,2,3'),
        ("UID SORT RETURN (COUNT) (SIZE) UTF-8 ALL", '* ESEARCH (TAG "t") UID COUNT 7'),
        ("SORT RETURN (MIN) (DATE) UTF-8 SUBJECT nothing", '* ESEARCH (TAG "t")'),
    ])


def test_thread():
    check([
        ("THREAD ORDEREDSUBJECT UTF-8 ALL", "* THREAD (3 (1)(2))(4 (5)(6))(7)"),
        ("THREAD REFERENCES UTF-8 ALL", "* THREAD (1 2 3)((4)(5 7)(6))"),
        ("THREAD REFS UTF-8 ALL", "* THREAD (1 2 3)(6)((4)(5 7))"),
        ("THREAD REFERENCES US-ASCII 4:6", "* THREAD ((4)(5)(6))"),
        ("UID THREAD REFERENCES UTF-8 1:2", "* THREAD (1 2)"),
        ("THREAD REFERENCES UTF-8 SUBJECT nothing", "* THREAD"),
    ])


def test_errors():
    r = D.raw("carol")
    r.cmd("s", "SELECT INBOX")
    for cmd, want in [
        ("SORT (FOO) UTF-8 ALL", "t BAD Expected: SORT (criteria) charset search-keys"),
        ("SORT (REVERSE) UTF-8 ALL", "t BAD Expected: SORT (criteria) charset search-keys"),
        ("SORT (REVERSE REVERSE DATE) UTF-8 ALL",
         "t BAD Expected: SORT (criteria) charset search-keys"),
        ("SORT () UTF-8 ALL", "t BAD Expected: SORT (criteria) charset search-keys"),
        ("SORT (DATE) KOI8-R ALL", "t NO [BADCHARSET (UTF-8 US-ASCII)] Unsupported charset"),
        ("SORT (DATE) UTF-8", "t BAD Missing search key"),
        ("SORT RETURN (FOO) (DATE) UTF-8 ALL", "t BAD Invalid RETURN options"),
        ("THREAD FOO UTF-8 ALL", "t BAD Expected: THREAD algorithm charset search-keys"),
        ("THREAD REFS", "t BAD Expected: THREAD algorithm charset search-keys"),
    ]:
        assert_eq(r.cmd("t", cmd), [want], cmd)
    r = D.raw("carol")
    assert_eq(r.cmd("u", "SORT (DATE) UTF-8 ALL"), ["u BAD No mailbox selected"])


def test_imaplib():
    m = imaplib.IMAP4("127.0.0.1", D.port)
    m.login("carol", PASSWORD)
    m.select("INBOX")
    assert_eq(m.sort("(REVERSE DATE)", "UTF-8", "ALL"), ("OK", [b"7 6 5 4 2 1 3"]))
    assert_eq(m.thread("REFERENCES", "UTF-8", "ALL"),
              ("OK", [b"(1 2 3)((4)(5 7)(6))"]))
    m.logout()


def main():
    global IMAPD, DELIVER, D
    IMAPD, DELIVER = sys.argv[1], sys.argv[2]
    D = Imapd(IMAPD, deliver=DELIVER)
    return run_suite(D, [test_fill_mailbox, test_sort, test_esort, test_thread, test_errors,
                         test_imaplib], D.dir)


if __name__ == "__main__":
    sys.exit(main())
