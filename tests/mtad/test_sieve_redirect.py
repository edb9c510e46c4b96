#!/usr/bin/env python3
"""test_sieve_redirect.py — a Sieve redirect and a vacation reply exactly once across kill -9,
end to end: mail sent with smtplib (SMTP, and LMTP once) to the real mtad for users whose
scripts redirect (with :copy and without) or reply (vacation), the real sink as the remote
receiver of the copies and replies, the mailbox read back with store_peek. Such a recipient
is delivered by the queue runner (deliver_sieve.c), and mtad kills itself, master and its
one worker, at each window between the commits of that delivery
(HERON_MTAD_CRASH_AT=POINT:FILE, once per file): after the redirect copies are queued, after
the delivery's commit (with and without a vacation reply owed), after the reply is queued;
then it is started again. Each time the sink gets exactly one redirected copy (or one reply)
and the mailbox holds exactly one kept copy (none for a redirect without :copy). One worker:
a second one could be relaying a copy when the kill comes, and a kill between the remote
250 and the queue's record of it sends that copy again (the relay's own window, mtad.8). A
mailbox over quota (452, retried every second) gets its redirect copy once, not once per
retry, and the kept copy when the quota allows. Then kill -9s wherever they fall among
the runner's deliveries of a stream of such messages: one copy, reply and kept copy each.
At the end the records of finished recipients are all gone (a restart's sweep finds none
left).

  test_sieve_redirect.py SOURCE_ROOT MTAD STORE_PEEK MAILCTL SINK"""
import collections
import os
import random
import re
import smtplib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, HOST, Mtad, Sink, Store, assert_eq, assert_in,  # noqa: E402
                      free_port, mtad_records_swept, run_main, run_tests, wait_for,
                      write_users)

ROOT, MTAD, PEEK, MAILCTL, SINK = sys.argv[1:6]
TMP = tempfile.mkdtemp(prefix="heron-sieve-redirect-")
USERS = ["bob", "carl", "dora", "eve", "fred", "gina", "hana", "ida", "jon", "kim"]
write_users(os.path.join(TMP, "users"), USERS)
SINKMAIL = os.path.join(TMP, "sinkmail")
sink = Sink(SINK, TMP, {"keep": SINKMAIL, "records": "all"})
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"transport_map": f"sink.test=127.0.0.1:{sink.port}", "retry_schedule": "1s",
             "workers": "1", "subaddress_folder": "yes"},
            tls=False)
mtad.sections["sieve"] = {"vacation_min_days": "1"}
mtad.write_conf()
store = Store(PEEK, mtad.conf)
CRASH_ENV = "HERON_MTAD_CRASH_AT"
FAIL_ENV = "HERON_MTAD_FAIL_AT"


def mailctl(*args):
    r = subprocess.run([MAILCTL, "-c", mtad.conf, *args], capture_output=True, text=True)
    assert_eq(r.returncode, 0, (args, r.stdout, r.stderr))
    return r.stdout


def put(user, script):
    path = os.path.join(TMP, f"{user}.sieve")
    with open(path, "w") as f:
        f.write(script)
    mailctl("sieve", "put", user, "main", path, "--activate")


def send(to, subject, frm="ext@example.org", body="Hello.\r\n"):
    msg = (f"From: <{frm}>\r\nTo: <{to}>\r\nSubject: {subject}\r\n"
           f"Message-ID: <{subject.replace(' ', '.')}.{time.time()}@example.org>\r\n\r\n"
           f"{body}")
    with smtplib.SMTP(HOST, mtad.port, timeout=30) as c:
        assert_eq(c.sendmail(frm, [to], msg), {})


def sink_messages():
    d = os.path.join(SINKMAIL, "new")
    out = []
    for n in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        with open(os.path.join(d, n), "rb") as f:
            out.append(f.read())
    return out


def at_sink(subject, rcpt):
    """How many copies with this subject the sink got for rcpt (the Delivered-To it
    records for its RCPT, the first field after Return-Path)."""
    mark = f"\r\nDelivered-To: {rcpt}\r\n".encode()
    return len([m for m in sink_messages()
                if f"\r\nSubject: {subject}\r\n".encode() in m
                and mark in m.split(b"\r\n\r\n")[0]])


