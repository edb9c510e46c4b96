"""imapd with TLS: STARTTLS on the imap port, implicit TLS on imaps, LOGINDISABLED and refused
plaintext login before TLS (allow_plaintext_auth = no), no command injection across STARTTLS.
The certificate is generated at test time.

Usage: test_imapd_tls.py IMAPD_BINARY DELIVER_BINARY"""
import imaplib
import os
import ssl
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import IMAP_PASSWORD as PASSWORD, Imapd, ImapRaw as Raw  # noqa: E402
from heronlib import after_test, assert_eq, assert_in, assert_not_in, run_suite  # noqa: E402

D = CTX = None  # the imapd (TLS, no plaintext login), a client context trusting it
BASE = ("IMAP4rev1 IMAP4rev2 LITERAL+ SASL-IR LOGIN-REFERRALS ID ENABLE IDLE NAMESPACE UNSELECT CHILDREN UIDPLUS MOVE "
        "SPECIAL-USE CREATE-SPECIAL-USE STATUS=SIZE ESEARCH CONDSTORE QRESYNC WITHIN LIST-EXTENDED "
        "LIST-STATUS SEARCHRES QUOTA "
        "QUOTA=RES-STORAGE QUOTA=RES-MESSAGE BINARY MULTIAPPEND CATENATE UTF8=ACCEPT SORT SORT=DISPLAY ESORT CONTEXT=SEARCH CONTEXT=SORT "
        "THREAD=ORDEREDSUBJECT THREAD=REFERENCES THREAD=REFS OBJECTID PREVIEW PARTIAL SAVEDATE REPLACE ACL RIGHTS=texk METADATA METADATA-SERVER LIST-METADATA"
        " NOTIFY"
        " URLAUTH")


def test_logindisabled_before_tls():
    r = Raw(D.port)
    after_test(r.close)
    assert_eq(r.greeting, "* OK [CAPABILITY %s STARTTLS LOGINDISABLED] Heron IMAP "
                          "ready" % BASE)
    assert_eq(r.cmd("a", 'LOGIN alice "%s"' % PASSWORD),
              ["a NO [PRIVACYREQUIRED] Plaintext login is disabled; use STARTTLS"])
    assert_eq(r.cmd("b", "AUTHENTICATE PLAIN AGFsaWNlAHg="),
              ["b NO [PRIVACYREQUIRED] Plaintext authentication is disabled; use "
               "STARTTLS"])


def test_starttls_then_login():
    r = Raw(D.port)
    after_test(r.close)
    # "b NOOP" rides along in clear text: it must be dropped, never run inside TLS
    r.send("a STARTTLS\r\nb NOOP\r\n")
    assert_eq(r.line(), "a OK Begin TLS negotiation now")
    r.s = CTX.wrap_socket(r.s, server_hostname="127.0.0.1")
    assert_eq(r.cmd("c", "CAPABILITY"),
              ["* CAPABILITY %s AUTH=PLAIN" % BASE,
               "c OK Capability completed"])
    assert_eq(r.cmd("d", "STARTTLS"), ["d BAD TLS is active already"])
    assert r.cmd("e", 'LOGIN alice "%s"' % PASSWORD)[-1].startswith("e OK")


def test_imaplib_starttls_and_imaps():
    c = imaplib.IMAP4("127.0.0.1", D.port, timeout=20)
    c.starttls(ssl_context=CTX)
    assert_eq(c.login("bob", PASSWORD)[0], "OK")
    assert_eq(c.select("INBOX")[0], "OK")
    c.logout()
    s = imaplib.IMAP4_SSL("127.0.0.1", D.tls_port, ssl_context=CTX, timeout=20)
    assert_not_in("STARTTLS", s.capabilities)
    assert_in("AUTH=PLAIN", s.capabilities)
    assert_eq(s.login("bob", PASSWORD)[0], "OK")
    typ, data = s.list()
    assert_eq(typ, "OK")
    assert_in(b'(\\HasNoChildren) "/" INBOX', data)
    s.logout()


def main():
    global D, CTX
    D = Imapd(sys.argv[1], deliver=sys.argv[2], tls=True, plaintext=False)
    CTX = ssl.create_default_context(cafile=D.cert)
    return run_suite(D, [test_logindisabled_before_tls, test_starttls_then_login,
                         test_imaplib_starttls_and_imaps], D.dir)


if __name__ == "__main__":
    sys.exit(main())
