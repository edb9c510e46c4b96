#!/usr/bin/env python3
"""bench/imapd — prints imapd figures (never asserts): for a 1,000-message INBOX the header
FETCH throughput, SELECT latency, LOGIN rate with the auth cache warm, and memory per idle
authenticated connection (worker RSS / connections); with --store N only the STORE latency
(p50/p99, 1 to 16 concurrent sessions, with and without pauses between commands).

Usage: bench/imapd/bench_imapd.py BUILD_DIR [--messages N] [--idle N] [--rounds N] [--store N]
(BUILD_DIR holds imapd/imapd and tests/imapd/imap_deliver). Bounded in count and time."""
import argparse
import os
import resource
import socket
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from heronlib import Imapd, IMAP_PASSWORD as PASSWORD, ImapRaw as Raw  # noqa: E402

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


def workers(master):
    """(pid, fields of /proc/PID/stat after the name) of each child of master."""
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == master:
            yield p, fields


def worker_cpu_s(master):
    """User + system CPU seconds of the master's children (the workers)."""
    total = sum(int(f[11]) + int(f[12]) for _, f in workers(master))
    return total / os.sysconf("SC_CLK_TCK")


def worker_rss_kib(master):
    total = 0
    for p, _ in workers(master):
        try:
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


def store_latency(port, user, password, sessions, per_session, think_ms, limit_s=120):
    """STORE latencies (seconds, sorted) of `sessions` concurrent sessions on INBOX, each
    sending per_session STORE +FLAGS/-FLAGS (\\Flagged) on its own message, one at a time,
    think_ms apart (0: the next as soon as the OK came). One thread drives every session
    (selectors), so the figures are the server's, not the client's scheduling."""
    import selectors
    sel = selectors.DefaultSelector()
    conns = []
    for k in range(sessions):
        r = Raw(port)
        r.cmd("L", 'LOGIN %s "%s"' % (user, password))
        r.cmd("S", "SELECT INBOX")
        r.s.setblocking(False)
        st = {"r": r, "i": 0, "t0": 0.0, "due": 0.0, "buf": b"", "k": k}
        conns.append(st)
        sel.register(r.s, selectors.EVENT_READ, st)
    lat = []
    end = time.monotonic() + limit_s

    def send(st):
        i = st["i"]
        seq = 1 + st["k"] % 50  # its own message, set and cleared in turn: a real change
        st["tag"] = b"T%d" % i
        st["t0"] = time.monotonic()
        st["r"].s.sendall(b"T%d STORE %d %sFLAGS.SILENT (\\Flagged)\r\n" %
                          (i, seq, b"+" if i % 2 == 0 else b"-"))

    for st in conns:
        send(st)
    active = len(conns)
    while active > 0 and time.monotonic() < end:
        now = time.monotonic()
        waits = [st["due"] - now for st in conns if st["due"] > 0]
        timeout = max(0.0, min(waits)) if waits else 1.0
        for key, _ in sel.select(timeout):
            st = key.data
            try:
                chunk = st["r"].s.recv(65536)
            except BlockingIOError:
                continue
            if not chunk:
                raise EOFError("server closed")
            st["buf"] += chunk
            while b"\r\n" in st["buf"]:
                line, st["buf"] = st["buf"].split(b"\r\n", 1)
                if not line.startswith(st["tag"] + b" "):
                    continue
                if not line.startswith(st["tag"] + b" OK"):
                    raise RuntimeError(line.decode(errors="replace"))
                lat.append(time.monotonic() - st["t0"])
                st["i"] += 1
                st["tag"] = b"\0"
                if st["i"] >= per_session:
                    active -= 1
                elif think_ms > 0:
                    st["due"] = time.monotonic() + think_ms / 1e3
                else:
                    send(st)
        now = time.monotonic()
        for st in conns:
            if st["due"] > 0 and st["due"] <= now:
                st["due"] = 0.0
                send(st)
    for st in conns:
        st["r"].s.close()
    lat.sort()
    return lat


def run_store(label, port, user, password, per_session):
    """STORE latency p50/p99 for 1, 4 and 16 concurrent sessions without pause, and for one
    and 4 sessions pausing 20 ms between commands (a low load: nothing to batch)."""
    for sessions, think in ((1, 20), (4, 20), (1, 0), (4, 0), (16, 0)):
        t0 = time.monotonic()
        lat = store_latency(port, user, password, sessions, per_session, think)
        dt = time.monotonic() - t0
        if not lat:
            print("%s STORE: no reply" % label)
            continue
        print("%s STORE +FLAGS.SILENT, %2d sessions, pause %2d ms: p50 %.2f ms, p99 %.2f ms, "
              "%d commands, %.0f/s, load %.1f" %
              (label, sessions, think, lat[len(lat) // 2] * 1e3,
               lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3, len(lat),
               len(lat) / dt, os.getloadavg()[0]), flush=True)


def fill(port, user, password, nmsg):
    """APPENDs nmsg messages to INBOX (pipelined, one connection)."""
    r = Raw(port)
    r.cmd("L", 'LOGIN %s "%s"' % (user, password))
    for i in range(nmsg):
        m = message(i)
        r.send(b"A%d APPEND INBOX {%d+}\r\n" % (i, len(m)) + m + b"\r\n")
    drain_until(r, "A%d" % (nmsg - 1))
    r.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--messages", type=int, default=1000)
    ap.add_argument("--idle", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--peer", nargs=3, metavar=("PORT", "USER", "PASSWORD"),
                    help="also measure another IMAP server (e.g. the Dovecot of "
                         "/work/shared/peers) with the same mailbox and commands")
    ap.add_argument("--store", type=int, default=0, metavar="N",
                    help="only the STORE latency figures: N commands per session (the "
                    "mailbox gets 50 messages)")
    a = ap.parse_args()
    if a.store:
        if a.peer:
            fill(int(a.peer[0]), a.peer[1], a.peer[2], 50)
            run_store("peer:", int(a.peer[0]), a.peer[1], a.peer[2], a.store)
        extra = "max_connections_per_user = 1000\n"
        with Imapd(os.path.join(a.build, "imapd", "imapd"), workers=1, extra=extra) as d:
            fill(d.port, "bob", PASSWORD, 50)
            run_store("heron:", d.port, "bob", PASSWORD, a.store)
        return
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
