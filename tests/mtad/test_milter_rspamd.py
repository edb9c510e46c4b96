#!/usr/bin/env python3
"""test_milter_rspamd.py — mtad with a real milter from Debian: rspamd's proxy worker in
milter mode (milter = yes, scanning itself: self_scan), on loopback, with its own config dir
(the package's rules, a private local.d, state and log dirs in the test's directory, a DNS
server that is a closed loopback port so nothing leaves the machine), started and stopped by
the test. rspamd refuses the GTUBE test message (its 554 5.7.1 reply reaches the client,
nothing is stored) and adds its X-Spamd-Result / X-Rspamd-* headers to a clean message.
Skipped (77) where rspamd is not installed.

  test_milter_rspamd.py SOURCE_ROOT MTAD STORE_PEEK"""
import os
import shutil
import smtplib
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (Mtad, Rspamd, Store, assert_eq, assert_in, free_port,  # noqa: E402
                      run_main, skip, wait_for, write_users)

ROOT, MTAD, PEEK = sys.argv[1:4]
RSPAMD = shutil.which("rspamd")
if RSPAMD is None or not os.path.isdir("/etc/rspamd"):
    skip("rspamd not installed (scripts/bootstrap installs it)")

GTUBE = "XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X"
TMP = tempfile.mkdtemp(prefix="heron-mtad-rspamd-")
os.chmod(TMP, 0o755)  # rspamd's workers run as its own user and read their config here
PORT = free_port()
write_users(os.path.join(TMP, "users"), ["user1"])
rspamd = Rspamd(TMP, PORT)
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"workers": "1"}, tls=False)
mtad.sections["milter"] = {"smtpd_milters": f"inet:127.0.0.1:{PORT}",
                           "content_timeout": "60s", "command_timeout": "60s"}
mtad.write_conf()
store = Store(PEEK, mtad.conf)


def message(subject, body):
    return (f"From: Sender <sender@example.org>\r\nTo: user1@heron.test\r\n"
            f"Subject: {subject}\r\nMessage-ID: <{subject}@example.org>\r\n"
            f"Date: Wed, 02 Dec 2026 06:00:00 +0000\r\n\r\n{body}\r\n")


def send(subject, body):
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=120) as c:
        c.ehlo("client.example.org")
        c.mail("sender@example.org")
        assert_eq(c.rcpt("user1@heron.test")[0], 250)
        code, text = c.data(message(subject, body).encode())
        return code, text.decode()


def inbox_message(subject):
    for uid, _b, _s in store.inbox("user1"):
        body = store.body("user1", uid)
        if f"Subject: {subject}".encode() in body:
            return body
    return None


def test_gtube_rejected():
    code, text = send("gtube", f"This is the GTUBE test.\r\n{GTUBE}\r\n")
    assert_eq(code, 554, text)
    assert_in("5.7.1", text)
    time.sleep(0.5)
    assert inbox_message("gtube") is None
    assert_in("result=reject", mtad.logtext())


def test_clean_message_gets_headers():
    code, text = send("clean", "Hello,\r\n\r\nthe meeting is at ten tomorrow.\r\n\r\nBye\r\n")
    assert_eq(code, 250, text)
    body = wait_for(lambda: inbox_message("clean"), 20, "the clean message")
    head = body.split(b"\r\n\r\n", 1)[0].decode(errors="replace")
    assert_in("X-Spamd-Result: default: False", head)
    assert_in("X-Rspamd-Server:", head)
    assert_in("X-Rspamd-Queue-Id:", head)
    # the body as sent, after the header section rspamd added to
    assert body.endswith(b"\r\n\r\nHello,\r\n\r\nthe meeting is at ten tomorrow.\r\n\r\n"
                         b"Bye\r\n\r\n"), body[-200:]


def main():
    def body():
        rspamd.start()
        mtad.start()
        failed = 0
        from heronlib import run_tests
        failed = run_tests([test_gtube_rejected, test_clean_message_gets_headers])
        if failed:
            sys.stdout.write(rspamd.logtext()[-6000:])
        return failed
    return run_main(body, TMP, [mtad], cleanup=[rspamd.stop])


if __name__ == "__main__":
    sys.exit(main())
