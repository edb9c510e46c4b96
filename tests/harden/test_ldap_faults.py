#!/usr/bin/env python3
"""A failing directory under imapd and mtad: the real slapd of scripts/ldap, reached
through a TCP proxy in this test that can delay every byte. Slow but within [directory]
timeout: logins succeed, and a session that is already logged in is answered while another's
login waits on the directory (the worker never blocks on LDAP). Slower than the timeout, or
slapd stopped: LOGIN gets NO [UNAVAILABLE] and RCPT 451 4.3.0 (never "wrong password" or
550), sessions already logged in go on working. slapd restarted: logins work again.

  test_ldap_faults.py SOURCE_ROOT MTAD IMAPD"""
import os
import select
import smtplib
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import (DOMAIN, Imapd, ImapRaw as Raw, Mtad, Slapd,  # noqa: E402
                      run_main, run_tests, wait_for)

ROOT, MTAD, IMAPD = sys.argv[1:4]


class DelayProxy:
    """Forwards 127.0.0.1:port to a target; each chunk waits `delay` seconds first."""

    def __init__(self, target_port):
        self.target = target_port
        self.delay = 0.0
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.closing = False
        threading.Thread(target=self.accept_loop, daemon=True).start()

    def accept_loop(self):
        while not self.closing:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                c.close()  # directory down: the client sees the connection drop
                continue
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    def pump(self, src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if self.delay:
                    time.sleep(self.delay)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.closing = True
        self.lsock.close()


def main():
    tmp = tempfile.mkdtemp(prefix="heron-ldapfault-")
    slapd = Slapd(ROOT, os.path.join(tmp, "slapd"), users=10).start()
    proxy = DelayProxy(slapd.port)
    keys = slapd.directory(uri=f"ldap://127.0.0.1:{proxy.port}/", timeout="10s",
                           auth_mode="bind", auth_cache_ttl="0s", negative_cache_ttl="0s")
    imapd = Imapd(IMAPD, workers=1, directory=keys)
    mtad = Mtad(MTAD, os.path.join(tmp), keys, {"workers": "1"}, tls=False)

    def login(r, user, tag="L"):
        return r.cmd(tag, f"LOGIN {user} {user}")[-1]

    def rcpt_is_temporary():
        with smtplib.SMTP("127.0.0.1", mtad.port, timeout=60) as c:
            c.ehlo("c")
            c.docmd("MAIL FROM:<x@example.org>")
            code, text = c.docmd(f"RCPT TO:<user5@{DOMAIN}>")
            assert code == 451 and b"4.3.0" in text, (code, text)

    def test_slow_directory_does_not_block_others():
        proxy.delay = 0.0
        b = Raw(imapd.port)
        assert login(b, "user2").startswith("L OK"), "baseline login"
        proxy.delay = 1.0  # each chunk waits 1 s: well within the 10 s timeout
        a = Raw(imapd.port)
        a.send("L LOGIN user1 user1\r\n")
        # while a's login waits on the directory, b is answered
        assert b.cmd("n", "NOOP")[-1] == "n OK Completed"
        assert b.cmd("s", "SELECT INBOX")[-1].startswith("s OK")
        pending = select.select([a.s], [], [], 0)[0]
        assert not pending and not a.buf, "a's login answered before b's commands"
        assert a.until_tag("L")[-1].startswith("L OK"), "slow login"
        a.close()
        b.close()

    def test_too_slow_and_down_are_temporary():
        proxy.delay = 0.0
        b = Raw(imapd.port)
        assert login(b, "user3").startswith("L OK")
        proxy.delay = 6.0  # a request and its answer: 12 s, past the 10 s timeout
        a = Raw(imapd.port)
        out = login(a, "user4")
        assert out.startswith("L NO [UNAVAILABLE]"), out
        rcpt_is_temporary()
        proxy.delay = 0.0
        slapd.stop(check=True)
        out = login(a, "user4", "M")
        assert out.startswith("M NO [UNAVAILABLE]"), out
        rcpt_is_temporary()
        # the session logged in before the outage goes on
        assert b.cmd("s", "SELECT INBOX")[-1].startswith("s OK")
        slapd.restart()

        def back():
            r = Raw(imapd.port)
            try:
                return login(r, "user4").startswith("L OK")
            finally:
                r.close()
        wait_for(back, 60, "logins to work after slapd restarted")

        def flows():  # mtad reconnects on its own schedule: 451 until then
            try:
                with smtplib.SMTP("127.0.0.1", mtad.port, timeout=60) as c:
                    c.sendmail("x@example.org", [f"user5@{DOMAIN}"],
                               "Subject: back\r\n\r\nagain\r\n")
                return True
            except smtplib.SMTPRecipientsRefused as e:
                assert all(v[0] == 451 for v in e.recipients.values()), e.recipients
                time.sleep(0.5)
                return False
        wait_for(flows, 60, "mail to flow after slapd restarted")
        a.close()
        b.close()

    def body():
        imapd.__enter__()
        mtad.start()
        return run_tests([test_slow_directory_does_not_block_others,
                          test_too_slow_and_down_are_temporary])
    return run_main(body, tmp, [mtad],
                    cleanup=[lambda: imapd.__exit__(None, None, None), proxy.close, slapd.stop])


if __name__ == "__main__":
    sys.exit(main())
