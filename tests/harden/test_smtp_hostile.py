#!/usr/bin/env python3
"""Hostile SMTP clients against the real mtad: slow-loris and half-open connections
do not stop others, the per-address limit answers 421, overlong command lines get 500 and the
session goes on, a SIZE lie is refused at the dot and nothing is stored, AUTH guessing is
answered only after a growing delay and logged (never with the password).

  test_smtp_hostile.py SOURCE_ROOT MTAD STORE_PEEK"""
import base64
import os
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import DOMAIN, Mtad, Store, run_main, run_tests, write_users  # noqa: E402
from heronlib import smtp_connect as client  # noqa: E402

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-harden-smtp-")
write_users(os.path.join(TMP, "users"), ["user1", "user2"])
# one worker: anything that stalls it stalls every session, which is what we look for
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"workers": "1", "max_connections_per_ip": "150", "auth_require_tls": "no"},
            tls=False)
store = Store(PEEK, mtad.conf)


def served():
    """A fresh client gets its greeting and an answer to EHLO: the worker is not stuck."""
    c = client(mtad.port, timeout=10)
    try:
        assert c.ehlo("ok.test")[0] == 250
        assert c.docmd("QUIT")[0] == 221
    finally:
        c.close()


def test_slow_loris_and_half_open():
    quiet = []
    try:
        for i in range(100):
            s = socket.create_connection(("127.0.0.1", mtad.port), timeout=10)
            if i % 2:
                s.sendall(b"EHLO half")  # half a line, never finished
            quiet.append(s)
        slow = client(mtad.port)
        line = b"EHLO slow.client.test\r\n"
        for k, b in enumerate(line):
            slow.sock.sendall(bytes([b]))
            if k % 6 == 0:
                served()
            time.sleep(0.02)
        assert slow.getreply()[0] == 250
        slow.close()
    finally:
        for s in quiet:
            s.close()
    served()


def test_per_address_limit():
    held = []
    try:
        refused = None
        for _ in range(200):
            s = socket.create_connection(("127.0.0.1", mtad.port), timeout=10)
            held.append(s)
            data = s.recv(4096)
            if data.startswith(b"421"):
                refused = data
                break
            assert data.startswith(b"220"), data
        assert refused == (b"421 4.7.0 mx.heron.test Too many connections from your "
                           b"address\r\n"), refused
        assert len(held) == 151, len(held)
        assert held[-1].recv(4096) == b""  # closed after the refusal
    finally:
        for s in held:
            s.close()
    # the count goes down as they leave: a new client is served again
    for _ in range(200):
        with socket.create_connection(("127.0.0.1", mtad.port), timeout=10) as s:
            greeting = s.recv(4096)
        if greeting.startswith(b"220"):
            break
        time.sleep(0.1)
    assert greeting.startswith(b"220"), greeting
    served()


def test_overlong_line_and_size_lie():
    c = client(mtad.port)
    assert c.ehlo("c.test")[0] == 250
    code, text = c.docmd("NOOP " + "x" * 100000)
    assert code == 500 and b"5.5.2" in text, (code, text)
    assert c.noop()[0] == 250  # the session goes on
    # SIZE says 100 bytes, the message is 200 kB: refused at the end, nothing stored
    before = len(store.inbox("user1"))
    assert c.mail("liar@example.org", ["SIZE=100"])[0] == 250
    assert c.rcpt(f"user1@{DOMAIN}")[0] == 250
    code, text = c.data("Subject: sizelie\r\n\r\n" + ("y" * 998 + "\r\n") * 200)
    assert code == 552 and b"5.3.4" in text, (code, text)
    assert c.docmd("QUIT")[0] == 221
    c.close()
    assert len(store.inbox("user1")) == before
    served()


def test_auth_guessing_delayed_and_logged():
    c = client(mtad.sub_port)
    assert c.ehlo("guesser.test")[0] == 250
    waits = []
    for i in range(3):
        token = base64.b64encode(b"\0user1\0guess%d" % i).decode()
        t0 = time.monotonic()
        code, text = c.docmd("AUTH", "PLAIN " + token)
        waits.append(time.monotonic() - t0)
        assert code == 535 and b"5.7.8" in text, (code, text)
    # A deliberate penalty, not a performance figure: the answer cannot come before the
    # server's timer (500 ms, doubling per failure from this address).
    assert waits[0] >= 0.45 and waits[2] >= 1.9, waits
    # the right password still works
    token = base64.b64encode(b"\0user1\0user1").decode()
    assert c.docmd("AUTH", "PLAIN " + token)[0] == 235
    c.close()
    log = mtad.logtext()
    fails = [ln for ln in log.splitlines() if " smtp auth " in ln and "result=fail" in ln]
    assert len(fails) >= 3, fails
    assert all("user=user1" in ln and "addr=127.0.0.1" in ln for ln in fails), fails
    assert "guess0" not in log


def main():
    def body():
        mtad.start()
        return run_tests([test_slow_loris_and_half_open, test_per_address_limit,
                          test_overlong_line_and_size_lie, test_auth_guessing_delayed_and_logged],
                         mtad)
    return run_main(body, TMP, [mtad], tail=4000)


if __name__ == "__main__":
    sys.exit(main())
