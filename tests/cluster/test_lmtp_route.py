#!/usr/bin/env python3
"""test_lmtp_route.py — mail routed by the directory's mailHost between two store hosts
(tests/cluster/heroncluster.py: two mtad + imapd pairs on 127.0.0.2 and 127.0.0.3 with their
own stores, one real slapd). A host's mtad takes mail for every user of the domain: a user homed
here is delivered into the local store, a user homed on the other host is queued and delivered
over LMTP to that host's mtad. Each message arrives exactly once and only on its home host; a
store host that is down means queued mail (never a bounce) delivered once it is back; a
recipient the backend refuses over LMTP gets that refusal, and the others of the same message
are still delivered once.

  test_lmtp_route.py SOURCE_ROOT MTAD IMAPD STORE_PEEK MAILCTL"""
import imaplib
import os
import re
import smtplib
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heroncluster import Cluster  # noqa: E402
from heronlib import (DOMAIN, assert_eq, assert_in, run_main, run_tests,  # noqa: E402
                      wait_for)

ROOT, MTAD, IMAPD, PEEK, MAILCTL = sys.argv[1:6]
TMP = tempfile.mkdtemp(prefix="heron-cluster-lmtp-")


def msg(subject, to="someone"):
    return (f"From: <x@example.org>\r\nTo: <{to}>\r\nSubject: {subject}\r\n"
            f"Message-ID: <{subject}@example.org>\r\n\r\nbody of {subject}\r\n")


def send(host, rcpts, subject, sender="x@example.org"):
    with smtplib.SMTP(host.addr, host.smtp_port, timeout=30) as c:
        return c.sendmail(sender, [f"{r}@{DOMAIN}" for r in rcpts], msg(subject))