def replies_to(addr, subject):
    """Vacation replies (from the null sender) the sink got for addr."""
    return len([m for m in sink_messages() if m.startswith(b"Return-Path: <>\r\n")
                and f"\r\nDelivered-To: {addr}\r\n".encode() in m.split(b"\r\n\r\n")[0]
                and f"\r\nSubject: {subject}\r\n".encode() in m])


def in_mailbox(user, subject):
    n = 0
    for m in store.inbox(user):
        if f"\r\nSubject: {subject}\r\n".encode() in store.body(user, int(m[0])):
            n += 1
    return n


def queued_for(addr):
    return [e for e in store.queue() if addr in e]


def make_user(user):
    """The store account (made by its first mail), before its script goes in."""
    send(f"{user}@{DOMAIN}", f"{user} made")
    wait_for(lambda: in_mailbox(user, f"{user} made") == 1, what=f"{user}'s account")


def crash_at(point, action):
    """mtad started with the crash point armed, action() (the mail), mtad's kill at the point
    awaited (what is left of it reaped), then started again (the point disarmed: its file
    is gone)."""
    flag = os.path.join(TMP, f"crash-{point}")
    open(flag, "w").close()
    mtad.stop()
    mark = len(mtad.logtext())
    os.environ[CRASH_ENV] = f"{point}:{flag}"
    try:
        mtad.start()
        action()
        wait_for(lambda: not os.path.exists(flag), timeout=60, what=f"the crash at {point}")
        wait_for(lambda: f"crash point {point}: killed" in mtad.logtext()[mark:],
                 what="the crash point's line")
        mtad.proc.wait(timeout=30)  # the master killed too: nothing restarted
        mtad.proc = None
    finally:
        del os.environ[CRASH_ENV]
    mtad.start()
    return mark


def failing_once(point, action):
    """action() (which starts mtad) with the fail point armed in mtad's environment: POINT
    fails once as a transient store error would (the flag file gone says it did)."""
    flag = os.path.join(TMP, f"fail-{point}")
    open(flag, "w").close()
    os.environ[FAIL_ENV] = f"{point}:{flag}"
    try:
        return action(), flag
    finally:
        del os.environ[FAIL_ENV]


def restart():
    mtad.stop()
    mtad.start()
    return len(mtad.logtext())


def settle(addr):
    """The queue holds nothing more for addr (every copy and reply relayed)."""
    wait_for(lambda: not queued_for(addr), timeout=60, what=f"the queue emptied of {addr}")


def bob_one_copy_one_kept(subj, mark):
    """After a kill between bob's copies and his kept copy: one of each, the copies found
    queued by the run after the restart (log from mark on)."""
    wait_for(lambda: at_sink(subj, "far@sink.test") >= 1 and in_mailbox("bob", subj) >= 1,
             timeout=60, what="the copy at the sink and the kept one")
    settle("far@sink.test")
    settle(f"bob@{DOMAIN}")
    assert_eq(at_sink(subj, "far@sink.test"), 1)
    assert_eq(in_mailbox("bob", subj), 1)
    assert_in("queued before a restart or a retry; not again", mtad.logtext()[mark:])


def test_redirect_copy_killed_after_the_copies():
    """redirect :copy: killed after the copies' commit (their 'r' record in it), before the
    kept copy's: the run after the restart finds the record, queues no second copy and
    delivers the kept one."""
    make_user("bob")
    put("bob", 'require "copy";\nredirect :copy "far@sink.test";\n')
    subj = "copy killed after the copies"
    mark = crash_at("sieve-redirect-queued", lambda: send(f"bob@{DOMAIN}", subj))
    bob_one_copy_one_kept(subj, mark)


def test_lmtp_redirect_killed_after_the_copies():
    """The same over LMTP (the recipient's 250 once its queue entry is durable, the queue
    runner's delivery from there): one copy, one kept."""
    subj = "lmtp copy killed after the copies"
    msg = (f"From: <ext@example.org>\r\nTo: <bob@{DOMAIN}>\r\nSubject: {subj}\r\n\r\n"
           "Hello.\r\n")

    def lmtp():
        with smtplib.LMTP(HOST, mtad.lmtp_port, timeout=30) as c:
            assert_eq(c.sendmail("ext@example.org", [f"bob@{DOMAIN}"], msg), {})

    mark = crash_at("sieve-redirect-queued", lmtp)
    bob_one_copy_one_kept(subj, mark)


