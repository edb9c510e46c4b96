"""imapd against the real slapd of scripts/ldap (bind mode): users log in with their directory
password, a wrong password and an unknown user are refused, the session works after login.

Usage: test_imapd_ldap.py IMAPD_BINARY DELIVER_BINARY SOURCE_ROOT"""
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Imapd, ImapRaw as Raw, Slapd  # noqa: E402
from messages import SIMPLE  # noqa: E402

IMAPD = DELIVER = ROOT = None


class TestLdap(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ldir = tempfile.mkdtemp(prefix="heron-imapd-ldap-")
        slapd = Slapd(ROOT, cls.ldir, users=5)

        def stop():
            slapd.stop()
            shutil.rmtree(cls.ldir, ignore_errors=True)
        cls.addClassCleanup(stop)
        slapd.start()
        directory = {"backend": "ldap", "uri": slapd.uri, "base": slapd.env["LDAP_PEOPLE"],
                     "auth_mode": "bind"}
        cls.d = Imapd(IMAPD, deliver=DELIVER, directory=directory)
        cls.d.__enter__()
        cls.addClassCleanup(cls.d.__exit__, None, None, None)

    def test_login_against_slapd(self):
        r = Raw(self.d.port)
        self.addCleanup(r.close)
        self.assertEqual(r.cmd("a", "LOGIN user3 wrong"),
                         ["a NO [AUTHENTICATIONFAILED] Authentication failed"])
        self.assertEqual(r.cmd("b", "LOGIN nosuchuser user3"),
                         ["b NO [AUTHENTICATIONFAILED] Authentication failed"])
        self.assertTrue(r.cmd("c", "LOGIN user3 user3")[-1].startswith("c OK [CAPABILITY"))
        r.send(b"d APPEND INBOX {%d+}\r\n" % len(SIMPLE) + SIMPLE + b"\r\n")
        self.assertRegex(r.until_tag("d")[-1], r"^d OK \[APPENDUID \d+ 1\] APPEND completed$")
        out = r.cmd("e", "SELECT INBOX")
        self.assertIn("* 1 EXISTS", out)
        self.assertEqual(r.cmd("f", "UID SEARCH SUBJECT lunch"),
                         ["* SEARCH 1", "f OK SEARCH completed"])

    def test_imaplib_login(self):
        c = self.d.connect()
        self.assertEqual(c.login("user4", "user4")[0], "OK")
        self.assertEqual(c.select("INBOX")[0], "OK")
        c.logout()


def main():
    global IMAPD, DELIVER, ROOT
    IMAPD, DELIVER, ROOT = sys.argv[1], sys.argv[2], sys.argv[3]
    unittest.main(argv=[sys.argv[0], "-v"])


if __name__ == "__main__":
    main()
