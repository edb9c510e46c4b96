"""imapd against the real slapd of scripts/ldap (bind mode): users log in with their directory
password, a wrong password and an unknown user are refused, the session works after login; a
user whose mailHost names another host gets a login referral (RFC 2221), one homed here logs
in.

Usage: test_imapd_ldap.py IMAPD_BINARY DELIVER_BINARY SOURCE_ROOT"""
import base64
import os
import shutil
import subprocess
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
        cls.slapd = slapd
        cls.d = Imapd(IMAPD, deliver=DELIVER, directory=directory,
                      extra={"hostname": "store1.heron.test"})
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

    def set_mailhost(self, user, host):
        e = self.slapd.env
        ldif = "dn: uid=%s,%s\nchangetype: modify\nreplace: mailHost\nmailHost: %s\n" % (
            user, e["LDAP_PEOPLE"], host)
        subprocess.run(["ldapmodify", "-x", "-H", e["LDAP_URI"], "-D", e["LDAP_ADMIN_DN"],
                        "-w", e["LDAP_ADMIN_PASSWORD"]], input=ldif.encode(), check=True,
                       stdout=subprocess.DEVNULL)

    def test_login_referral(self):
        self.set_mailhost("user5", "other.heron.test")
        self.set_mailhost("user2", "STORE1.heron.test")  # this host, in any case
        r = Raw(self.d.port)
        self.addCleanup(r.close)
        self.assertIn(" LOGIN-REFERRALS ", r.greeting)
        self.assertEqual(r.cmd("a", "LOGIN user5 user5"), [
            "a NO [REFERRAL imap://user5;AUTH=*@other.heron.test/] Your mailbox is on "
            "other.heron.test"])
        self.assertEqual(r.cmd("b", "SELECT INBOX"), ["b NO Log in first"])
        tok = base64.b64encode(b"\0user5\0user5").decode()
        self.assertEqual(r.cmd("c", "AUTHENTICATE PLAIN " + tok), [
            "c NO [REFERRAL imap://user5;AUTH=*@other.heron.test/] Your mailbox is on "
            "other.heron.test"])
        self.assertEqual(r.cmd("d", "LOGIN user5 wrong"),
                         ["d NO [AUTHENTICATIONFAILED] Authentication failed"])  # no hint
        self.assertTrue(r.cmd("e", "LOGIN user2 user2")[-1].startswith("e OK [CAPABILITY"))

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
