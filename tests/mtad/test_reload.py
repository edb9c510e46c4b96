#!/usr/bin/env python3
"""test_reload.py — SIGHUP makes mtad read heron.conf again: the policy keys (local_domains,
trusted_networks, max_message_size) apply to new sessions in every worker, a changed
listener is only reported (it needs a restart: the old port keeps serving, the new one is
not bound), and a config file with an error leaves the running config as it was.

  test_reload.py SOURCE_ROOT MTAD STORE_PEEK"""
import os
import re
import signal
import smtplib
import socket
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Mtad, free_port, run_suite, wait_for,  # noqa: E402
                      write_users)

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-reload-")
WORKERS = 2
write_users(os.path.join(TMP, "users"), ["user1"])
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"workers": str(WORKERS), "trusted_networks": "192.0.2.0/24",
             "max_message_size": "64k"}, tls=False)


def rcpt(addr):
    """(code, text) of RCPT TO addr in a new session."""
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=15) as c:
        c.ehlo("client.test")
        c.mail("sender@example.org")
        return c.rcpt(addr)


def size_limit():
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=15) as c:
        c.ehlo("client.test")
        return int(c.esmtp_features["size"])


def reload(**keys):
    """Rewrites heron.conf with keys changed, sends SIGHUP, waits until every worker took
    it. Returns the log from before the signal on."""
    before = len(mtad.logtext())
    mtad.sections["mtad"].update(keys)
    mtad.write_conf()
    mtad.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: mtad.logtext()[before:].count("config reloaded") >= WORKERS,
             what="every worker reloaded")
    return mtad.logtext()[before:]


def sessions(check, n=3 * WORKERS):
    """check() in n separate sessions: they land on every worker."""
    for _ in range(n):
        check()


def test_before():
    assert size_limit() == 64 * 1024
    code, text = rcpt("someone@other.test")
    assert code == 554 and b"5.7.1" in text, (code, text)
    code, text = rcpt("someone@remote.test")
    assert code == 554 and b"5.7.1" in text, (code, text)


def test_policy_reloaded_and_listener_reported():
    new_port = free_port()
    log = reload(local_domains=f"{DOMAIN}, other.test", max_message_size="128k",
                 listen=f"127.0.0.1:{mtad.port},127.0.0.1:{new_port}")
    assert "[mtad] local_domains = " in log, log
    assert re.search(r"\[mtad\] listen changed: .*restarted", log), log

    def check():
        assert size_limit() == 128 * 1024
        # other.test is local now: an unknown user there, no longer a relay attempt
        code, text = rcpt("someone@other.test")
        assert code == 550 and b"5.1.1" in text, (code, text)
        code, text = rcpt("someone@remote.test")
        assert code == 554 and b"5.7.1" in text, (code, text)
    sessions(check)
    # the listener was not rebound
    try:
        socket.create_connection(("127.0.0.1", new_port), timeout=2).close()
        raise AssertionError("a listener changed by reload was bound")
    except OSError:
        pass


def test_trusted_networks_reloaded():
    reload(trusted_networks="127.0.0.0/8")

    def check():
        code, text = rcpt("someone@remote.test")
        assert code == 250, (code, text)
    sessions(check)


def test_bad_config_keeps_the_old():
    before = len(mtad.logtext())
    with open(mtad.conf, "a") as f:
        f.write("[mtad]\nno_such_key = 1\n")
    mtad.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: mtad.logtext()[before:].count("failed, the old config stays")
             >= WORKERS + 1, what="reload refused by master and workers")

    def check():
        assert size_limit() == 128 * 1024
        code, _text = rcpt("someone@remote.test")
        assert code == 250
    sessions(check)


def main():
    return run_suite(mtad, [test_before, test_policy_reloaded_and_listener_reported,
                            test_trusted_networks_reloaded, test_bad_config_keeps_the_old],
                     TMP)


if __name__ == "__main__":
    sys.exit(main())
