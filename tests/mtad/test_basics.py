#!/usr/bin/env python3
"""test_basics.py — the mail basics of mtad, end to end with smtplib and a users-file
directory: postmaster@ every local domain (and the bare <postmaster>) always accepted and
delivered to [mtad] postmaster's mailbox; subaddresses (user+tag@) to the user's INBOX, to
folder tag with subaddress_folder = yes, and seen by Sieve's :detail; the aliases map (lists,
nested aliases, external targets through the relay queue, loops refused, duplicates delivered
once, continuation lines and comments, reload on SIGHUP and on change, a bad file keeping the
old map); and the log's trace of a message (session id and queue id on one line, the
Message-ID, one line per recipient).

  test_basics.py SOURCE_ROOT MTAD STORE_PEEK MAILCTL"""
import os
import re
import signal
import socket
import smtplib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Mtad, RelayTarget, Store, assert_eq, assert_in,  # noqa: E402
                      assert_re, run_suite, wait_for, write_users)

ROOT, MTAD, PEEK, MAILCTL = sys.argv[1:5]
TMP = tempfile.mkdtemp(prefix="heron-mtad-basics-")
WORKERS = 2
USERS = ["user1", "user2", "user3", "user4"]
ALIASES = os.path.join(TMP, "aliases")
relay = RelayTarget()
write_users(os.path.join(TMP, "users"), USERS)
with open(ALIASES, "w") as f:
    f.write(f"""# the team list: two users and a partner outside
team: user1, user2@{DOMAIN},
      partner@remote.test
# nested, and duplicates: user1 once
all: team, user1, User1@{DOMAIN}, user3
self: user3, self
loopa: loopb
loopb: loopc
loopc: loopa
dead: nobody@{DOMAIN}
sales@{DOMAIN}: user2
""")
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"workers": str(WORKERS), "aliases": ALIASES, "trusted_networks": "127.0.0.0/8",
             "local_domains": f"{DOMAIN},other.test",
             "transport_map": f"remote.test=127.0.0.1:{relay.port}",
             "local_submission": os.path.join(TMP, "submit.sock")}, tls=False)
store = Store(PEEK, mtad.conf)


def mailctl(*args, check=True):
    return subprocess.run([MAILCTL, "-c", mtad.conf, *args], capture_output=True, text=True,
                          check=check)


def folder_count(user, mailbox):
    r = mailctl("message", "list", user, mailbox, check=False)
    return len([ln for ln in r.stdout.splitlines() if re.match(r"\s*\d+\s", ln)])


def rcpt(addr):
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=15) as c:
        c.ehlo("client.test")
        c.mail("sender@example.org")
        return c.rcpt(addr)


def send(rcpts, subject, mid=None, sender="sender@example.org"):
    """One message to rcpts; the final reply."""
    mid = mid or f"<{subject}@client.test>"
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=15) as c:
        c.ehlo("client.test")
        c.mail(sender)
        for r in rcpts:
            code, text = c.rcpt(r)
            assert code == 250, (r, code, text)
        return c.data(f"From: <sender@example.org>\r\nSubject: {subject}\r\n"
                      f"Message-ID: {mid}\r\n\r\nbody of {subject}\r\n")


def count(user):
    return len(store.inbox(user))


def reload(**keys):
    before = len(mtad.logtext())
    mtad.sections["mtad"].update(keys)
    mtad.write_conf()
    mtad.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: mtad.logtext()[before:].count("config reloaded") >= WORKERS,
             what="every worker reloaded")


def test_postmaster_always_accepted():
    for addr in (f"postmaster@{DOMAIN}", f"PostMaster@{DOMAIN}", "postmaster@other.test",
                 "Postmaster"):
        code, text = rcpt(addr)
        assert_eq(code, 250, (addr, text))
    code, _ = rcpt(f"nobody@{DOMAIN}")
    assert_eq(code, 550)
    n = count("postmaster")
    code, _ = send([f"postmaster@{DOMAIN}", "postmaster"], "pm1")
    assert_eq(code, 250)
    wait_for(lambda: count("postmaster") == n + 1, what="one copy in postmaster's mailbox")


