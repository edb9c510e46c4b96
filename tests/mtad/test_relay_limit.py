#!/usr/bin/env python3
"""test_relay_limit.py — relay_concurrency holds for the whole daemon, not per worker: two
workers share max_connections = 2 (a worker holding its share, one, leaves new clients to the
other while the total is under the cap), so the two client sessions land on different workers and each worker queues and relays its own messages to one slow
destination at the same time; with relay_concurrency = 1 the destination never sees two
connections at once, and every message arrives. (AUTH failures counted across workers use
the same shared table: tests/common/test_shmtable.c.)

  test_relay_limit.py SOURCE_ROOT MTAD STORE_PEEK"""
import os
import re
import smtplib
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Mtad, RelayTarget, run_suite, wait_for,  # noqa: E402
                      wait_workers_ready, write_users)

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-relaylimit-")
PER_SESSION = 6
write_users(os.path.join(TMP, "users"), ["user1"])
relay = RelayTarget()
relay.data_delay = 0.3
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"workers": "2", "max_connections": "2", "relay_concurrency": "1",
             "transport_map": f"remote.test=127.0.0.1:{relay.port}",
             "trusted_networks": "127.0.0.0/8"}, tls=False)


def test_one_connection_for_all_workers():
    # both sessions greeted before any mail: one per worker (both workers listening first)
    wait_workers_ready(mtad, "mtad", 2)
    sessions = [smtplib.SMTP("127.0.0.1", mtad.port, timeout=30) for _ in range(2)]
    errors = []

    def send(k, c):
        try:
            for i in range(PER_SESSION):
                c.sendmail(f"user1@{DOMAIN}", [f"s{k}r{i}@remote.test"],
                           f"Subject: limit-{k}-{i}\r\n\r\nbody\r\n")
            c.quit()
        except Exception as e:  # reported below
            errors.append(e)
    threads = [threading.Thread(target=send, args=(k, c)) for k, c in enumerate(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    wait_for(lambda: len(relay.messages) >= 2 * PER_SESSION, 120, "every message relayed")
    pids = set(re.findall(r"mtad\[(\d+)\] info: \S+: to=<s\dr\d@remote\.test>, relay=127",
                          mtad.logtext()))
    assert len(pids) == 2, pids  # both workers relayed
    assert relay.max_active == 1, relay.max_active


def main():
    return run_suite(mtad, [test_one_connection_for_all_workers], TMP, cleanup=[relay.close])


if __name__ == "__main__":
    sys.exit(main())
