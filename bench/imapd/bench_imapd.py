#!/usr/bin/env python3
"""bench/imapd — prints imapd figures (never asserts): for a 1,000-message INBOX the header
FETCH throughput, SELECT latency, LOGIN rate with the auth cache warm, and memory per idle
authenticated connection (worker RSS / connections).

Usage: bench/imapd/bench_imapd.py BUILD_DIR [--messages N] [--idle N] [--rounds N]
(BUILD_DIR holds imapd/imapd and tests/imapd/imap_deliver). Bounded in count and time."""
import argparse
import os
import resource
import socket
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "imapd"))
from imapd_harness import Imapd, Raw, PASSWORD  # noqa: E402

FETCH = ("FETCH 1:* (ENVELOPE FLAGS INTERNALDATE RFC822.SIZE UID "
         "BODY.PEEK[HEADER.FIELDS (From To Subject Date)])")


def message(i):
    return ("From: Sender %d <sender%d@heron.test>\r\nTo: bob@heron.test\r\n"
            "Subject: Benchmark message number %d\r\nDate: Mon, 7 Feb 1994 21:52:25 -0800\r\n"
            "Message-ID: <b%d@heron.test>\r\nMIME-Version: 1.0\r\n"
            "Content-Type: text/plain; charset=us-ascii\r\n\r\n" % (i, i, i, i) +
            "A line of body text for the benchmark.\r\n" * 40).encode()


def drain_until(r, tag):
    """Reads responses up to the tagged line without decoding; scans each byte once."""
    needle = ("\r\n%s " % tag).encode()
    data = bytearray(b"\r\n" + r.buf)
    r.buf = b""
    pos = 0
    while True:
        i = data.find(needle, pos)
        if i >= 0:
            j = data.find(b"\r\n", i + 2)
            if j >= 0:
                r.buf = bytes(data[j + 2:])
                return bytes(data[i + 2:j])
            pos = i
        else:
            pos = max(0, len(data) - len(needle) - 2)
        chunk = r.s.recv(1 << 20)
        if not chunk:
            raise EOFError
        data += chunk


def worker_cpu_s(master):
    """User + system CPU seconds of the master's children (the workers)."""
    total = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == master:
                total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def worker_rss_kib(master):
    total = 0
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) != master:
                    continue
            with open("/proc/%s/status" % p) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def run_imap(label, port, user, password, nmsg, rounds, cpu=None):
    """APPEND nmsg messages to INBOX, then SELECT latency, header FETCH, LOGIN rate."""
    r = Raw(port)
    r.cmd("L", 'LOGIN %s "%s"' % (user, password))
    t0 = time.monotonic()
    for i in range(nmsg):
        m = message(i)
        r.send(b"A%d APPEND INBOX {%d+}\r\n" % (i, len(m)) + m + b"\r\n")
    drain_until(r, "A%d" % (nmsg - 1))
    dt = time.monotonic() - t0
    print("%s append (pipelined, one connection): %d messages in %.2f s = %.0f msg/s" %
          (label, nmsg, dt, nmsg / dt))
    lat = []
    for i in range(50):
        t0 = time.monotonic()
        r.send("S%d SELECT INBOX\r\n" % i)
        drain_until(r, "S%d" % i)
        lat.append(time.monotonic() - t0)
    lat.sort()
    print("%s SELECT INBOX (%d messages): p50 %.2f ms, p99 %.2f ms" %
          (label, nmsg, lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3))
    t0 = time.monotonic()
    c0 = cpu() if cpu else 0
    for i in range(rounds):
        r.send("F%d %s\r\n" % (i, FETCH))
        drain_until(r, "F%d" % i)
    dt = time.monotonic() - t0
    extra = ""
    if cpu:
        extra = "; server CPU %.1f us/message" % ((cpu() - c0) * 1e6 / (rounds * nmsg))
    print("%s header FETCH 1:* (ENVELOPE FLAGS INTERNALDATE RFC822.SIZE UID "
          "BODY.PEEK[HEADER.FIELDS ...]): %.0f messages/s end to end (%d rounds)%s" %
          (label, rounds * nmsg / dt, rounds, extra))
    r.close()
    n = 500
    t0 = time.monotonic()
    for i in range(n):
        c = Raw(port)
        c.cmd("l", 'LOGIN %s "%s"' % (user, password))
        c.close()
    dt = time.monotonic() - t0
    print("%s LOGIN (connect + login + close, auth cache warm, sequential): %.0f logins/s" %
          (label, n / dt))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--idle", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--peer", nargs=3, metavar=("PORT", "USER", "PASSWORD"),
                    help="also measure another IMAP server (e.g. the Dovecot of "
                         "/work/shared/peers) with the same mailbox and commands")
    a = ap.parse_args()
    if a.peer:
        run_imap("peer:", int(a.peer[0]), a.peer[1], a.peer[2], a.messages, a.rounds)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 2 * a.idle + 256)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    idle = min(a.idle, (want - 256) // 2)
    extra = "max_connections_per_user = 100000\nmax_connections_per_ip = 100000\n"
    with Imapd(os.path.join(a.build, "imapd", "imapd"), workers=1, extra=extra,
               deliver=os.path.join(a.build, "tests", "imapd", "imap_deliver")) as d:
        run_imap("heron:", d.port, "bob", PASSWORD, a.messages, a.rounds,
                 lambda: worker_cpu_s(d.proc.pid))
        time.sleep(0.5)
        base = worker_rss_kib(d.proc.pid)
        conns = []
        t_end = time.monotonic() + 120
        for i in range(idle):
            if time.monotonic() > t_end:
                break
            s = socket.create_connection(("127.0.0.1", d.port), timeout=20)
            s.sendall(b'l LOGIN bob "%s"\r\n' % PASSWORD.encode())
            conns.append(s)
        for s in conns:
            buf = b""
            while b"l OK" not in buf and b"l NO" not in buf:
                chunk = s.recv(4096)
                if not chunk:
                    break
                buf += chunk
        time.sleep(0.5)
        grown = worker_rss_kib(d.proc.pid) - base
        print("heron: idle authenticated connections: %d, worker RSS +%d KiB = %.1f KiB per "
              "connection" % (len(conns), grown, grown / max(1, len(conns))))
        for s in conns:
            s.close()


if __name__ == "__main__":
    main()
