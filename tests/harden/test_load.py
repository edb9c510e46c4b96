#!/usr/bin/env python3
"""Load: 10,000 concurrent logged-in idle IMAP sessions and 1,000 concurrent SMTP
transactions are held, each answered afterwards (every NOOP OK, every message 250 and
stored). The fd limit is raised here (the daemons inherit it); the clients run in a separate
process (loadclient.py). Counts are asserted, never times; every step has a deadline.
Skipped (77) when the hard fd limit is too low.

  test_load.py SOURCE_ROOT MTAD IMAPD STORE_PEEK"""
import json
import os
import resource
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import DOMAIN, Daemon, Store, run_main, shared_conf, skip  # noqa: E402

ROOT, MTAD, IMAPD, PEEK = sys.argv[1:5]
IMAP_N, SMTP_N = 10000, 1000


def raise_fd_limit(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, want))
            return True
        except (ValueError, OSError):
            return False
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return True


def client(*args, timeout):
    r = subprocess.run([sys.executable, os.path.join(HERE, "loadclient.py"), *map(str, args)],
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def main():
    # per process: the client process holds IMAP_N sockets, the imapd workers share them
    if not raise_fd_limit(IMAP_N + 2048):
        skip("cannot raise the fd limit")
    tmp = tempfile.mkdtemp(prefix="heron-load-")
    # the clients come from 250*40 loopback addresses; the caps are not what is tested
    caps = {"imapd": {"max_connections": 20000, "max_connections_per_ip": 100,
                      "max_connections_per_user": 20000},
            "mtad": {"max_connections": 4000, "max_connections_per_ip": 100}}
    conf, smtp_port, imap_port = shared_conf(tmp, ["user1"], workers=2, map_size="64M",
                                             keys=caps)
    mtad = Daemon(MTAD, conf, os.path.join(tmp, "mtad.log"), smtp_port)
    imapd = Daemon(IMAPD, conf, os.path.join(tmp, "imapd.log"), imap_port)

    def body():
        imapd.start()
        mtad.start()
        got = client("imap", imap_port, IMAP_N, "user1", "user1", 240, timeout=300)
        print(f"imap: {got}", flush=True)
        assert got == {"greeted": IMAP_N, "logged_in": IMAP_N, "noop_ok": IMAP_N}, got
        got = client("smtp", smtp_port, SMTP_N, f"user1@{DOMAIN}", 120, timeout=180)
        print(f"smtp: {got}", flush=True)
        assert got == {"greeted": SMTP_N, "ready": SMTP_N, "accepted": SMTP_N}, got
        mtad.stop()
        stored = Store(PEEK, conf).inbox("user1")
        assert len(stored) == SMTP_N, len(stored)

    return run_main(body, tmp, [imapd, mtad], tail=3000)


if __name__ == "__main__":
    sys.exit(main())