def test_postmaster_configured():
    reload(postmaster="user3")
    n = count("user3")
    code, _ = send(["postmaster@other.test"], "pm2")
    assert_eq(code, 250)
    assert_eq(count("user3"), n + 1)
    # an external address: through the queue, to that address
    reload(postmaster="hostmaster@remote.test")
    assert_eq(send([f"postmaster@{DOMAIN}"], "pm3")[0], 250)
    wait_for(lambda: relay.with_subject("pm3"), what="postmaster's mail relayed")
    assert_eq(relay.with_subject("pm3")[0][1], ["hostmaster@remote.test"])
    reload(postmaster="postmaster")


def test_subaddress_inbox():
    n = count("user1")
    code, text = rcpt(f"user1+news@{DOMAIN}")
    assert_eq(code, 250, text)
    assert_eq(send([f"user1+news@{DOMAIN}"], "sub1")[0], 250)
    assert_eq(count("user1"), n + 1)
    # the directory's alias addresses (users file: alias.user1@) take details too
    assert_eq(send([f"alias.user1+x@{DOMAIN}"], "sub1b")[0], 250)
    assert_eq(count("user1"), n + 2)
    # no subaddressing: user1+news is nobody
    reload(recipient_delimiter="")
    assert_eq(rcpt(f"user1+news@{DOMAIN}")[0], 550)
    reload(recipient_delimiter="+")


def test_subaddress_folder():
    assert_eq(send([f"user2@{DOMAIN}"], "sub0")[0], 250)  # the store account is made
    mailctl("mailbox", "create", "user2", "lists")
    reload(subaddress_folder="yes")
    n, f = count("user2"), folder_count("user2", "lists")
    assert_eq(send([f"user2+lists@{DOMAIN}"], "sub2")[0], 250)
    assert_eq(folder_count("user2", "lists"), f + 1)
    assert_eq(count("user2"), n)
    # no such folder: INBOX
    assert_eq(send([f"user2+nofolder@{DOMAIN}"], "sub3")[0], 250)
    assert_eq(count("user2"), n + 1)
    reload(subaddress_folder="no")
    assert_eq(send([f"user2+lists@{DOMAIN}"], "sub4")[0], 250)
    assert_eq(count("user2"), n + 2)


def test_sieve_sees_detail():
    script = os.path.join(TMP, "detail.sieve")
    with open(script, "w") as f:
        f.write('require ["envelope", "subaddress", "fileinto"];\n'
                'if envelope :detail "to" "work" { fileinto "Work"; }\n')
    mailctl("mailbox", "create", "user3", "Work")
    mailctl("sieve", "put", "user3", "detail", script, "--activate")
    n, w = count("user3"), folder_count("user3", "Work")
    assert_eq(send([f"user3+work@{DOMAIN}"], "sv1")[0], 250)
    assert_eq(folder_count("user3", "Work"), w + 1)
    assert_eq(send([f"user3+play@{DOMAIN}"], "sv2")[0], 250)
    assert_eq(count("user3"), n + 1)
    mailctl("sieve", "deactivate", "user3")


def test_sieve_keep_into_subaddress_folder():
    """A script that files nothing keeps the message where delivery without one would: with
    subaddress_folder, user+lists@ into the folder lists (implicit and explicit keep)."""
    script = os.path.join(TMP, "keep.sieve")
    with open(script, "w") as f:
        f.write('require ["fileinto"];\n'
                'if header :contains "subject" "to-work" { fileinto "Work"; }\n'
                'elsif header :contains "subject" "explicit" { keep; }\n')
    assert_eq(send([f"user4@{DOMAIN}"], "kp0")[0], 250)  # the store account is made
    mailctl("mailbox", "create", "user4", "lists")
    mailctl("mailbox", "create", "user4", "Work")
    mailctl("sieve", "put", "user4", "keep", script, "--activate")
    reload(subaddress_folder="yes")
    try:
        n, f, w = count("user4"), folder_count("user4", "lists"), folder_count("user4", "Work")
        assert_eq(send([f"user4+lists@{DOMAIN}"], "kp1 implicit")[0], 250)
        assert_eq(send([f"user4+lists@{DOMAIN}"], "kp2 explicit")[0], 250)
        assert_eq(folder_count("user4", "lists"), f + 2)
        # fileinto wins over the subaddress; a folder that does not exist: INBOX
        assert_eq(send([f"user4+lists@{DOMAIN}"], "kp3 to-work")[0], 250)
        assert_eq(folder_count("user4", "Work"), w + 1)
        assert_eq(send([f"user4+nofolder@{DOMAIN}"], "kp4")[0], 250)
        assert_eq((count("user4"), folder_count("user4", "lists")), (n + 1, f + 2))
    finally:
        reload(subaddress_folder="no")
        mailctl("sieve", "deactivate", "user4")


