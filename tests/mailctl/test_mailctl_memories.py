#!/usr/bin/env python3
"""test_mailctl_memories.py — the Sieve vacation ("already answered") and duplicate (RFC 7352)
memories through `mailctl export USER DIR` and `mailctl import USER DIR` into another store
(what `user move` does): the real mtad on store A answers a sender once (the reply arrives at
the real sink) and remembers a Message-ID; the export's heron-sieve-memory holds both with
their expiry times and not the expired memories planted beside them (mailctl_plant); the
import into store B restores exactly those (same hash, same expiry); the real mtad on store B
then sends that sender no second reply while it answers a new one, and files the message
with the remembered Message-ID as a duplicate. A heron-sieve-memory that does not parse (a
bad kind, hash or expiry, a line too long or not ended, more lines than the limit) fails the
import, exit 65, with no mail imported. A renamed user keeps its memories (its export carries
them).

  test_mailctl_memories.py MTAD MAILCTL MAILCTL_PLANT SINK"""
import json
import os
import shutil
import smtplib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, HOST, Daemon, Sink, assert_eq, run_main, run_tests,  # noqa
                      shared_conf, wait_for)

MTAD, MAILCTL, PLANT, SINK = sys.argv[1:5]
TMP = tempfile.mkdtemp(prefix="heron-mailctl-memories-")
sink = Sink(SINK, TMP, {"keep": os.path.join(TMP, "sinkmail"), "records": "all"})
SCRIPT = ('require ["vacation", "duplicate", "fileinto", "mailbox"];\n'
          'if duplicate { fileinto :create "Dups"; stop; }\n'
          'vacation :days 7 :subject "ann-away" "ann is away";\n')
EXPORT = os.path.join(TMP, "export")


def store(name):
    d = os.path.join(TMP, name)
    os.mkdir(d)
    conf, smtp, _imap = shared_conf(d, ["ann", "bob", "carl"], keys={
        "mtad": {"transport_map": f"sink.test={HOST}:{sink.port}", "retry_schedule": "1s"}})
    return conf, smtp, Daemon(MTAD, conf, os.path.join(d, "mtad.log"), smtp)


CONF_A, SMTP_A, mtad_a = store("a")
CONF_B, SMTP_B, mtad_b = store("b")


