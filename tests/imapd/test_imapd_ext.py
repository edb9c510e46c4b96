"""imapd end to end: the smaller extensions, one raw dialogue each with exact responses:
UNAUTHENTICATE (RFC 8437), OBJECTID (RFC 8474), PREVIEW (RFC 8970) and PARTIAL (RFC 9394).

Usage: test_imapd_ext.py IMAPD_BINARY DELIVER_BINARY"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_imapd_protocol as proto  # noqa: E402


class Unauthenticate(proto.Base):
    def test_back_to_not_authenticated(self):
        r = self.raw()
        self.assertTrue(r.cmd("a", "SELECT INBOX")[-1].startswith("a OK"))
        self.assertEqual(r.cmd("b", "ENABLE CONDSTORE"),
                         ["* ENABLED CONDSTORE", "* OK [HIGHESTMODSEQ 1] Highest", "b OK Enabled"])
        self.assertEqual(r.cmd("c", "UNAUTHENTICATE x"),
                         ["c BAD UNAUTHENTICATE takes no arguments"])
        self.assertEqual(r.cmd("d", "UNAUTHENTICATE"), ["d OK Unauthenticated"])
        self.assertEqual(r.cmd("e", "SELECT INBOX"), ["e NO Log in first"])
        self.assertEqual(r.cmd("f", "UNAUTHENTICATE"), ["f NO Log in first"])
        caps = r.cmd("g", "CAPABILITY")[0]
        self.assertIn(" AUTH=PLAIN", caps)
        self.assertNotIn("UNAUTHENTICATE", caps)
        out = r.cmd("h", 'LOGIN bob "%s"' % proto.PASSWORD)
        self.assertTrue(out[-1].startswith("h OK [CAPABILITY "), out)
        self.assertIn(" UNAUTHENTICATE ", out[-1])
        # a new user, nothing carried over: CONDSTORE is off again
        out = r.cmd("i", "SELECT INBOX")
        self.assertTrue(out[-1].startswith("i OK"))
        self.assertEqual(r.cmd("j", "ENABLE CONDSTORE")[:2],
                         ["* ENABLED CONDSTORE", "* OK [HIGHESTMODSEQ 1] Highest"])
        self.assertEqual(r.cmd("k", "LOGOUT"), ["* BYE Logging out", "k OK Logout completed"])


class ObjectId(proto.Base):
    user = "carol"

    def test_ids(self):
        import re
        r = self.raw()
        out = r.cmd("a", "CREATE Box1")
        m = re.fullmatch(r"a OK \[MAILBOXID \((F[0-9a-f]{16})\)\] CREATE completed", out[0])
        self.assertIsNotNone(m, out)
        box = m.group(1)
        self.assertEqual(r.cmd("b", "STATUS Box1 (MAILBOXID MESSAGES)"),
                         ["* STATUS Box1 (MAILBOXID (%s) MESSAGES 0)" % box,
                          "b OK STATUS completed"])
        self.assertIn("* OK [MAILBOXID (%s)] Ok" % box, r.cmd("c", "SELECT Box1"))
        # the id stays across RENAME (RFC 8474 4.2)
        r.cmd("d", "UNSELECT")
        self.assertEqual(r.cmd("e", "RENAME Box1 Box2"), ["e OK RENAME completed"])
        self.assertEqual(r.cmd("f", "STATUS Box2 (MAILBOXID)")[0],
                         "* STATUS Box2 (MAILBOXID (%s))" % box)
        self.append(r, proto.SIMPLE, "Box2")
        r.cmd("g", "SELECT Box2")
        out = r.cmd("h", "FETCH 1 (EMAILID THREADID)")
        m = re.fullmatch(r"\* 1 FETCH \(EMAILID \((M[0-9a-f]{16})\) THREADID NIL\)", out[0])
        self.assertIsNotNone(m, out)
        mail = m.group(1)
        # COPY keeps the EMAILID (the same message), a new APPEND gets another
        self.assertTrue(r.cmd("i", "COPY 1 Box2")[-1].startswith("i OK"))
        self.append(r, proto.SIMPLE, "Box2")
        r.cmd("n", "NOOP")
        out = r.cmd("j", "FETCH 1:3 EMAILID")
        ids = [re.search(r"EMAILID \(([A-Za-z0-9_-]+)\)", line).group(1) for line in out[:-1]]
        self.assertEqual(ids[:2], [mail, mail])
        self.assertNotEqual(ids[2], mail)
        self.assertEqual(r.cmd("k", "SEARCH EMAILID " + mail),
                         ["* SEARCH 1 2", "k OK SEARCH completed"])
        self.assertEqual(r.cmd("l", "SEARCH THREADID T1"), ["* SEARCH", "l OK SEARCH completed"])
        self.assertEqual(r.cmd("m", "SEARCH EMAILID a+b"), ["m BAD Invalid object id"])


class Preview(proto.Base):
    user = "bob"

    def test_preview(self):
        self.raw()
        for m in [
            b"From: a@b\r\nSubject: plain\r\n\r\nHello   there,\r\n\r\nthis is\tthe body.\r\n",
            b"From: a@b\r\nSubject: mixed\r\nMIME-Version: 1.0\r\n"
            b"Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\n"
            b"Content-Type: application/pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nAAAA\r\n"
            b"--x\r\nContent-Type: text/html; charset=iso-8859-1\r\n"
            b"Content-Transfer-Encoding: quoted-printable\r\n\r\n"
            b"<p>Caf=E9 <b>cr=E8me</b></p>\r\n--x--\r\n",
            b"From: a@b\r\nSubject: attach\r\nMIME-Version: 1.0\r\n"
            b"Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Type: text/plain\r\n"
            b"Content-Disposition: attachment; filename=a.txt\r\n\r\nsecret\r\n--x--\r\n",
            b"From: a@b\r\nSubject: long\r\n\r\n" + b"word " * 100 + b"\r\n",
        ]:
            self.d.deliver(self.user, m)
        r = self.raw()
        r.cmd("s", "SELECT INBOX")
        self.assertEqual(r.cmd("f", "FETCH 1:4 PREVIEW"), [
            '* 1 FETCH (PREVIEW "Hello there, this is the body.")',
            "* 2 FETCH (PREVIEW {12}\r\nCafé crème)",  # 8-bit: a literal for IMAP4rev1
            "* 3 FETCH (PREVIEW NIL)",                    # only an attachment
            '* 4 FETCH (PREVIEW "%s")' % " ".join(["word"] * 40),  # 199 characters
            "f OK Fetch completed"])
        self.assertEqual(r.cmd("g", "FETCH 1 (PREVIEW (LAZY) UID)"), [
            '* 1 FETCH (PREVIEW "Hello there, this is the body." UID 1)', "g OK Fetch completed"])
        self.assertEqual(r.cmd("h", "FETCH 1 (PREVIEW (FOO))"), ["h BAD Invalid FETCH item"])
        self.assertEqual(r.cmd("i", "FETCH 1 FLAGS"), ["* 1 FETCH (FLAGS (\\Recent))",
                                                      "i OK Fetch completed"])  # no \Seen


class Partial(proto.Base):
    user = "carol"

    def test_partial(self):
        self.raw()
        for i in range(10):
            self.d.deliver(self.user, b"From: a@b\r\nSubject: %d\r\n\r\nx\r\n" % (9 - i))
        r = self.raw()
        r.cmd("s", "SELECT INBOX")
        for cmd, want in [
            ("SEARCH RETURN (PARTIAL 1:3) ALL", '* ESEARCH (TAG "p") PARTIAL (1:3 1:3)'),
            ("SEARCH RETURN (PARTIAL -1:-3) ALL", '* ESEARCH (TAG "p") PARTIAL (-1:-3 8:10)'),
            ("UID SEARCH RETURN (PARTIAL 3:1 COUNT) 2:9",
             '* ESEARCH (TAG "p") UID COUNT 8 PARTIAL (3:1 2:4)'),
            ("SEARCH RETURN (PARTIAL 20:30) ALL", '* ESEARCH (TAG "p") PARTIAL (20:30 NIL)'),
            ("SORT RETURN (PARTIAL 1:3) (SUBJECT) UTF-8 ALL",
             '* ESEARCH (TAG "p") PARTIAL (1:3 10,9,8)'),
            ("SORT RETURN (PARTIAL -1:-2 COUNT) (SUBJECT) UTF-8 ALL",
             '* ESEARCH (TAG "p") COUNT 10 PARTIAL (-1:-2 2,1)'),
        ]:
            out = r.cmd("p", cmd)
            self.assertEqual(out[:-1], [want], cmd)
            self.assertTrue(out[-1].startswith("p OK "), (cmd, out))
        for bad in ["SEARCH RETURN (PARTIAL 1:3 ALL) ALL", "SEARCH RETURN (PARTIAL 1:-3) ALL",
                    "SEARCH RETURN (PARTIAL 0:3) ALL", "SEARCH RETURN (PARTIAL) ALL",
                    "SORT RETURN (ALL PARTIAL 1:2) (DATE) UTF-8 ALL"]:
            self.assertEqual(r.cmd("b", bad), ["b BAD Invalid RETURN options"], bad)


def main():
    proto.IMAPD, proto.DELIVER = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])


if __name__ == "__main__":
    main()