def test_alias_list_with_external():
    n1, n2 = count("user1"), count("user2")
    assert_eq(send([f"team@{DOMAIN}"], "al1")[0], 250)
    assert_eq((count("user1"), count("user2")), (n1 + 1, n2 + 1))
    wait_for(lambda: relay.with_subject("al1"), what="the external target relayed")
    (frm, rcpts, _), = relay.with_subject("al1")
    assert_eq(rcpts, ["partner@remote.test"])
    log = mtad.logtext()
    assert_re(log, r"to=<partner@remote\.test>, orig_to=<team@heron\.test>, relay=queue")


def test_alias_nested_and_duplicates():
    n1, n2, n3 = count("user1"), count("user2"), count("user3")
    # user1 through team, directly and in another case; user1 as a RCPT of its own too
    assert_eq(send([f"all@{DOMAIN}", f"user1@{DOMAIN}"], "al2")[0], 250)
    assert_eq((count("user1"), count("user2"), count("user3")), (n1 + 1, n2 + 1, n3 + 1))
    wait_for(lambda: relay.with_subject("al2"), what="the external target relayed")
    assert_eq(len(relay.with_subject("al2")), 1)


def test_alias_self_and_full_address():
    n3, n2 = count("user3"), count("user2")
    assert_eq(rcpt(f"self@{DOMAIN}")[0], 250)       # self@ is no user: user3 gets it
    assert_eq(send([f"self@{DOMAIN}"], "al3")[0], 250)
    assert_eq(count("user3"), n3 + 1)
    assert_eq(send([f"sales@{DOMAIN}"], "al4")[0], 250)
    assert_eq(count("user2"), n2 + 1)
    assert_eq(rcpt("sales@other.test")[0], 550)     # a full-address name is only that one


def test_alias_refusals():
    code, text = rcpt(f"loopa@{DOMAIN}")
    assert_eq(code, 550)
    assert_in(b"5.4.6", text)
    assert_in(b"loop", text)
    code, text = rcpt(f"dead@{DOMAIN}")
    assert_eq(code, 550)
    assert_in(b"5.1.1", text)


def write_aliases(text):
    """Replaces the file whole (written aside, renamed), as an admin's tool should: a worker
    that looks in the middle of a rewrite in place could read half of it."""
    with open(ALIASES + ".new", "w") as f:
        f.write(text)
    os.rename(ALIASES + ".new", ALIASES)


def test_alias_reload():
    assert_eq(rcpt(f"newname@{DOMAIN}")[0], 550)
    write_aliases(open(ALIASES).read() + "newname: user1\n")
    # read again when it changes (checked at most once a second)
    wait_for(lambda: all(rcpt(f"newname@{DOMAIN}")[0] == 250 for _ in range(4 * WORKERS)),
             what="the changed file read by every worker")
    reload()  # every worker has it now (the sessions above may all have met one worker)
    good = open(ALIASES).read()
    write_aliases(good + "broken line without colon\n")
    before = len(mtad.logtext())
    reload()
    assert_re(mtad.logtext()[before:], r"aliases:\d+: expected name: target")
    assert_eq(rcpt(f"newname@{DOMAIN}")[0], 250)   # the old map stays
    write_aliases(good)


