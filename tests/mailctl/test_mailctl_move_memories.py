#!/usr/bin/env python3
"""test_mailctl_move_memories.py — `mailctl user move` carries the user's Sieve vacation and
duplicate memories (tests/cluster/heroncluster.py: two store hosts with their own stores and
one real slapd): memories planted in the source store (mailctl_plant; one already expired)
are in the target store after the copy, with the same hash and expiry, the expired one not;
a memory the target holds and the source does not makes the comparison before the flip
refuse (exit 74, naming the memory), and the next run copies anew, agrees, flips and
finishes.

  test_mailctl_move_memories.py SOURCE_ROOT MTAD IMAPD STORE_PEEK MAILCTL MAILCTL_PLANT"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heroncluster import Cluster, run_cluster  # noqa: E402
from heronlib import assert_eq  # noqa: E402

ROOT, MTAD, IMAPD, PEEK, MAILCTL, PLANT = sys.argv[1:7]
TMP = tempfile.mkdtemp(prefix="heron-move-memories-")
DEAD_PROVIDER = "ldap://127.0.0.1:1/"  # nothing listens: the flip fails, the copy is ready


def mailctl(conf, *args):
    r = subprocess.run([MAILCTL, "-c", conf, "--json", *args], capture_output=True,
                       text=True, timeout=120)
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else None, r.stderr


def move(h_from, h_to, user, *more, rc=0):
    code, doc, err = mailctl(h_from.conf, "user", "move", user, h_to.name, "--to", h_to.conf,
                             *more)
    assert code == rc, (user, more, code, doc, err)
    return doc


def plant(h, *args):
    r = subprocess.run([PLANT, h.conf, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r.stdout


def memories(h, user):
    """Every memory of user in h's store, the expired ones too: {(kind, hash): until}."""
    out = {}
    for line in plant(h, "memories", user).splitlines():
        kind, hsh, until = line.split()
        out[(kind, hsh)] = int(until)
    return out


def main():
    cl = Cluster(ROOT, MTAD, IMAPD, PEEK, TMP, users=2)
    h1 = h2 = None

    def test_move_carries_and_compares_memories():
        code, _doc, err = mailctl(h1.conf, "user", "add", "user1")  # homed on store1
        assert code == 0, err
        now = int(time.time())
        for kind, key, until in (("V", "away\x1fperson@example.org", now + 3600),
                                 ("D", "\x1f<m1@example.org>", now + 7200),
                                 ("V", "away\x1fgone@example.org", now - 10)):
            plant(h1, "remember", "user1", kind, key, str(until))
        stored = memories(h1, "user1")
        assert_eq(len(stored), 3, stored)
        live = {k: u for k, u in stored.items() if u > now}
        assert_eq(len(live), 2, stored)

        # copied and compared; the flip fails (provider down): the target holds the copy
        move(h1, h2, "user1", "--provider", DEAD_PROVIDER, rc=75)
        assert_eq(memories(h2, "user1"), live)
        # one more on the target: the comparison before the flip refuses, and copies anew
        plant(h2, "remember", "user1", "D", "\x1f<extra@example.org>", str(now + 3600))
        doc = move(h1, h2, "user1", rc=74)
        assert "differs" in doc["error"] and "memory D" in doc["error"], doc
        doc = move(h1, h2, "user1")
        assert_eq(doc["step"], "flipped")
        assert_eq(memories(h2, "user1"), live)
        assert_eq(move(h1, h2, "user1", "--finish")["step"], "done")
        assert_eq(memories(h2, "user1"), live)

    def started(cl):
        nonlocal h1, h2
        h1, h2 = cl.hosts

    return run_cluster(cl, TMP, [test_move_carries_and_compares_memories], started)


if __name__ == "__main__":
    sys.exit(main())
