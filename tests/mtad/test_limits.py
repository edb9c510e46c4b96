#!/usr/bin/env python3
"""test_limits.py — mtad's session limits end to end: a client talking before the delayed
greeting is refused, connections per client address are capped, too many errors end the
session with 421, overlong command lines get 500 5.5.2, recipients past the limit get
452 4.5.3 and past the reject threshold the transaction is refused, and SIGTERM closes idle
sessions with 421 while a transaction in progress is finished first.

  test_limits.py SOURCE_ROOT MTAD STORE_PEEK"""
import os
import signal
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import DOMAIN, Mtad, Store, run_suite, write_users  # noqa: E402

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-limits-")
write_users(os.path.join(TMP, "users"), ["user1"])
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"greeting_delay": "1s", "max_connections_per_ip": "3", "max_errors": "3",
             "max_recipients_per_transaction": "3", "reject_recipients_per_transaction": "5",
             "workers": "1", "line_max": "512", "bare_lf": "normalize"}, tls=False)
store = Store(PEEK, mtad.conf)


def connect():
    s = socket.create_connection(("127.0.0.1", mtad.port), timeout=15)
    return s, s.makefile("rb")


def reply(f):
    lines = []
    while True:
        line = f.readline(4096)
        if not line:
            return None
        lines.append(line)
        if line[3:4] != b"-":
            return int(line[:3]), b"".join(lines)


def greeted():
    s, f = connect()
    code, text = reply(f)
    assert code == 220, text
    return s, f


def test_talk_before_greeting():
    s, f = connect()
    s.sendall(b"EHLO eager.test\r\n")
    code, text = reply(f)
    assert code == 554 and b"5.5.0" in text, text
    assert f.readline() == b""  # closed
    s.close()


def test_connections_per_address():
    conns = [greeted() for _ in range(3)]
    s, f = connect()
    code, text = reply(f)
    assert code == 421 and b"4.7.0" in text, text
    s.close()
    for c, cf in conns:
        cf.close()
        c.close()  # the descriptor closes with its last file object

    def admitted():
        c, cf = connect()
        code, _text = reply(cf)
        cf.close()
        c.close()
        return code == 220
    # the server sees the closes asynchronously: the count goes down within a few tries
    assert any(admitted() or time.sleep(0.2) for _ in range(100))


def test_errors_and_long_lines():
    s, f = greeted()
    s.sendall(b"EHLO c\r\n" + b"NOOP " + b"x" * 600 + b"\r\n")
    assert reply(f)[0] == 250
    code, text = reply(f)
    assert code == 500 and b"5.5.2" in text, text
    s.sendall(b"FOO\r\nBAR\r\n")
    assert reply(f)[0] == 500
    code, text = reply(f)
    assert code == 500, text
    code, text = reply(f)
    assert code == 421, text
    assert f.readline() == b""
    s.close()


def test_recipient_limits():
    s, f = greeted()
    s.sendall("EHLO c\r\nMAIL FROM:<a@example.org>\r\n".encode())
    assert [reply(f)[0] for _ in range(2)] == [250, 250]
    for _ in range(3):
        s.sendall(f"RCPT TO:<user1@{DOMAIN}>\r\n".encode())
        assert reply(f)[0] == 250
    s.sendall(f"RCPT TO:<user1@{DOMAIN}>\r\n".encode())
    code, text = reply(f)
    assert code == 452 and b"4.5.3" in text, text
    s.sendall(f"RCPT TO:<user1@{DOMAIN}>\r\n".encode())
    assert reply(f)[0] == 452
    s.sendall(f"RCPT TO:<user1@{DOMAIN}>\r\nDATA\r\n".encode())
    code, text = reply(f)
    assert code == 554 and b"5.5.3" in text, text
    assert reply(f)[0] == 503  # the transaction is gone
    s.close()


def test_bare_lf_normalized():
    """bare_lf = normalize: bare LF/CR become CRLF, and a bare-LF "end" followed by commands
    is message text: one message, never two."""
    s, f = greeted()
    s.sendall(f"EHLO c\r\nMAIL FROM:<a@example.org>\r\nRCPT TO:<user1@{DOMAIN}>\r\n"
              f"DATA\r\n".encode())
    assert [reply(f)[0] for _ in range(4)] == [250, 250, 250, 354]
    s.sendall(b"Subject: normalized\r\n\r\nline one\nline two\r.\n"
              b"MAIL FROM:<evil@example.org>\r\nRCPT TO:<user1@heron.test>\r\nDATA\r\n"
              b"Subject: smuggled\r\n\r\nx\r\n.\r\n")
    code, text = reply(f)
    assert code == 250, text
    s.sendall(b"QUIT\r\n")
    assert reply(f)[0] == 221
    f.close()
    s.close()
    bodies = [store.body("user1", uid) for uid, _b, _s in store.inbox("user1")]
    ours = [b for b in bodies if b"Subject: normalized" in b]
    assert len(ours) == 1 and not any(b"Subject: smuggled\r\n\r\nx" in b and
                                      b"normalized" not in b for b in bodies)
    body = ours[0].split(b"\r\n\r\n", 1)[1]
    assert body.startswith(b"line one\r\nline two\r\n.\r\nMAIL FROM:"), body[:80]
    assert b"\n" not in body.replace(b"\r\n", b"")


def test_drain():
    idle, idle_f = greeted()
    idle.sendall(b"EHLO c\r\n")
    assert reply(idle_f)[0] == 250
    busy, busy_f = greeted()
    busy.sendall(f"EHLO c\r\nMAIL FROM:<a@example.org>\r\nRCPT TO:<user1@{DOMAIN}>\r\n"
                 f"DATA\r\n".encode())
    assert [reply(busy_f)[0] for _ in range(4)] == [250, 250, 250, 354]
    mtad.proc.send_signal(signal.SIGTERM)
    code, text = reply(idle_f)
    assert code == 421 and b"4.3.2" in text, text
    busy.sendall(b"Subject: drained\r\n\r\nbody\r\n.\r\n")
    code, text = reply(busy_f)
    assert code == 250, text  # the transaction in progress is finished
    code, text = reply(busy_f)
    assert code == 421, text
    mtad.proc.wait(timeout=20)
    mtad.proc = None
    assert any(b"Subject: drained" in store.body("user1", uid)
               for uid, _b, _s in store.inbox("user1"))


def main():
    return run_suite(mtad, [test_talk_before_greeting, test_connections_per_address,
                            test_errors_and_long_lines, test_recipient_limits,
                            test_bare_lf_normalized, test_drain], TMP)


if __name__ == "__main__":
    sys.exit(main())