def test_trace():
    before = len(mtad.logtext())
    code, text = send([f"user1@{DOMAIN}", f"team@{DOMAIN}"], "tr1", mid="<trace-1@client.test>")
    assert_eq(code, 250)
    qid = re.search(rb"queued as ([0-9a-f]{16})", text).group(1).decode()
    log = mtad.logtext()[before:]
    # the session's line names the queue id and the Message-ID
    assert_re(log, rf"[0-9a-f]{{16}} smtp data qid={qid} .*message-id=<trace-1@client\.test>")
    for to in ("user1", "user2"):
        assert_re(log, rf"{qid}: from=<sender@example\.org>, to=<{to}@heron\.test>.* status=sent")
    # the queue entry's id is linked to the session's and the message's on one line
    m = re.search(rf"([0-9a-f]{{16}}) smtp queue qid={qid} queue_id=([0-9a-f]{{16}})", log)
    assert m, log
    wait_for(lambda: re.search(rf"{m.group(2)}: to=<partner@remote\.test>.*status=sent",
                               mtad.logtext()), what="the relay line of the queue entry")


def test_trace_bounces():
    """Every bounced recipient has its own status=bounced line under the queue id."""
    # the sender at the relay target: the bounce goes there, nothing waits at the end
    code, text = send(["reject1@remote.test", "reject2@remote.test"], "tr2",
                      sender="owner@remote.test")
    assert_eq(code, 250)
    qid = re.search(rb"queued as ([0-9a-f]{16})", text).group(1).decode()
    log = mtad.logtext()
    queue_id = re.search(rf"smtp queue qid={qid} queue_id=([0-9a-f]{{16}})", log).group(1)
    for r in ("reject1", "reject2"):
        # the line carries the server's reply as it came, code first
        wait_for(lambda: re.search(rf"{queue_id}: to=<{r}@remote\.test>,.*dsn=5\.1\.1, "
                                   r"status=bounced \(550 5\.1\.1 no such user here\)",
                                   mtad.logtext()), what=f"{r}'s bounced line")
    wait_for(lambda: any(m[1] == ["owner@remote.test"] for m in relay.messages),
             what="the bounce delivered to the sender")


def local_smtp():
    """smtplib over the local submission socket."""
    c = smtplib.SMTP(timeout=15)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(15)
    sock.connect(os.path.join(TMP, "submit.sock"))
    c.sock = sock
    c.file = None
    code, _ = c.getreply()
    assert_eq(code, 220)
    return c


def test_local_submission():
    """The unix socket: no AUTH, may relay, the uid in the log and the Received: header."""
    st = os.stat(os.path.join(TMP, "submit.sock"))
    assert_eq(st.st_mode & 0o777, 0o666)
    c = local_smtp()
    c.ehlo("localhost")
    assert_eq(c.mail("cron@heron.test")[0], 250)
    assert_eq(c.rcpt("ops@remote.test")[0], 250)
    assert_eq(c.rcpt(f"user1@{DOMAIN}")[0], 250)
    code, _ = c.data("Subject: ls1\r\n\r\nfrom cron\r\n")
    assert_eq(code, 250)
    c.quit()
    wait_for(lambda: relay.with_subject("ls1"), what="relayed from the local socket")
    data = relay.with_subject("ls1")[0][2]
    assert_in(f"(local submission from uid {os.getuid()})".encode(), data)
    assert_re(mtad.logtext(), rf"smtp connect addr=\S+ listener=local uid={os.getuid()}")


if __name__ == "__main__":
    sys.exit(run_suite(mtad, [
        test_postmaster_always_accepted, test_postmaster_configured, test_subaddress_inbox,
        test_subaddress_folder, test_sieve_sees_detail, test_sieve_keep_into_subaddress_folder,
        test_alias_list_with_external,
        test_alias_nested_and_duplicates, test_alias_self_and_full_address,
        test_alias_refusals, test_alias_reload, test_trace, test_trace_bounces,
        test_local_submission,
    ], TMP, cleanup=[relay.close]))
