#!/usr/bin/env python3
"""bench/imapd/bench_idle.py — prints IDLE figures (never asserts): memory per IDLE session
with N sessions held (worker RSS / sessions), and the time from a delivery by another process
(as mtad does, through libstore) to the "* n EXISTS" push on an idling session, p50/p99.

Usage: bench/imapd/bench_idle.py BUILD_DIR [--sessions N] [--deliveries N]
Bounded in count and time."""
import argparse
import os
import resource
import selectors
import socket
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from heronlib import Imapd, IMAP_PASSWORD as PASSWORD, ImapRaw as Raw  # noqa: E402
from bench_imapd import worker_rss_kib  # noqa: E402

MSG = (b"From: a@heron.test\r\nTo: bob@heron.test\r\nSubject: idle bench\r\n\r\n"
       b"hello\r\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--sessions", type=int, default=10000)
    ap.add_argument("--deliveries", type=int, default=50)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 2 * a.sessions + 256)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    n = min(a.sessions, (want - 256) // 2)
    extra = "max_connections_per_user = 100000\nmax_connections_per_ip = 100000\n"
    with Imapd(os.path.join(a.build, "imapd", "imapd"), workers=1, extra=extra,
               deliver=os.path.join(a.build, "tests", "imapd", "imap_deliver")) as d:
        Raw(d.port).cmd("L", 'LOGIN bob "%s"' % PASSWORD)
        time.sleep(0.3)
        base = worker_rss_kib(d.proc.pid)
        socks = []
        deadline = time.monotonic() + 180
        for i in range(n):
            if time.monotonic() > deadline:
                break
            s = socket.create_connection(("127.0.0.1", d.port), timeout=30)
            s.sendall(b'l LOGIN bob "%s"\r\ns SELECT INBOX\r\ni IDLE\r\n' % PASSWORD.encode())
            socks.append(s)
        for s in socks:
            buf = b""
            while b"+ idling\r\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        time.sleep(0.5)
        grown = worker_rss_kib(d.proc.pid) - base
        print("IDLE sessions held: %d, worker RSS +%d KiB = %.1f KiB per session" %
              (len(socks), grown, grown / max(1, len(socks))))
        watch = socks[-1]
        watch.settimeout(30)
        lat = []
        for i in range(a.deliveries):
            t0 = time.monotonic()
            d.deliver("bob", MSG)
            buf = b""
            while b" EXISTS\r\n" not in buf:
                buf += watch.recv(65536)
            lat.append(time.monotonic() - t0)
        lat.sort()
        print("delivery (another process) to EXISTS push: p50 %.1f ms, p99 %.1f ms "
              "(%d deliveries, %d idle sessions woken each time)" %
              (lat[len(lat) // 2] * 1e3, lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3,
               len(lat), len(socks)))
        for s in socks:
            s.close()


if __name__ == "__main__":
    main()
