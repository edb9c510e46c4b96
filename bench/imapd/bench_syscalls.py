#!/usr/bin/env python3
"""bench/imapd/bench_syscalls.py — prints imapd's system calls per IMAP command by type and its
CPU per 1,000 commands (never asserts). One worker, log level info (the shipped default), bob's
INBOX filled with --messages messages; then one phase per command type, each COUNT commands:

  login    connect + greeting + LOGIN (the connections stay open for the logout phase)
  logout   LOGOUT of those connections, up to the server's close
  noop     NOOP on a selected session (the I/O floor: read, reply)
  select   SELECT INBOX
  fetchhdr FETCH of a 10-message range (FLAGS UID RFC822.SIZE BODY.PEEK[HEADER.FIELDS ...])
  fetchbody FETCH n BODY.PEEK[] of one message
  uidstore UID STORE u +FLAGS / -FLAGS (\\Seen) in turn (every one a change: a commit)
  idle     IDLE wake-ups: a message delivered by another process (imap_deliver, as mtad does)
           to "* n EXISTS" on the idling session (the worker's side only)

Each phase runs twice: under `strace -c -f` of every thread of the worker (system calls per
command, by name), then untraced (--rounds passes of --cpu-count commands) for the worker's CPU (every
thread's /proc schedstat) per 1,000 commands. With --compare OTHER_BUILD_DIR both builds run phase by phase in turn, and the ratios
other/first are printed (a shared machine: only figures of the same run compare).

Usage: bench/imapd/bench_syscalls.py BUILD_DIR [--compare BUILD_DIR] [--count N]
       [--cpu-count N] [--rounds N] [--messages N] [--phases a,b,...]
Bounded in count and time."""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from heronlib import Imapd, IMAP_PASSWORD as PASSWORD, ImapRaw as Raw  # noqa: E402
from bench_imapd import message, drain_until  # noqa: E402

PHASES = ["login", "logout", "noop", "select", "fetchhdr", "fetchbody", "uidstore", "idle"]
SHOWN = ["read", "readv", "recvfrom", "write", "writev", "sendto", "sendmsg", "epoll_ctl", "epoll_wait",
         "openat", "memfd_create", "close", "pread64", "pwrite64", "fdatasync", "fstat", "newfstatat", "lseek",
         "mmap", "munmap", "brk", "madvise", "futex", "getpid", "clock_gettime", "accept4",
         "setsockopt", "getsockname", "fcntl", "ioctl"]
IDLE_MSG = (b"From: a@heron.test\r\nTo: bob@heron.test\r\nSubject: syscall bench\r\n\r\n"
            b"hello\r\n")
LIMIT_S = 240  # a phase that has not finished by then stops where it is