def test_redirect_killed_after_the_delivery():
    """redirect without :copy (no kept copy): killed after the delivery's commit (its 'q'
    mark), before the queue has the outcome: one copy, nothing in the mailbox; and with
    :copy, killed at the same point: one copy, one kept."""
    make_user("carl")
    put("carl", 'require "copy";\n'
                'if header :contains "subject" "keep" { redirect :copy "near@sink.test"; }\n'
                'else { redirect "near@sink.test"; }\n')
    for subj, kept in (("moved, killed after the delivery", 0),
                       ("keep too, killed after the delivery", 1)):
        mark = crash_at("sieve-delivered", lambda: send(f"carl@{DOMAIN}", subj))
        wait_for(lambda: at_sink(subj, "near@sink.test") >= 1, timeout=60,
                 what="the copy at the sink")
        settle("near@sink.test")
        settle(f"carl@{DOMAIN}")
        assert_eq(at_sink(subj, "near@sink.test"), 1, subj)
        assert_eq(in_mailbox("carl", subj), kept, subj)
        assert_in("delivered before a restart", mtad.logtext()[mark:])


def test_redirect_over_quota_once():
    """The kept copy waits on a full mailbox (452, retried every second): the copy goes out
    at the first try, and not again at each retry; the kept copy once the quota allows."""
    make_user("dora")
    put("dora", 'require "copy";\nredirect :copy "quota@sink.test";\n')
    mailctl("quota", "set", "dora", "--messages", "1")
    subj = "over quota"
    mark = len(mtad.logtext())
    send(f"dora@{DOMAIN}", subj)
    wait_for(lambda: mtad.logtext()[mark:].count("4.2.2 mailbox full") >= 3, timeout=60,
             what="three tries on the full mailbox")
    wait_for(lambda: not queued_for("quota@sink.test"), timeout=60, what="the copy relayed")
    assert_eq(at_sink(subj, "quota@sink.test"), 1)
    assert_eq(in_mailbox("dora", subj), 0)
    mailctl("quota", "set", "dora", "--messages", "100")
    wait_for(lambda: in_mailbox("dora", subj) == 1, timeout=60, what="the kept copy")
    settle(f"dora@{DOMAIN}")
    assert_eq(at_sink(subj, "quota@sink.test"), 1)
    assert_eq(in_mailbox("dora", subj), 1)
    assert_in("queued before a restart or a retry; not again", mtad.logtext()[mark:])


def test_vacation_reply_once_across_kills():
    """vacation: killed after the delivery's commit that remembers the reply (the mark says
    it is owed), and after the reply's commit (its 'v' record), each time before the queue
    has the outcome: one reply each, one kept copy each."""
    make_user("eve")
    put("eve", 'require "vacation";\nvacation :days 3 :subject "eve-away" "eve is away";\n')
    for point, frm in (("sieve-delivered-reply-owed", "pal1@sink.test"),
                       ("sieve-reply-queued", "pal2@sink.test")):
        subj = f"to eve from {frm}"
        mark = crash_at(point, lambda: send(f"eve@{DOMAIN}", subj, frm=frm))
        wait_for(lambda: replies_to(frm, "eve-away") >= 1 and in_mailbox("eve", subj) >= 1,
                 timeout=60, what="the reply at the sink and the kept copy")
        settle(frm)
        settle(f"eve@{DOMAIN}")
        assert_eq(replies_to(frm, "eve-away"), 1, point)
        assert_eq(in_mailbox("eve", subj), 1, point)
        assert_in("its vacation reply owed", mtad.logtext()[mark:])
    # the memory holds: a second message from pal1 gets no reply
    send(f"eve@{DOMAIN}", "again from pal1", frm="pal1@sink.test")
    wait_for(lambda: in_mailbox("eve", "again from pal1") == 1, timeout=60, what="kept")
    settle(f"eve@{DOMAIN}")
    assert_eq(replies_to("pal1@sink.test", "eve-away"), 1)


