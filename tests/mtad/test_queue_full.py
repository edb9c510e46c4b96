#!/usr/bin/env python3
"""test_queue_full.py — the queue runner at its limit of jobs in flight (MAX_JOBS, 256, in
queue_runner.c): entries due while it is full are leased when a job ends, not at the next
tick (#23: up to a second with a slot free and mail waiting). One worker, one connection to
the destination (relay_concurrency = 1) and a server that accepts it and says nothing until
the test lets it go: 260 messages queued there hold 256 jobs (one connected, the others
waiting for the slot) and leave 4 entries due. Then the server answers 421 to every
connection; each job ends deferred (next try in an hour). No timing: the runner's debug
lines say it found itself full and that a job's end started the next pass; every recipient
is tried (the 4 entries left too). Then `mailctl queue flush` makes every entry due without
telling mtad: the runner's periodic pass finds them (was: each of the hundreds of kicks
before had moved that pass a second further away, libevent's EV_PERSIST, so none came
within minutes); every recipient is tried a second time.

  test_queue_full.py SOURCE_ROOT MTAD MAILCTL"""
import os
import smtplib
import socket
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, HOST, Mtad, assert_eq, assert_in, run_suite,  # noqa: E402
                      wait_for, write_users)

ROOT, MTAD, MAILCTL = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-queue-full-")
MAX_JOBS = 256  # queue_runner.c
N = MAX_JOBS + 4


class Tarpit:
    """Accepts connections and holds them without a greeting until opened; from then on
    every connection (held or new) gets 421 and is closed."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((HOST, 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.held, self.accepted = [], 0
        self.lock = threading.Lock()
        self.opened = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.done.is_set():
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            with self.lock:
                self.accepted += 1
                if not self.opened.is_set():
                    self.held.append(c)
                    continue
            self.refuse(c)

    @staticmethod
    def refuse(c):
        try:
            c.sendall(b"421 4.3.2 busy, try again later\r\n")
        except OSError:
            pass
        c.close()

    def open(self):
        with self.lock:
            self.opened.set()
            held, self.held = self.held, []
        for c in held:
            self.refuse(c)

    def close(self):
        self.done.set()
        self.thread.join(timeout=5)
        for c in self.held:
            c.close()
        self.sock.close()


tarpit = Tarpit()
write_users(os.path.join(TMP, "users"), ["user1"])
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"transport_map": f"hold.test=127.0.0.1:{tarpit.port}", "workers": "1",
             "trusted_networks": "127.0.0.0/8", "relay_concurrency": "1",
             "relay_timeout": "300s", "retry_schedule": "1h"}, tls=False)
mtad.sections["log"]["level"] = "debug"
mtad.write_conf()
FULL = f"queue: {MAX_JOBS} jobs in flight, the most: the next lease when one ends"
WAKE = f"queue: a job ended with {MAX_JOBS} in flight: leasing again"


def tries(log, i):
    """How many times the runner tried rcpt i (its outcome lines)."""
    return log.count(f": to=<r{i}@hold.test>, relay=")


def test_full_runner_leases_when_a_job_ends():
    mark = len(mtad.logtext())
    with smtplib.SMTP(HOST, mtad.port, timeout=30) as c:
        for i in range(N):
            assert_eq(c.sendmail(f"user1@{DOMAIN}", [f"r{i}@hold.test"],
                                 f"Subject: held {i}\r\n\r\nbody\r\n"), {})
    wait_for(lambda: FULL in mtad.logtext()[mark:], timeout=60, what="the runner full")
    wait_for(lambda: tarpit.accepted >= 1, timeout=60, what="the one connection")
    log = mtad.logtext()[mark:]
    assert_eq([i for i in range(N) if tries(log, i) > 0], [], "none tried yet")
    tarpit.open()
    wait_for(lambda: all(tries(mtad.logtext()[mark:], i) >= 1 for i in range(N)),
             timeout=120, what="every recipient tried once")
    assert_in(WAKE, mtad.logtext()[mark:])
    assert_eq(max(tries(mtad.logtext()[mark:], i) for i in range(N)), 1, "next try in 1h")


def test_flush_seen_by_the_periodic_pass():
    mark = len(mtad.logtext())
    r = subprocess.run([MAILCTL, "-c", mtad.conf, "queue", "flush", "ALL"],
                       capture_output=True, text=True)
    assert_eq(r.returncode, 0, r.stderr)
    wait_for(lambda: all(tries(mtad.logtext()[mark:], i) >= 1 for i in range(N)),
             timeout=60, what="every recipient tried again after the flush")


def main():
    return run_suite(mtad, [test_full_runner_leases_when_a_job_ends,
                            test_flush_seen_by_the_periodic_pass], TMP,
                     cleanup=[tarpit.close])


if __name__ == "__main__":
    sys.exit(main())