class Bench:
    """One imapd (one worker) with bob's INBOX filled; runs phases against it."""

    def __init__(self, build, nmsg):
        self.build = build
        extra = "max_connections_per_user = 100000\nmax_connections_per_ip = 100000\n"
        self.d = Imapd(os.path.join(build, "imapd", "imapd"), workers=1, extra=extra,
                       deliver=os.path.join(build, "tests", "imapd", "imap_deliver"))
        with open(self.d.conf) as f:
            text = f.read()
        with open(self.d.conf, "w") as f:  # the tests' debug log is not what a site runs
            f.write(text.replace("level = debug", "level = info"))
        self.d.__enter__()
        self.nmsg = nmsg
        r = Raw(self.d.port)
        r.cmd("L", 'LOGIN bob "%s"' % PASSWORD)
        for i in range(nmsg):
            m = message(i)
            r.send(b"A%d APPEND INBOX {%d+}\r\n" % (i, len(m)) + m + b"\r\n")
        drain_until(r, "A%d" % (nmsg - 1))
        r.close()
        self.sess = None
        self.held = []
        self.worker = None
        for _ in range(100):
            pids = self.d.worker_pids()
            if pids:
                self.worker = pids[0]
                break
            time.sleep(0.05)

    def close(self):
        self.d.__exit__(None, None, None)

    def session(self):
        if self.sess is None:
            self.sess = Raw(self.d.port)
            self.sess.cmd("L", 'LOGIN bob "%s"' % PASSWORD)
            self.sess.cmd("S", "SELECT INBOX")
        return self.sess

    # Each phase runs n commands and returns how many it ran (fewer at LIMIT_S).
    def login(self, n, end):
        i = 0
        while i < n and time.monotonic() < end:
            r = Raw(self.d.port)
            r.cmd("l", 'LOGIN bob "%s"' % PASSWORD)
            self.held.append(r)
            i += 1
        return i

    def logout(self, n, end):
        i = 0
        while self.held and i < n and time.monotonic() < end:
            r = self.held.pop()
            r.send("o LOGOUT\r\n")
            while r.s.recv(65536):
                pass  # up to the server's close
            r.close()
            i += 1
        return i

    def commands(self, n, end, tag, text):
        """n commands on the selected session, one at a time; text(i) is the i-th one."""
        r = self.session()
        i = 0
        while i < n and time.monotonic() < end:
            r.send("%s%d %s\r\n" % (tag, i, text(i)))
            drain_until(r, "%s%d" % (tag, i))
            i += 1
        return i

    def noop(self, n, end):
        return self.commands(n, end, "N", lambda i: "NOOP")

    def select(self, n, end):
        return self.commands(n, end, "S", lambda i: "SELECT INBOX")

    def fetchhdr(self, n, end):
        def text(i):
            lo = 1 + (i * 10) % max(1, self.nmsg - 10)
            return ("FETCH %d:%d (FLAGS UID RFC822.SIZE BODY.PEEK[HEADER.FIELDS (From Subject "
                    "Date)])" % (lo, lo + 9))
        return self.commands(n, end, "F", text)

    def fetchbody(self, n, end):
        return self.commands(n, end, "B", lambda i: "FETCH %d BODY.PEEK[]" % (1 + i % self.nmsg))

    def uidstore(self, n, end):
        return self.commands(n, end, "U", lambda i: "UID STORE %d %sFLAGS (\\Seen)" % (
            1 + (i // 2) % self.nmsg, "+" if i % 2 == 0 else "-"))

    def idle(self, n, end):
        r = Raw(self.d.port)
        r.cmd("L", 'LOGIN bob "%s"' % PASSWORD)
        r.cmd("S", "SELECT INBOX")
        r.send("I IDLE\r\n")
        r.line()  # + idling
        i = 0
        while i < n and time.monotonic() < end:
            self.d.deliver("bob", IDLE_MSG)
            while True:
                line = r.line()
                if line.endswith(" EXISTS"):
                    break
            i += 1
        r.send("DONE\r\n")
        r.until_tag("I")
        r.close()
        return i

    def tids(self):
        try:
            return sorted(int(t) for t in os.listdir("/proc/%d/task" % self.worker))
        except OSError:
            return [self.worker]

    def traced(self, phase, n):
        """(commands run, {syscall: calls}) of phase under strace -c -f of the worker."""
        with tempfile.NamedTemporaryFile(prefix="heron-strace-", suffix=".txt") as out:
            args = ["strace", "-c", "-f", "-o", out.name]
            for t in self.tids():
                args += ["-p", str(t)]
            st = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(0.5)  # attached (strace prints nothing to say so)
            done = getattr(self, phase)(n, time.monotonic() + LIMIT_S)
            time.sleep(0.2)
            st.send_signal(signal.SIGINT)
            st.wait(timeout=30)
            return done, parse_strace(out.read().decode())

    def cpu_ns(self):
        """CPU time of every thread of the worker, ns (schedstat: finer than clock ticks)."""
        total = 0
        for t in self.tids():
            try:
                with open("/proc/%d/task/%d/schedstat" % (self.worker, t)) as f:
                    total += int(f.read().split()[0])
            except OSError:
                pass  # a thread that ended takes its time with it (none do here)
        return total

    def cpu(self, phase, n):
        """(commands run, worker CPU seconds) of phase untraced."""
        c0 = self.cpu_ns()
        done = getattr(self, phase)(n, time.monotonic() + LIMIT_S)
        time.sleep(0.1)
        return done, (self.cpu_ns() - c0) / 1e9


def parse_strace(text):
    """{syscall: calls} from strace -c output."""
    calls = {}
    for line in text.splitlines():
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:(\d+)\s+)?([a-z_0-9]+)\s*$", line)
        if m and m.group(3) != "total":
            calls[m.group(3)] = int(m.group(1))
    return calls


def run_phase(bench, phase, count, cpu_count, rounds):
    """{'per': {syscall: calls per command}, 'total': calls per command, 'cpu_ms': ...}."""
    if phase not in ("login", "logout", "idle"):
        bench.session()  # its LOGIN and SELECT are not the phase's
    if phase == "logout" and not bench.held:
        bench.login(count, time.monotonic() + LIMIT_S)
    done, calls = bench.traced(phase, count)
    per = {k: v / max(1, done) for k, v in calls.items()}
    cpu_s, ran = 0.0, 0
    for _ in range(rounds):
        if phase == "logout":
            bench.login(cpu_count, time.monotonic() + LIMIT_S)
        k, s = bench.cpu(phase, cpu_count)
        ran += k
        cpu_s += s
    if phase == "login":
        bench.logout(len(bench.held), time.monotonic() + LIMIT_S)
    return {"per": per, "total": sum(per.values()), "n": done,
            "cpu_ms": cpu_s * 1e3 * 1000 / max(1, ran), "ran": ran}


def show(label, phase, res):
    per = res["per"]
    shown = ", ".join("%s %.2f" % (k, per[k]) for k in SHOWN if per.get(k, 0) >= 0.005)
    rest = sum(v for k, v in per.items() if k not in SHOWN)
    print("%-6s %-9s all %.2f | %s%s | CPU %.0f ms per 1,000 (%d traced, %d timed)" %
          (label, phase, res["total"], shown, ", other %.2f" % rest if rest >= 0.005 else "",
           res["cpu_ms"], res["n"], res["ran"]), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--compare", metavar="BUILD_DIR", help="a second build, run in turn")
    ap.add_argument("--count", type=int, default=300, help="commands per traced phase")
    ap.add_argument("--cpu-count", type=int, default=1000, help="commands per untraced pass")
    ap.add_argument("--rounds", type=int, default=2, help="untraced passes for the CPU")
    ap.add_argument("--messages", type=int, default=200)
    ap.add_argument("--phases", default=",".join(PHASES))
    a = ap.parse_args()
    phases = [p for p in a.phases.split(",") if p]
    for p in phases:
        if p not in PHASES:
            ap.error("unknown phase %s (%s)" % (p, ",".join(PHASES)))
    builds = [("A", a.build)] + ([("B", a.compare)] if a.compare else [])
    print("load average %.2f %.2f %.2f, %s UTC" %
          (*os.getloadavg(), time.strftime("%Y-%m-%d %H:%M", time.gmtime())), flush=True)
    for label, path in builds:
        print("%s = %s" % (label, path))
    benches = {label: Bench(path, a.messages) for label, path in builds}
    results = {}
    try:
        for p in phases:
            for label, _ in builds:
                results[label, p] = run_phase(benches[label], p, a.count, a.cpu_count,
                                             a.rounds)
                show(label, p, results[label, p])
    finally:
        for b in benches.values():
            b.close()
    if a.compare:
        print("B/A: phase, all system calls, epoll_ctl, writes (write+writev+sendto+sendmsg), "
              "CPU")
        for p in phases:
            ra, rb = results["A", p], results["B", p]

            def wr(r):
                return sum(r["per"].get(k, 0) for k in ("write", "writev", "sendto", "sendmsg"))

            def ratio(x, y):
                return "%.2f" % (x / y) if y > 0 else "-"
            print("%-9s %s %s %s %s" %
                  (p, ratio(rb["total"], ra["total"]),
                   ratio(rb["per"].get("epoll_ctl", 0), ra["per"].get("epoll_ctl", 0)),
                   ratio(wr(rb), wr(ra)), ratio(rb["cpu_ms"], ra["cpu_ms"])))
    print("load average %.2f %.2f %.2f at the end" % os.getloadavg())


if __name__ == "__main__":
    main()