def main():
    cl = Cluster(ROOT, MTAD, IMAPD, PEEK, TMP, users=8)
    h1 = h2 = None

    def queue_empty(h):
        return lambda: not [q for q in h.store.queue() if q.strip()]

    def arrived(h, user, subject, n=1):
        return lambda: h.subjects(user).count(subject) >= n

    def test_local_and_remote_in_one_message():
        # user1 is homed on store1, user2 on store2: one message through store1's SMTP
        assert_eq(send(h1, ["user1", "user2"], "both-1"), {})
        assert_eq(h1.subjects("user1").count("both-1"), 1)
        wait_for(arrived(h2, "user2", "both-1"), 30, "user2's copy on store2")
        wait_for(queue_empty(h1), 30, "store1's queue to empty")
        assert_eq(h2.subjects("user2").count("both-1"), 1)
        # never a copy on the wrong host
        assert_eq(h1.subjects("user2"), [])
        assert_eq(h2.subjects("user1"), [])
        log = h1.mtad.logtext()
        assert_in(f"to=<user2@{DOMAIN}>, relay=store2.heron.test[127.0.0.3]:", log)
        assert_in(f"status=sent (250 2.1.5 <user2@{DOMAIN}> Ok: delivered", log)

    def test_the_other_direction_and_aliases():
        # through store2's SMTP, to a store1 user by an alias and to a store2 user
        assert_eq(send(h2, ["alias.user3", "user4"], "back-2"), {})
        wait_for(arrived(h1, "user3", "back-2"), 30, "user3's copy on store1")
        assert_eq(h2.subjects("user4").count("back-2"), 1)
        wait_for(queue_empty(h2), 30, "store2's queue to empty")
        assert_eq(h1.subjects("user3").count("back-2"), 1)
        assert_eq(h2.subjects("user3"), [])

    def test_many_exactly_once():
        want = {}
        for k in range(12):
            user = f"user{1 + k % 6}"
            subject = f"many-{k}"
            via = h1 if k % 2 == 0 else h2
            assert_eq(send(via, [user], subject), {})
            want[(user, subject)] = cl.home(user)
        for (user, subject), home in want.items():
            wait_for(arrived(cl.hosts[home], user, subject), 30, f"{subject} for {user}")
        wait_for(lambda: queue_empty(h1)() and queue_empty(h2)(), 30, "both queues to empty")
        for (user, subject), home in want.items():
            assert_eq(cl.hosts[home].subjects(user).count(subject), 1, (user, subject))
            assert_eq(cl.hosts[1 - home].subjects(user).count(subject), 0, (user, subject))

    def test_store_host_down_then_back():
        h2.mtad.stop()
        # store1 still takes mail for store2's users: queued, not bounced
        assert_eq(send(h1, ["user6", "user5"], "down-1"), {})
        assert_eq(h1.subjects("user5").count("down-1"), 1)
        wait_for(lambda: "status=deferred" in h1.mtad.logtext() and
                 f"to=<user6@{DOMAIN}>" in h1.mtad.logtext(), 30, "a deferral for user6")
        queued = h1.store.queue()
        assert any(f"user6@{DOMAIN}" in q for q in queued), queued
        assert "bounced" not in h1.mtad.logtext().split("down-1")[-1]
        h2.mtad.start()
        wait_for(arrived(h2, "user6", "down-1"), 60, "user6's copy after store2 came back")
        wait_for(queue_empty(h1), 30, "store1's queue to empty")
        assert_eq(h2.subjects("user6").count("down-1"), 1)
        assert_eq(h1.subjects("user5").count("down-1"), 1)
        # no delivery status notification went back to the sender
        assert_eq([q for q in h1.store.queue() if q.strip()], [])

    def test_backend_refusal_per_recipient():
        # user8 is full on store2 (a one-message quota, one message in): its LMTP reply is
        # 452 and it stays queued; user2 and user4 of the same message are delivered once
        assert_eq(send(h2, ["user8"], "fill-8"), {})
        r = subprocess.run([MAILCTL, "-c", h2.conf, "quota", "set", "user8", "--messages",
                            "1"], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        assert_eq(send(h1, ["user2", "user8", "user4"], "quota-1"), {})
        wait_for(arrived(h2, "user2", "quota-1"), 30, "user2's copy")
        wait_for(arrived(h2, "user4", "quota-1"), 30, "user4's copy")
        wait_for(lambda: re.search(rf"to=<user8@{DOMAIN}>, relay=store2[^\n]*dsn=4\.2\.2, "
                                   r"status=deferred", h1.mtad.logtext()), 30,
                 "user8's deferral")
        assert_eq(h2.subjects("user8"), ["fill-8"])
        assert_eq(h2.subjects("user2").count("quota-1"), 1)
        assert_eq(h2.subjects("user4").count("quota-1"), 1)
        # the three went to store2 in one LMTP transaction, answered per recipient
        qids = [set(re.findall(rf"smtp rcpt qid=(\w+) to=<{u}@{DOMAIN}> local=yes",
                               h2.mtad.logtext())) for u in ("user2", "user8", "user4")]
        assert qids[0] & qids[1] & qids[2], qids
        # room again: the queued copy goes in, once
        r = subprocess.run([MAILCTL, "-c", h2.conf, "quota", "set", "user8", "--messages",
                            "0"], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        wait_for(arrived(h2, "user8", "quota-1"), 60, "user8's copy after the quota rose")
        wait_for(queue_empty(h1), 30, "store1's queue to empty")
        assert_eq(h2.subjects("user8"), ["fill-8", "quota-1"])
        assert_eq(h2.subjects("user2").count("quota-1"), 1)

    def test_imap_on_each_home_host():
        # the mail is read where it lives: each host's imapd logs its own users in
        c = imaplib.IMAP4(h2.addr, h2.imap_port, timeout=20)
        c.login("user2", "user2")
        typ, data = c.select("INBOX")
        assert_eq(typ, "OK")
        typ, data = c.search(None, "SUBJECT", "both-1")
        assert_eq(len(data[0].split()), 1)
        c.logout()
        c = imaplib.IMAP4(h1.addr, h1.imap_port, timeout=20)
        typ, data = c.login("user1", "user1")
        assert_eq(typ, "OK")
        c.logout()

    daemons = []

    def body():
        nonlocal h1, h2
        with cl:
            daemons.extend(cl.daemons())
            h1, h2 = cl.hosts
            return run_tests([test_local_and_remote_in_one_message,
                              test_the_other_direction_and_aliases, test_many_exactly_once,
                              test_store_host_down_then_back, test_backend_refusal_per_recipient,
                              test_imap_on_each_home_host])

    return run_main(body, TMP, daemons, tail=20000)


if __name__ == "__main__":
    sys.exit(main())
