#!/usr/bin/env python3
"""Who may do what, against the real mtad and imapd on one store and one users file: the SASL
PLAIN responses both decode the same way (one decoder), and the rest of what a hostile user
tries with a valid account or none (see each test).

  test_trust.py SOURCE_ROOT MTAD IMAPD STORE_PEEK"""
import base64
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import (DOMAIN, HOST, Daemon, ImapRaw, SmtpRaw, Store, free_port,  # noqa: E402
                      run_main, run_tests, shared_conf, wait_workers_ready)

ROOT, MTAD, IMAPD, PEEK = sys.argv[1:5]
TMP = tempfile.mkdtemp(prefix="heron-harden-trust-")
USERS = ["user%d" % i for i in range(1, 10)]
SUB_PORT = free_port()
CONF, SMTP_PORT, IMAP_PORT = shared_conf(TMP, USERS, workers=2, keys={
    "mtad": {"submission": f"{HOST}:{SUB_PORT}", "auth_require_tls": "no",
             "max_message_size": "1M"},
})
mtad = Daemon(MTAD, CONF, os.path.join(TMP, "mtad.log"), SMTP_PORT)
imapd = Daemon(IMAPD, CONF, os.path.join(TMP, "imapd.log"), IMAP_PORT)
store = Store(PEEK, CONF)


def b64(raw):
    return base64.b64encode(raw).decode()


def smtp_auth(token, user_tag="x"):
    """AUTH PLAIN token on the submission port: the reply (code, text)."""
    c = SmtpRaw(SUB_PORT)
    try:
        c.send("EHLO %s.test\r\n" % user_tag)
        assert c.reply()[0] == 250
        c.send("AUTH PLAIN %s\r\n" % token)
        return c.reply()
    finally:
        c.close()


def imap_auth(token):
    """AUTHENTICATE PLAIN with token as the initial response: the tagged reply."""
    r = ImapRaw(IMAP_PORT)
    try:
        return r.cmd("a", "AUTHENTICATE PLAIN %s" % token)[-1]
    finally:
        r.close()


def test_sasl_plain_one_decoder():
    # Both servers take the same responses and refuse the same ones (common/sasl.c).
    good = [b"\0user1\0user1", b"user1\0user1\0user1"]
    bad = [b"\0user1\0user1\0x",       # a fourth field: mtad answered 235 to it once
           b"\0user1\0user1\0",        # a trailing NUL
           b"user2\0user1\0user1",     # another identity
           b"\0user1", b"\0\0user1", b"\0user1\0", b""]
    for raw in good:
        code, text = smtp_auth(b64(raw))
        assert code == 235, (raw, code, text)
        assert imap_auth(b64(raw)).startswith("a OK"), raw
    for raw in bad:
        code, text = smtp_auth(b64(raw) or "=")
        assert code in (501, 535) and code != 235, (raw, code, text)
        got = imap_auth(b64(raw) or "=")
        assert got.startswith(("a NO", "a BAD")), (raw, got)
    # base64 that is not strict: white space inside, a stray '=', set bits after the data
    # (each decodes to a good login leniently)
    alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    t = b64(b"user1\0user1\0user1")
    assert t.endswith("=") and not t.endswith("==")
    stray = t[:-2] + alpha[alpha.index(t[-2]) + 1] + "="
    for token in ["AHVzZXIxAHVzZXIx=", "AHVz ZXIxAHVzZXIx", stray]:
        code, text = smtp_auth(token)
        assert code == 501, (token, code, text)
        assert imap_auth(token).startswith(("a BAD", "a NO")), token


def main():
    def body():
        mtad.start()
        imapd.start()
        wait_workers_ready(mtad, "mtad", 2)
        wait_workers_ready(imapd, "imapd", 2)
        return run_tests([test_sasl_plain_one_decoder])
    return run_main(body, TMP, [mtad, imapd], tail=6000)


if __name__ == "__main__":
    sys.exit(main())
