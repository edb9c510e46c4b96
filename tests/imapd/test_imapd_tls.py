"""imapd with TLS: STARTTLS on the imap port, implicit TLS on imaps, LOGINDISABLED and refused
plaintext login before TLS (allow_plaintext_auth = no), no command injection across STARTTLS.
The certificate is generated at test time.

Usage: test_imapd_tls.py IMAPD_BINARY DELIVER_BINARY"""
import imaplib
import os
import ssl
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import IMAP_PASSWORD as PASSWORD, Imapd, ImapRaw as Raw  # noqa: E402

IMAPD = DELIVER = None
BASE = ("IMAP4rev1 IMAP4rev2 LITERAL+ SASL-IR LOGIN-REFERRALS ID ENABLE IDLE NAMESPACE UNSELECT CHILDREN UIDPLUS MOVE "
        "SPECIAL-USE CREATE-SPECIAL-USE STATUS=SIZE ESEARCH CONDSTORE QRESYNC WITHIN LIST-EXTENDED "
        "LIST-STATUS SEARCHRES QUOTA "
        "QUOTA=RES-STORAGE QUOTA=RES-MESSAGE BINARY MULTIAPPEND UTF8=ACCEPT SORT SORT=DISPLAY ESORT "
        "THREAD=ORDEREDSUBJECT THREAD=REFERENCES THREAD=REFS OBJECTID PREVIEW PARTIAL")


class TestTls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Imapd(IMAPD, deliver=DELIVER, tls=True, plaintext=False)
        cls.d.__enter__()
        cls.addClassCleanup(cls.d.__exit__, None, None, None)
        cls.ctx = ssl.create_default_context(cafile=cls.d.cert)

    def test_logindisabled_before_tls(self):
        r = Raw(self.d.port)
        self.addCleanup(r.close)
        self.assertEqual(r.greeting, "* OK [CAPABILITY %s STARTTLS LOGINDISABLED] Heron IMAP "
                                     "ready" % BASE)
        self.assertEqual(r.cmd("a", 'LOGIN alice "%s"' % PASSWORD),
                         ["a NO [PRIVACYREQUIRED] Plaintext login is disabled; use STARTTLS"])
        self.assertEqual(r.cmd("b", "AUTHENTICATE PLAIN AGFsaWNlAHg="),
                         ["b NO [PRIVACYREQUIRED] Plaintext authentication is disabled; use "
                          "STARTTLS"])

    def test_starttls_then_login(self):
        r = Raw(self.d.port)
        self.addCleanup(r.close)
        # "b NOOP" rides along in clear text: it must be dropped, never run inside TLS
        r.send("a STARTTLS\r\nb NOOP\r\n")
        self.assertEqual(r.line(), "a OK Begin TLS negotiation now")
        r.s = self.ctx.wrap_socket(r.s, server_hostname="127.0.0.1")
        self.assertEqual(r.cmd("c", "CAPABILITY"),
                         ["* CAPABILITY %s AUTH=PLAIN" % BASE, "c OK Capability completed"])
        self.assertEqual(r.cmd("d", "STARTTLS"), ["d BAD TLS is active already"])
        self.assertTrue(r.cmd("e", 'LOGIN alice "%s"' % PASSWORD)[-1].startswith("e OK"))

    def test_imaplib_starttls_and_imaps(self):
        c = imaplib.IMAP4("127.0.0.1", self.d.port, timeout=20)
        c.starttls(ssl_context=self.ctx)
        self.assertEqual(c.login("bob", PASSWORD)[0], "OK")
        self.assertEqual(c.select("INBOX")[0], "OK")
        c.logout()
        s = imaplib.IMAP4_SSL("127.0.0.1", self.d.tls_port, ssl_context=self.ctx, timeout=20)
        self.assertNotIn("STARTTLS", s.capabilities)
        self.assertIn("AUTH=PLAIN", s.capabilities)
        self.assertEqual(s.login("bob", PASSWORD)[0], "OK")
        typ, data = s.list()
        self.assertEqual(typ, "OK")
        self.assertIn(b'(\\HasNoChildren) "/" INBOX', data)
        s.logout()


def main():
    global IMAPD, DELIVER
    IMAPD, DELIVER = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])


if __name__ == "__main__":
    main()
