#!/usr/bin/env python3
"""test_crash.py — kill -9 of mtad's workers and master during a stream of deliveries, three
times: every message that got its 250 is in the store (local recipients) or was relayed
(remote ones) once mtad has been restarted and the queue has drained.

  test_crash.py SOURCE_ROOT MTAD STORE_PEEK"""
import os
import smtplib
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Mtad, RelayTarget, Store, run_main, wait_for,  # noqa: E402
                      write_users)

ROOT, MTAD, PEEK = sys.argv[1:4]
ROUNDS = 3
SEND_SECONDS = 1.5
MAX_PER_ROUND = 400


def sender(port, round_no, acked, stop):
    """Sends one message per connection until stop is set; records those that got 250."""
    n = 0
    while not stop.is_set() and n < MAX_PER_ROUND:
        n += 1
        subject = f"crash-{round_no}-{threading.get_ident()}-{n}"
        rcpts = [f"user{n % 3 + 1}@{DOMAIN}"] + ([f"far{n}@remote.test"] if n % 2 else [])
        body = f"From: <s@{DOMAIN}>\r\nSubject: {subject}\r\n\r\nbody {n}\r\n"
        try:
            with smtplib.SMTP("127.0.0.1", port, timeout=10) as c:
                c.sendmail(f"s@{DOMAIN}", rcpts, body)
            acked.append((subject, rcpts))
        except (OSError, smtplib.SMTPException):
            pass  # the server died under us: not acknowledged, nothing promised


def main():
    tmp = tempfile.mkdtemp(prefix="heron-mtad-crash-")
    relay = RelayTarget()
    write_users(os.path.join(tmp, "users"), ["user1", "user2", "user3"])
    mtad = Mtad(MTAD, tmp, {"backend": "file", "users_file": os.path.join(tmp, "users")},
                {"transport_map": f"remote.test=127.0.0.1:{relay.port}",
                 "trusted_networks": "127.0.0.1/32", "relay_timeout": "2s"}, tls=False)
    store = Store(PEEK, mtad.conf)
    acked = []

    def body():
        for r in range(ROUNDS):
            mtad.start()
            stop = threading.Event()
            threads = [threading.Thread(target=sender, args=(mtad.port, r, acked, stop))
                       for _ in range(4)]
            before = len(acked)
            for t in threads:
                t.start()
            # the kill comes SEND_SECONDS after the round's first 250 (a loaded machine may
            # take long to start the workers; a round that acknowledged nothing tests nothing)
            wait_for(lambda: len(acked) > before, 60, f"a 250 in round {r}")
            time.sleep(SEND_SECONDS)
            mtad.kill9()
            stop.set()
            for t in threads:
                t.join(timeout=30)
        mtad.start()
        wait_for(lambda: not store.queue(), 120, "the queue to drain after the crashes")
        bodies = {}
        for u in ("user1", "user2", "user3"):
            bodies[u] = b"".join(store.body(u, uid) for uid, _b, _s in store.inbox(u))
        relayed = b"".join(m[2] for m in relay.messages)
        missing = []
        for subject, rcpts in acked:
            tag = f"Subject: {subject}\r\n".encode()
            local = rcpts[0].split("@")[0]
            if tag not in bodies[local]:
                missing.append((subject, local))
            if len(rcpts) > 1 and tag not in relayed:
                missing.append((subject, rcpts[1]))
        print(f"acknowledged {len(acked)} messages over {ROUNDS} kill -9 rounds; "
              f"missing {len(missing)}")
        assert not missing, missing[:10]

    return run_main(body, tmp, [mtad], cleanup=[relay.close], tail=20000)


if __name__ == "__main__":
    sys.exit(main())
