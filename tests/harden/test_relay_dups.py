#!/usr/bin/env python3
"""kill -9 of mtad during remote delivery, in rounds, and the copies each recipient got.

Every message goes to two remote recipients on two relay targets (two real sinks): one quick,
one slow, so a message's first copy is delivered while its second is still on its way. mtad
is killed with SIGKILL (master and workers) several times while both deliver, and started
again at once. Afterwards every acknowledged message must have reached both recipients, and
a recipient may have a copy twice only when mtad was killed between the target's 250 and
mtad's record of it: at most the transactions in flight at each kill (relay_concurrency per
destination). The count is printed. While deliveries run, `mailctl queue list` shows the
leased entries as in progress.

  test_relay_dups.py SOURCE_ROOT MTAD SINK MAILCTL STORE_PEEK"""
import json
import os
import smtplib
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import (DOMAIN, Mtad, Sink, SinkControl, Store, run_main,  # noqa: E402
                      run_tests, wait_for, wait_workers_ready, write_users)

ROOT, MTAD, SINK, MAILCTL, PEEK = sys.argv[1:6]
MESSAGES = 40
ROUNDS = 4
CONCURRENCY = 2

TMP = tempfile.mkdtemp(prefix="heron-relaydups-")
os.makedirs(os.path.join(TMP, "fast"))
os.makedirs(os.path.join(TMP, "slow"))
fast = Sink(SINK, os.path.join(TMP, "fast"), {"starttls": "no"})
slow = Sink(SINK, os.path.join(TMP, "slow"), {"starttls": "no"})
write_users(os.path.join(TMP, "users"), ["user1"])
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"transport_map": f"fast.test=127.0.0.1:{fast.port},slow.test=127.0.0.1:{slow.port}",
             "trusted_networks": "127.0.0.1/32", "relay_timeout": "10s",
             "retry_schedule": "1s", "relay_concurrency": str(CONCURRENCY),
             "max_message_size": "1M"}, tls=False)
store = Store(PEEK, mtad.conf)


def queue_states():
    r = subprocess.run([MAILCTL, "-c", mtad.conf, "--json", "queue", "list"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return []
    return [row.get("state") for row in json.loads(r.stdout or "[]")]


def test_kill9_rounds_during_remote_delivery():
    SinkControl(fast.control_port, check=True).req(cmd="faults", delay_ms=30)
    SinkControl(slow.control_port, check=True).req(cmd="faults", delay_ms=150)
    ids = []
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=30) as c:
        for i in range(MESSAGES):
            mid = f"<dup.{i}@{DOMAIN}>"
            c.sendmail("sender@example.org", ["a@fast.test", "b@slow.test"],
                       f"From: <sender@example.org>\r\nMessage-ID: {mid}\r\n"
                       f"X-Mailload-Sent: {int(time.time() * 1000)}\r\n"
                       f"Subject: dup {i}\r\n\r\nrelay me\r\n")
            ids.append(mid)
    # while both targets take mail, the entries being delivered show as in progress
    assert wait_for(lambda: "in progress" in queue_states(), 30,
                    "an entry in progress in mailctl queue list")
    for k in range(ROUNDS):
        time.sleep(1.5)  # deliveries under way on both targets
        mtad.kill9()
        mtad.start()
        wait_workers_ready(mtad, "mtad", 2)
    wait_for(lambda: not store.queue(), 240, "the queue to drain after the kills")
    copies = {}
    dups = lost = 0
    for name, sink in (("fast", fast), ("slow", slow)):
        got = SinkControl(sink.control_port, check=True).ids()
        for mid in ids:
            n = got.count(mid)
            copies[(name, mid)] = n
            lost += n == 0
            dups += max(0, n - 1)
    bound = ROUNDS * CONCURRENCY * 2
    print(f"relay duplicates after {ROUNDS} kill -9 rounds: {dups} extra copies of "
          f"{2 * MESSAGES} (bound: {bound}, the transactions in flight at the kills); "
          f"lost: {lost}")
    assert lost == 0, [k for k, v in copies.items() if v == 0]
    assert dups <= bound, sorted((k, v) for k, v in copies.items() if v > 1)
    released = mtad.logtext().count(" released ")
    assert released >= 1, "no restarted worker released its predecessor's leases"


def main():
    def body():
        fast.start()
        slow.start()
        mtad.start()
        wait_workers_ready(mtad, "mtad", 2)
        return run_tests([test_kill9_rounds_during_remote_delivery], mtad)
    return run_main(body, TMP, [mtad],
                    cleanup=[lambda: fast.stop(timeout=10), lambda: slow.stop(timeout=10)])


if __name__ == "__main__":
    sys.exit(main())