def one_reply_one_kept(user, frm, away, subj):
    wait_for(lambda: replies_to(frm, away) >= 1 and in_mailbox(user, subj) >= 1,
             timeout=60, what="the reply at the sink and the kept copy")
    settle(frm)
    settle(f"{user}@{DOMAIN}")
    assert_eq(replies_to(frm, away), 1, subj)
    assert_eq(in_mailbox(user, subj), 1, subj)


def test_vacation_reply_queue_fails_once():
    """The reply's queue commit fails once (a transient error, no kill): the recipient is
    451 after its delivery's commit (the mark says the reply is owed), and the runner's next
    try queues the reply alone. One reply, one kept copy."""
    make_user("ida")
    put("ida", 'require "vacation";\nvacation :days 3 :subject "ida-away" "ida is away";\n')
    frm, subj = "pal4@sink.test", "to ida, the reply's commit fails"
    mark, flag = failing_once("sieve-reply-queue", restart)
    send(f"ida@{DOMAIN}", subj, frm=frm)
    one_reply_one_kept("ida", frm, "ida-away", subj)
    assert not os.path.exists(flag)
    log = mtad.logtext()[mark:]
    assert_in("sieve vacation reply not queued", log)
    assert_in("its vacation reply owed", log)


def test_vacation_replay_fails_once():
    """Killed after the delivery's commit with the reply owed; the run after the restart
    cannot read the scripts (the store fails once): 451 and tried again, not the reply
    dropped (was: delivered, no reply ever). One reply, one kept copy."""
    frm, subj = "pal5@sink.test", "to ida, the replay fails"
    mark, flag = failing_once("sieve-replay", lambda: crash_at(
        "sieve-delivered-reply-owed", lambda: send(f"ida@{DOMAIN}", subj, frm=frm)))
    one_reply_one_kept("ida", frm, "ida-away", subj)
    assert not os.path.exists(flag)
    log = mtad.logtext()[mark:]
    assert_in("sieve scripts not run: the store could not say what they are, the vacation "
              "reply still owed (tried again)", log)


def test_scripts_not_run_once():
    """The first run cannot read the scripts (the store fails once): 451 and tried again
    (was: stored in INBOX as if there were no script, the redirect never sent). One copy
    at the sink, one kept copy."""
    make_user("jon")
    put("jon", 'require "copy";\nredirect :copy "jon-fwd@sink.test";\n')
    subj = "to jon, the scripts not read once"
    mark, flag = failing_once("sieve-run", restart)
    send(f"jon@{DOMAIN}", subj)
    wait_for(lambda: at_sink(subj, "jon-fwd@sink.test") >= 1 and in_mailbox("jon", subj) >= 1,
             timeout=60, what="the copy at the sink and the kept one")
    settle("jon-fwd@sink.test")
    settle(f"jon@{DOMAIN}")
    assert not os.path.exists(flag)
    assert_eq(at_sink(subj, "jon-fwd@sink.test"), 1)
    assert_eq(in_mailbox("jon", subj), 1)
    assert_in("sieve scripts not run: the store could not say", mtad.logtext()[mark:])


def test_duplicate_before_vacation_replay():
    """A script that tests duplicate before its vacation, killed after the delivery's commit
    (which remembered the message and the reply owed): the run after the restart answers
    the duplicate test as the delivering run did, not as the memory says now (was: "seen",
    the script stopped, the reply lost). One reply, one kept copy; a second copy of the
    same message is a duplicate: kept, not answered."""
    make_user("hana")
    put("hana", 'require ["duplicate", "vacation"];\nif duplicate { stop; }\n'
                'vacation :days 3 :subject "hana-away" "hana is away";\n')
    frm, subj = "pal6@sink.test", "to hana, duplicate then vacation"
    msgid = "<dup-then-vacation@example.org>"
    msg = (f"From: <{frm}>\r\nTo: <hana@{DOMAIN}>\r\nSubject: {subj}\r\n"
           f"Message-ID: {msgid}\r\n\r\nHello.\r\n")

    def once():
        with smtplib.SMTP(HOST, mtad.port, timeout=30) as c:
            assert_eq(c.sendmail(frm, [f"hana@{DOMAIN}"], msg), {})

    mark = crash_at("sieve-delivered-reply-owed", once)
    one_reply_one_kept("hana", frm, "hana-away", subj)
    assert_in("its vacation reply owed", mtad.logtext()[mark:])
    once()  # the same Message-ID again: a duplicate (and answered within :days anyway)
    wait_for(lambda: in_mailbox("hana", subj) == 2, timeout=60, what="the second copy kept")
    settle(f"hana@{DOMAIN}")
    assert_eq(replies_to(frm, "hana-away"), 1)