def mailctl(conf, *args, rc=0):
    r = subprocess.run([MAILCTL, "-c", conf, *args], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == rc, (args, r.returncode, r.stdout, r.stderr)
    return r


def memories(conf, user="ann"):
    """Every memory of user as stored, the expired ones too: {(kind, hash): until}."""
    r = subprocess.run([PLANT, conf, "memories", user], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    out = {}
    for line in r.stdout.splitlines():
        kind, h, until = line.split()
        out[(kind, h)] = int(until)
    return out


def messages(conf, user, mailbox):
    rows = json.loads(mailctl(conf, "--json", "mailbox", "list", user).stdout)
    return sum(r["messages"] for r in rows if r["mailbox"] == mailbox)


def send(port, frm, subject, mid):
    msg = (f"From: <{frm}>\r\nTo: <ann@{DOMAIN}>\r\nSubject: {subject}\r\n"
           f"Message-ID: <{mid}>\r\n\r\nHello.\r\n")
    with smtplib.SMTP(HOST, port, timeout=30) as c:
        assert_eq(c.sendmail(frm, [f"ann@{DOMAIN}"], msg), {})


def replies_to(addr):
    """Vacation replies the sink kept for addr (its RCPT, the Delivered-To it records)."""
    d = os.path.join(TMP, "sinkmail", "new")
    n = 0
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        with open(os.path.join(d, name), "rb") as f:
            head = f.read().split(b"\r\n\r\n")[0]
        if (head.startswith(b"Return-Path: <>\r\n") and b"\r\nSubject: ann-away" in head and
                f"\r\nDelivered-To: {addr}\r\n".encode() in head):
            n += 1
    return n


def fnv1a64(key):
    """The store's hash of a memory's key (store_sieve.c), in the export's 16 hex digits."""
    h = 1469598103934665603
    for b in key.encode():
        h = ((h ^ b) * 1099511628211) % (1 << 64)
    return f"{h:016x}"


def test_carried_to_another_store():
    script = os.path.join(TMP, "ann.sieve")
    with open(script, "w") as f:
        f.write(SCRIPT)
    mailctl(CONF_A, "sieve", "put", "ann", "main", script, "--activate")
    mtad_a.start()
    send(SMTP_A, "person@sink.test", "first", "m1@sink.test")
    wait_for(lambda: replies_to("person@sink.test") == 1, timeout=60,
             what="the vacation reply from store A")
    wait_for(lambda: messages(CONF_A, "ann", "INBOX") == 1, what="first in INBOX on A")
    mtad_a.stop()
    live = memories(CONF_A)
    assert_eq(sorted(k for k, _h in live), ["D", "V"], live)  # the reply and the Message-ID
    now = int(time.time())
    assert all(until > now for until in live.values()), live
    # memories already expired (mtad prunes them only a few at a time): not carried
    for kind in ("V", "D"):
        subprocess.run([PLANT, CONF_A, "remember", "ann", kind, "gone-" + kind,
                        str(now - 100)], check=True, timeout=60)
    stored = memories(CONF_A)
    assert_eq(len(stored), 4, stored)
    assert ("V", fnv1a64("gone-V")) in stored and ("D", fnv1a64("gone-D")) in stored

    mailctl(CONF_A, "export", "ann", EXPORT)
    with open(os.path.join(EXPORT, "heron-sieve-memory")) as f:
        lines = f.read().splitlines()
    assert_eq(sorted(lines), sorted(f"{k} {h} {u}" for (k, h), u in live.items()))

    mailctl(CONF_B, "user", "add", "ann")
    doc = json.loads(mailctl(CONF_B, "--json", "import", "ann", EXPORT).stdout)
    assert_eq((doc["imported"], doc["sieve_scripts"], doc["sieve_memories"]), (1, 1, 2), doc)
    assert_eq(memories(CONF_B), live)  # same hashes, same expiry; the expired ones not

    mtad_b.start()
    # the sender store A answered: no second reply (the memory keeps its expiry: had the
    # vacation answered, it would have been remembered anew); a new sender is answered
    send(SMTP_B, "person@sink.test", "second", "m2@sink.test")
    wait_for(lambda: messages(CONF_B, "ann", "INBOX") == 2, what="second in INBOX on B")
    send(SMTP_B, "other@sink.test", "third", "m3@sink.test")
    wait_for(lambda: replies_to("other@sink.test") == 1, timeout=60,
             what="the vacation reply to a new sender from store B")
    assert_eq(replies_to("person@sink.test"), 1)
    after = memories(CONF_B)
    for key, until in live.items():
        assert_eq(after.get(key), until, (key, after))
    # the Message-ID store A saw is a duplicate on B
    send(SMTP_B, "person@sink.test", "first again", "m1@sink.test")
    wait_for(lambda: messages(CONF_B, "ann", "Dups") == 1, what="the duplicate filed")
    assert_eq(messages(CONF_B, "ann", "INBOX"), 3)  # second, third and the first one


def test_bad_memory_file_imports_nothing():
    good = f"V {'0' * 15}1 {int(time.time()) + 3600}\n"
    cases = {
        "kind": good + "X 0000000000000001 99999999999\n",
        "uppercase hex": good + "D 00000000000000AB 99999999999\n",
        "short hash": "V 0001 99999999999\n",
        "no expiry": "V 0000000000000001 \n",
        "expiry not a number": "V 0000000000000001 12x\n",
        "expiry too large": "V 0000000000000001 99999999999999999999\n",
        "too long": "V 0000000000000001 1" + "0" * 80 + "\n",
        "not ended": good + "V 0000000000000002 99999999999",
        "more than 1048576 lines": "V 0000000000000000 1\n" * 1048577,
    }
    mailctl(CONF_B, "user", "add", "bob")
    for what, text in cases.items():
        d = os.path.join(TMP, "bad")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(EXPORT, d)
        with open(os.path.join(d, "heron-sieve-memory"), "w") as f:
            f.write(text)
        r = mailctl(CONF_B, "import", "bob", d, rc=65)
        assert "heron-sieve-memory" in r.stderr, (what, r.stderr)
        assert_eq(messages(CONF_B, "bob", "INBOX"), 0, what)
        assert_eq(memories(CONF_B, "bob"), {}, what)
    # the good line alone is taken, and an export without the file carries none
    with open(os.path.join(d, "heron-sieve-memory"), "w") as f:
        f.write(good)
    doc = json.loads(mailctl(CONF_B, "--json", "import", "bob", d).stdout)
    assert_eq(doc["sieve_memories"], 1, doc)
    os.unlink(os.path.join(d, "heron-sieve-memory"))
    mailctl(CONF_B, "user", "add", "carl")
    doc = json.loads(mailctl(CONF_B, "--json", "import", "carl", d).stdout)
    assert_eq(doc["sieve_memories"], 0, doc)


def test_rename_keeps_memories():
    # the memories are kept by the user's id and their keys hold no user name: a renamed
    # user keeps them, and its export carries them
    before = memories(CONF_B)
    # ann's two from A, the reply to other@ and the Message-IDs m2 and m3
    assert_eq(len(before), 5, before)
    mailctl(CONF_B, "user", "rename", "ann", "anna")
    assert_eq(memories(CONF_B, "anna"), before)
    d = os.path.join(TMP, "export-anna")
    mailctl(CONF_B, "export", "anna", d)
    with open(os.path.join(d, "heron-sieve-memory")) as f:
        assert_eq(sorted(f.read().splitlines()),
                  sorted(f"{k} {h} {u}" for (k, h), u in before.items()))


def main():
    def body():
        sink.start()
        mailctl(CONF_A, "user", "add", "ann")
        return run_tests([test_carried_to_another_store, test_bad_memory_file_imports_nothing,
                          test_rename_keeps_memories])
    return run_main(body, TMP, [mtad_a, mtad_b, sink], tail=8000)


if __name__ == "__main__":
    sys.exit(main())