def in_folder(user, name):
    r = subprocess.run([PEEK, mtad.conf, "folder", user, name], capture_output=True,
                       text=True)
    return len(r.stdout.splitlines()) if r.returncode == 0 else 0


def test_subaddress_folder_redirect_refused_once():
    """user+tag@ with subaddress_folder and a folder tag, a script that redirects :copy, the
    copy's queue commit failing once: the recipient is the queue runner's (as without a
    detail), which keeps into the folder, so the failure is a 451 the runner retries before
    anything is stored (was: kept in the session, then 451 to the client for the copy, and
    the client's retry kept it again). One copy at the sink, one in the folder, none in
    INBOX."""
    make_user("kim")
    mailctl("mailbox", "create", "kim", "tag")
    put("kim", 'require "copy";\nredirect :copy "kim-fwd@sink.test";\n')
    subj = "to kim+tag, the copy refused once"
    mark, flag = failing_once("sieve-redirect-queue", restart)
    for _ in range(3):  # as a client does: again after a 4xx
        try:
            send(f"kim+tag@{DOMAIN}", subj)
            break
        except smtplib.SMTPResponseException as e:
            assert_eq(e.smtp_code // 100, 4, e)
    wait_for(lambda: at_sink(subj, "kim-fwd@sink.test") >= 1 and in_folder("kim", "tag") >= 1,
             timeout=60, what="the copy at the sink and the kept one in tag")
    settle("kim-fwd@sink.test")
    settle(f"kim+tag@{DOMAIN}")
    assert not os.path.exists(flag)
    assert_eq(at_sink(subj, "kim-fwd@sink.test"), 1)
    assert_eq(in_folder("kim", "tag"), 1)
    assert_eq(in_mailbox("kim", subj), 0)
    assert_in("sieve redirect or vacation: delivered by the queue runner",
              mtad.logtext()[mark:])


def subjects_of(user):
    """How many messages of each subject the user's INBOX holds."""
    found = collections.Counter()
    for m in store.inbox(user):
        hit = re.search(rb"\r\nSubject: ([^\r]*)\r\n", store.body(user, int(m[0])))
        if hit:
            found[hit.group(1).decode()] += 1
    return found


def test_kill9_storm():
    """kill -9s wherever they fall: eight rounds of four messages to bob (redirect :copy) and
    four to eve (vacation, each from its own sender), mtad killed -9 a moment after each
    round's last 250, while the runner delivers them. The copies and replies cannot leave
    meanwhile (the sink's route points at a closed port: no kill falls between the sink's
    250 and the queue's record of it); then the route is the sink's again. One copy, one
    reply and one kept copy each."""
    n = 32
    route = mtad.sections["mtad"]["transport_map"]
    mtad.sections["mtad"]["transport_map"] = f"sink.test=127.0.0.1:{free_port()}"
    mtad.stop()
    mtad.write_conf()
    mtad.start()
    mark = len(mtad.logtext())
    for r in range(8):
        for i in range(r * 4, r * 4 + 4):
            send(f"bob@{DOMAIN}", f"storm {i}")
            send(f"eve@{DOMAIN}", f"storm {i}", frm=f"storm{i}@sink.test")
        time.sleep(random.random() / 50)  # the runner busy with the last of them
        mtad.kill9()
        mtad.start()
    mtad.sections["mtad"]["transport_map"] = route
    mtad.stop()
    mtad.write_conf()
    mtad.start()
    for user in ("bob", "eve"):
        wait_for(lambda: sum(1 for k in subjects_of(user) if k.startswith("storm ")) >= n,
                 timeout=120, what=f"{user}'s kept copies")
    wait_for(lambda: all(at_sink(f"storm {i}", "far@sink.test") >= 1
                         and replies_to(f"storm{i}@sink.test", "eve-away") >= 1
                         for i in range(n)), timeout=120, what="every copy and reply")
    for addr in ("far@sink.test", "sink.test", f"bob@{DOMAIN}", f"eve@{DOMAIN}"):
        settle(addr)
    for user in ("bob", "eve"):
        got = subjects_of(user)
        assert_eq([got[f"storm {i}"] for i in range(n)], [1] * n, user)
    assert_eq([at_sink(f"storm {i}", "far@sink.test") for i in range(n)], [1] * n)
    assert_eq([replies_to(f"storm{i}@sink.test", "eve-away") for i in range(n)], [1] * n)
    log = mtad.logtext()[mark:]
    print(f"     after 8 kills: {log.count('not again')} copies or replies found queued, "
          f"{log.count('delivered before a restart')} deliveries found recorded")


def test_no_crash_one_of_each():
    """Without a kill: a redirect and a reply for one message, one each."""
    make_user("fred")
    put("fred", 'require ["copy", "vacation"];\nredirect :copy "fwd@sink.test";\n'
                'vacation :days 3 :subject "fred-away" "fred is away";\n')
    send(f"fred@{DOMAIN}", "plain to fred", frm="pal3@sink.test")
    wait_for(lambda: at_sink("plain to fred", "fwd@sink.test") == 1
             and replies_to("pal3@sink.test", "fred-away") == 1
             and in_mailbox("fred", "plain to fred") == 1, timeout=60, what="all three")
    settle(f"fred@{DOMAIN}")


def test_postmaster_full_address_vacation():
    """[mtad] postmaster a local user's full address (gina@), her script a vacation: mail to
    postmaster@ (the session's fallback: gina's scripts, the recipient still postmaster@) is
    left to the queue runner, which delivers it to gina too (was: postmaster@ looked up, no
    one, a 550 DSN for mail acknowledged with 250). One kept copy, one reply, no DSN."""
    make_user("gina")
    put("gina", 'require "vacation";\nvacation :days 3 :subject "gina-away" '
                f':addresses ["postmaster@{DOMAIN}"] "gina is away";\n')
    mtad.stop()
    mtad.sections["mtad"]["postmaster"] = f"gina@{DOMAIN}"
    mtad.write_conf()
    mtad.start()
    try:
        frm, subj = "pal9@sink.test", "to postmaster"
        send(f"postmaster@{DOMAIN}", subj, frm=frm)
        wait_for(lambda: in_mailbox("gina", subj) == 1
                 and replies_to(frm, "gina-away") == 1, timeout=60,
                 what="the kept copy in gina's INBOX and her reply")
        settle(f"postmaster@{DOMAIN}")
        settle(frm)
        assert_eq(in_mailbox("gina", subj), 1)
        assert_eq(replies_to(frm, "gina-away"), 1)
        assert_eq([m for m in sink_messages() if b"no such user" in m], [])
    finally:
        mtad.stop()
        del mtad.sections["mtad"]["postmaster"]
        mtad.write_conf()
        mtad.start()


def test_records_swept():
    """Every recipient is finished: a restart finds every record finished (dropped), and
    the next start none left."""
    mtad_records_swept(mtad)


def main():
    sink.start()
    mtad.start()
    return run_tests([
        test_redirect_copy_killed_after_the_copies, test_lmtp_redirect_killed_after_the_copies,
        test_redirect_killed_after_the_delivery,
        test_redirect_over_quota_once, test_vacation_reply_once_across_kills, test_kill9_storm,
        test_no_crash_one_of_each, test_postmaster_full_address_vacation,
        test_vacation_reply_queue_fails_once, test_vacation_replay_fails_once,
        test_scripts_not_run_once, test_duplicate_before_vacation_replay,
        test_subaddress_folder_redirect_refused_once, test_records_swept,
    ])


if __name__ == "__main__":
    sys.exit(run_main(main, TMP, [mtad, sink], tail=20000))
