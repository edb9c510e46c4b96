#!/usr/bin/env python3
"""test_maildrop.py — [mtad] maildrop end to end: heron-sendmail leaves a message in the
maildrop directory (mode 1733) when mtad is not running, and mtad submits it once: at start
(mtad stopped, a message dropped by root and one by the unprivileged user nobody, mtad
started: each arrives once, the directory is empty, the Received: header names the file
owner's uid, nobody could not list the directory), while running (a drop by a heron-sendmail
whose socket is dead: inotify picks it up), and refuses files it must not trust (a symbolic
link to another file, a hard link, a malformed file: renamed bad.*, nothing delivered; an
unfinished tmp.* file is left alone), and kill -9s in the middle of a pickup give every
message exactly once (also when the file outlives its 250: it is recorded, only removed).
A file mtad refuses with a 5xx becomes bad.* and its sender gets one delivery status
notification (the owner when MAIL refused the sender, nobody for the null sender), also
across kill -9s between its commit and the rename. A file accepted for some recipients and
refused for others: the message goes to those, and the sender gets one DSN naming the
refused ones, queued in the commit of the message and the file's record (one under kill -9s).

Every maildrop message goes through the queue, whose local deliveries are exactly once: a
user with a Sieve script and one without, kill -9s right after the queue runner's
deliveries, one copy each.

  test_maildrop.py SOURCE_ROOT MTAD STORE_PEEK HERON_SENDMAIL MAILCTL"""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Mtad, Store, assert_eq, assert_in,  # noqa: E402
                      mtad_records_swept, run_suite, wait_for, write_conf, write_users)

ROOT, MTAD, PEEK, SENDMAIL, MAILCTL = sys.argv[1:6]
TMP = tempfile.mkdtemp(prefix="heron-maildrop-")
SOCK = os.path.join(TMP, "submit.sock")
DROP = os.path.join(TMP, "maildrop")
os.mkdir(DROP)
os.chmod(DROP, 0o1733)
write_users(os.path.join(TMP, "users"), ["user1", "user2", "user3", "root", "nobody"])
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"local_submission": SOCK, "maildrop": DROP}, tls=False)
store = Store(PEEK, mtad.conf)
NOBODY = 65534


def sendmail(args, stdin, conf=None, **kw):
    return subprocess.run([SENDMAIL, "-C", conf or mtad.conf, *args], input=stdin.encode(),
                          capture_output=True, timeout=60, **kw)


def with_subject(user, subject):
    found = []
    for m in store.inbox(user):
        body = store.body(user, int(m[0]))
        if f"\r\nSubject: {subject}\r\n".encode() in body:
            found.append(body)
    return found


def files(prefix=""):
    return sorted(n for n in os.listdir(DROP) if n.startswith(prefix))


def test_dropped_while_down():
    mtad.stop()
    r = sendmail(["user1"], "Subject: while down\n\nkept for mtad\n")
    assert_eq(r.returncode, 0, r.stderr)
    assert_eq(r.stderr, b"")
    drops = files("drop.")
    assert_eq(len(drops), 1, files())
    assert_eq(files("tmp."), [])
    st = os.stat(os.path.join(DROP, drops[0]))
    assert_eq(oct(st.st_mode & 0o7777), oct(0o644))
    # an unprivileged user drops too, and cannot list the directory
    os.chmod(TMP, 0o755)
    try:
        r = sendmail(["user2"], "Subject: from nobody\n\nunprivileged\n", user="nobody",
                     group="nogroup", extra_groups=[])
        ls = subprocess.run(["ls", DROP], capture_output=True, user="nobody",
                            group="nogroup", extra_groups=[])
    finally:
        os.chmod(TMP, 0o700)
    assert_eq(r.returncode, 0, r.stderr)
    assert ls.returncode != 0 and b"Permission denied" in ls.stderr, ls
    assert_eq(len(files("drop.")), 2, files())
    mtad.start()
    wait_for(lambda: files() == [], what="the maildrop emptied")
    got = with_subject("user1", "while down")
    assert_eq(len(got), 1)
    assert_in(b"kept for mtad", got[0])
    assert_in(f"(local submission from uid {os.getuid()})".encode(), got[0])
    got = with_subject("user2", "from nobody")
    assert_eq(len(got), 1)
    assert_in(f"(local submission from uid {NOBODY})".encode(), got[0])
    assert_in(f"<nobody@{DOMAIN}>\r\n".encode(), got[0])  # the From: added for nobody
    log = mtad.logtext()
    assert_eq(log.count(" submitted: 250 "), 2, log[-3000:])


def test_dropped_while_running():
    """A heron-sendmail that cannot reach the socket (here: a config naming a dead one)
    drops; the running mtad takes the file at once (inotify)."""
    dead = write_conf(os.path.join(TMP, "dead.conf"), {"mtad": {
        "local_domains": DOMAIN, "local_submission": os.path.join(TMP, "none.sock"),
        "maildrop": DROP}})
    r = sendmail(["-t"], f"To: user1@{DOMAIN}, user2\nSubject: while running\n\nx\n",
                 conf=dead)
    assert_eq(r.returncode, 0, r.stderr)
    wait_for(lambda: len(with_subject("user1", "while running")) == 1
             and len(with_subject("user2", "while running")) == 1, what="the pickup")
    wait_for(lambda: files() == [], what="the file removed")
    assert_eq(len(with_subject("user1", "while running")), 1)


def test_untrusted_files():
    secret = os.path.join(TMP, "secret")
    with open(secret, "w") as f:
        f.write(f"HERON-MAILDROP 1\nS root@{DOMAIN}\nR user1@{DOMAIN}\n\n"
                "Subject: stolen\r\n\r\nnot yours\r\n")
    os.symlink(secret, os.path.join(DROP, "drop.symlink"))
    os.link(secret, os.path.join(DROP, "drop.hardlink"))
    with open(os.path.join(DROP, "drop.garbage"), "w") as f:
        f.write("HERON-MAILDROP 1\nX what\n\nSubject: garbage\r\n\r\nx\r\n")
    with open(os.path.join(DROP, "tmp.unfinished"), "w") as f:
        f.write("HERON-MAILDROP 1\nS root@heron.test\n")
    # a complete file renamed in wakes the pickup; the others are in its scan
    r = sendmail(["user2"], "Subject: after the bad ones\n\ny\n",
                 conf=write_conf(os.path.join(TMP, "dead2.conf"), {"mtad": {
                     "local_domains": DOMAIN,
                     "local_submission": os.path.join(TMP, "none.sock"), "maildrop": DROP}}))
    assert_eq(r.returncode, 0, r.stderr)
    wait_for(lambda: len(with_subject("user2", "after the bad ones")) == 1, what="the good one")
    wait_for(lambda: files("drop.") == [], what="the bad files moved")
    assert_eq(files("bad."), ["bad.garbage", "bad.hardlink", "bad.symlink"])
    assert_eq(files("tmp."), ["tmp.unfinished"])
    assert_eq(with_subject("user1", "stolen"), [])
    assert_eq(with_subject("user1", "garbage"), [])
    log = mtad.logtext()
    for why in ("a symbolic link", "a file with more than one link",
                "not a maildrop file of heron-sendmail"):
        assert_in(why, log)


def submitted_count():
    return mtad.logtext().count(" submitted: 250 ")


def test_kill9_exactly_once():
    """60 files dropped while mtad is down; mtad is killed with -9 as soon as it has
    submitted one more, and started again, eight times: every message arrives exactly once
    (a file whose 250 came is recorded in the commit behind the 250; a restart only removes
    it)."""
    mtad.stop()
    n = 60
    for i in range(n):
        r = sendmail(["user1"], f"Subject: crash {i}\n\nn\n")
        assert_eq(r.returncode, 0, r.stderr)
    left = []
    for _ in range(8):
        if not files("drop."):
            break
        before = submitted_count()
        mtad.start()
        end = time.time() + 30
        while submitted_count() == before and files("drop.") and time.time() < end:
            time.sleep(0.002)  # the kill as close to a 250 as the poll allows
        mtad.kill9()
        left.append(len(files("drop.")))
    mtad.start()
    wait_for(lambda: files("drop.") == [], what="the rest submitted")
    def counts():
        got = [re.search(rb"\r\nSubject: crash (\d+)\r\n", store.body("user1", int(m[0])))
               for m in store.inbox("user1")]
        return [sum(1 for g in got if g and int(g.group(1)) == i) for i in range(n)]
    wait_for(lambda: sum(counts()) >= n, what="every message")
    assert_eq(counts(), [1] * n)
    print(f"     kill -9 with {left} of {n} files left; one copy each")


def test_removal_lost_after_250():
    """The file cannot be removed after its 250 (immutable: the unlink fails, as when mtad is
    killed between the 250 and the unlink); mtad is killed and started again: the file is
    recorded, so it is only removed, never submitted again, and its record then dropped."""
    if subprocess.run(["chattr", "-V"], capture_output=True).returncode not in (0, 1):
        print("     (no chattr: skipped)")
        return
    mtad.stop()
    r = sendmail(["user2"], "Subject: removal lost\n\nonce\n")
    assert_eq(r.returncode, 0, r.stderr)
    path = os.path.join(DROP, files("drop.")[0])
    if subprocess.run(["chattr", "+i", path], capture_output=True).returncode != 0:
        print("     (no immutable files here: skipped)")
        return
    try:
        before = mtad.logtext().count(" submitted: 250 ")
        mtad.start()
        wait_for(lambda: mtad.logtext().count(" submitted: 250 ") > before, what="its 250")
        wait_for(lambda: "(a later scan removes it)" in mtad.logtext(), what="the failed unlink")
        mtad.kill9()
        again = mtad.logtext().count("submitted before (")
        mtad.start()
        wait_for(lambda: mtad.logtext().count("submitted before (") > again,
                 what="the file recognized")
    finally:
        subprocess.run(["chattr", "-i", path], check=True)
    wait_for(lambda: files("drop.") == [], timeout=40, what="the file removed")
    wait_for(lambda: with_subject("user2", "removal lost"), what="the delivery")
    assert_eq(len(with_subject("user2", "removal lost")), 1)
    assert_eq(mtad.logtext().count(" submitted: 250 "), before + 1)
    # its record went with the file: a restart finds no record to drop
    mtad.stop()
    mark = len(mtad.logtext())
    mtad.start()
    line = wait_for(lambda: re.search(r"maildrop: \S+: (\d+) records of submitted files, "
                                      r"(\d+) of files gone dropped", mtad.logtext()[mark:]),
                    what="the records' sweep")
    assert_eq(line.groups(), ("0", "0"))


def test_xuid_refused_to_others():
    """XUID and XREFUSED are the pickup's: a local client running as another uid gets 500."""
    os.chmod(TMP, 0o755)
    try:
        r = sendmail(["-bs"], f"EHLO me\r\nXUID 0\r\nMAIL FROM:<nobody@{DOMAIN}>\r\n"
                     f"RCPT TO:<user1@{DOMAIN}>\r\nXREFUSED a@{DOMAIN} 5.1.1 x\r\n"
                     "QUIT\r\n", user="nobody", group="nogroup", extra_groups=[])
    finally:
        os.chmod(TMP, 0o700)
    assert_eq(r.returncode, 0, r.stderr)
    assert_eq(r.stdout.count(b"\r\n500 5.5.2 Command unrecognized\r\n"), 2, r.stdout)


def dead_conf():
    return write_conf(os.path.join(TMP, "dead3.conf"), {"mtad": {
        "local_domains": DOMAIN, "local_submission": os.path.join(TMP, "none.sock"),
        "maildrop": DROP}})


def dsns(user, subject):
    """user's delivery status notifications that return the header Subject: subject."""
    return [b for b in with_subject(user, "Undelivered Mail Returned to Sender")
            if f"\r\nSubject: {subject}\r\n".encode() in b]


def test_refused_notified():
    """A dropped file whose every recipient mtad refuses (550 5.1.1) becomes bad.* and its
    envelope sender gets a DSN (RFC 3464) returning the headers only, once."""
    bad_before = files("bad.")
    r = sendmail(["-f", f"user1@{DOMAIN}", "nosuch"],
                 "Subject: refused one\n\nsecret body line\n", conf=dead_conf())
    assert_eq(r.returncode, 0, r.stderr)
    wait_for(lambda: dsns("user1", "refused one"), what="the DSN")
    wait_for(lambda: files("drop.") == [], what="the file moved")
    assert_eq(len(files("bad.")), len(bad_before) + 1, files())
    got = dsns("user1", "refused one")
    assert_eq(len(got), 1)
    dsn = got[0]
    for want in (b"From: Mail Delivery System <MAILER-DAEMON@",
                 b"Content-Type: multipart/report; report-type=delivery-status;",
                 b"Content-Type: message/delivery-status\r\n",
                 f"Final-Recipient: rfc822; nosuch@{DOMAIN}\r\n".encode(),
                 b"Action: failed\r\n", b"Status: 5.1.1\r\n",
                 b"Content-Type: text/rfc822-headers\r\n"):
        assert_in(want, dsn)
    assert b"secret body line" not in dsn, dsn
    assert_in(" refused: delivery status notification ", mtad.logtext())


def test_refused_sender_tells_owner():
    """MAIL refuses the file's sender: the DSN goes to the file's owner (root here) at the
    first local domain."""
    with open(os.path.join(DROP, "tmp.badsender"), "w") as f:
        f.write(f"HERON-MAILDROP 1\nS bad sender@{DOMAIN}\nR user1@{DOMAIN}\n\n"
                "Subject: sender refused\r\n\r\nx\r\n")
    os.rename(os.path.join(DROP, "tmp.badsender"), os.path.join(DROP, "drop.badsender"))
    wait_for(lambda: dsns("root", "sender refused"), what="the owner's DSN")
    wait_for(lambda: "bad.badsender" in files("bad."), what="the file moved")
    assert_eq(len(dsns("root", "sender refused")), 1)
    assert_eq(with_subject("user1", "sender refused"), [])


def test_refused_null_sender():
    """The null sender's refused file is moved, nobody is notified."""
    r = sendmail(["-f", "<>", "nosuch"], "Subject: refused null\n\nz\n", conf=dead_conf())
    assert_eq(r.returncode, 0, r.stderr)
    wait_for(lambda: "(the null sender: nobody notified)" in mtad.logtext(),
             what="the refusal")
    wait_for(lambda: files("drop.") == [], what="the file moved")


def test_refused_rename_lost():
    """The refused file cannot be renamed after its DSN's commit (immutable, as when mtad is
    killed between the commit and the rename); mtad is killed and started again: the file
    is recorded, so it is only renamed, its sender never notified twice."""
    if subprocess.run(["chattr", "-V"], capture_output=True).returncode not in (0, 1):
        print("     (no chattr: skipped)")
        return
    mtad.stop()
    r = sendmail(["-f", f"user2@{DOMAIN}", "nosuch"], "Subject: rename lost\n\nonce\n")
    assert_eq(r.returncode, 0, r.stderr)
    path = os.path.join(DROP, files("drop.")[0])
    if subprocess.run(["chattr", "+i", path], capture_output=True).returncode != 0:
        print("     (no immutable files here: skipped)")
        return
    try:
        mtad.start()
        wait_for(lambda: f"maildrop: renaming {path}" in mtad.logtext(),
                 what="the failed rename")
        mtad.kill9()
        again = mtad.logtext().count("refused before (")
        mtad.start()
        wait_for(lambda: mtad.logtext().count("refused before (") > again,
                 what="the file recognized")
    finally:
        subprocess.run(["chattr", "-i", path], check=True)
    wait_for(lambda: files("drop.") == [], timeout=40, what="the file moved")
    wait_for(lambda: dsns("user2", "rename lost"), what="the DSN")
    assert_eq(len(dsns("user2", "rename lost")), 1)
    # its record went with the file: a restart finds no record to drop
    mtad.stop()
    mark = len(mtad.logtext())
    mtad.start()
    line = wait_for(lambda: re.search(r"maildrop: \S+: (\d+) records of submitted files, "
                                      r"(\d+) of files gone dropped", mtad.logtext()[mark:]),
                    what="the records' sweep")
    assert_eq(line.groups(), ("0", "0"))


def test_refused_kill9_one_dsn():
    """20 files refused while mtad is killed with -9 as soon as it has queued one more DSN,
    six times: each sender has exactly one DSN in the queue (the senders are remote, their
    DSNs wait there: the DNS answers nothing), every file became bad.*."""
    mtad.stop()
    n = 20
    bad_before = len(files("bad."))
    for i in range(n):
        r = sendmail(["-f", f"crash{i}@elsewhere.test", "nosuch"],
                     f"Subject: refused crash {i}\n\nn\n")
        assert_eq(r.returncode, 0, r.stderr)
    left = []
    for _ in range(6):
        if not files("drop."):
            break
        before = mtad.logtext().count(" refused: delivery status notification ")
        mtad.start()
        end = time.time() + 30
        while (mtad.logtext().count(" refused: delivery status notification ") == before
               and files("drop.") and time.time() < end):
            time.sleep(0.002)
        mtad.kill9()
        left.append(len(files("drop.")))
    mtad.start()
    wait_for(lambda: files("drop.") == [], what="the rest refused")
    assert_eq(len(files("bad.")), bad_before + n)

    def counts():
        to = [re.search(r" crash(\d+)@elsewhere\.test:", e) for e in store.queue()]
        return [sum(1 for t in to if t and int(t.group(1)) == i) for i in range(n)]
    assert_eq(counts(), [1] * n)
    print(f"     kill -9 with {left} of {n} files left; one DSN each")


def test_partly_refused_notified():
    """A dropped file accepted for one recipient and refused (550 5.1.1) for another: the
    message arrives, the file goes, and its envelope sender gets one DSN naming only the
    refused recipient."""
    r = sendmail(["-f", f"user1@{DOMAIN}", "user2", "nosuch"],
                 "Subject: partly refused\n\nsecret part\n", conf=dead_conf())
    assert_eq(r.returncode, 0, r.stderr)
    wait_for(lambda: with_subject("user2", "partly refused"), what="the message")
    wait_for(lambda: dsns("user1", "partly refused"), what="the DSN")
    wait_for(lambda: files("drop.") == [], what="the file gone")
    assert_eq(len(with_subject("user2", "partly refused")), 1)
    got = dsns("user1", "partly refused")
    assert_eq(len(got), 1)
    dsn = got[0]
    for want in (b"Content-Type: message/delivery-status\r\n",
                 f"Final-Recipient: rfc822; nosuch@{DOMAIN}\r\n".encode(),
                 b"Action: failed\r\n", b"Status: 5.1.1\r\n",
                 b"Content-Type: text/rfc822-headers\r\n"):
        assert_in(want, dsn)
    assert f"Final-Recipient: rfc822; user2@{DOMAIN}".encode() not in dsn, dsn
    assert b"secret part" not in dsn, dsn
    assert_in(" refused recipients: delivery status notification ", mtad.logtext())


def test_partly_refused_kill9_one_dsn():
    """20 files each accepted for user3 and refused for another recipient, mtad killed with
    -9 as soon as it has queued one more such DSN, six times: every message arrives once and
    each sender has exactly one DSN in the queue (remote senders: their DSNs wait there)."""
    mtad.stop()
    n = 20
    for i in range(n):
        r = sendmail(["-f", f"pcrash{i}@elsewhere.test", "user3", "nosuch"],
                     f"Subject: pcrash {i}\n\nn\n")
        assert_eq(r.returncode, 0, r.stderr)
    mark = " refused recipients: delivery status notification "
    left = []
    for _ in range(6):
        if not files("drop."):
            break
        before = mtad.logtext().count(mark)
        mtad.start()
        end = time.time() + 30
        while mtad.logtext().count(mark) == before and files("drop.") and time.time() < end:
            time.sleep(0.002)
        mtad.kill9()
        left.append(len(files("drop.")))
    mtad.start()
    wait_for(lambda: files("drop.") == [], what="the rest submitted")
    wait_for(lambda: sum(crash_counts("user3", "pcrash", n)) >= n, what="every message")
    wait_for(lambda: not [e for e in store.queue() if "user3@" in e],
             what="the deliveries done")
    assert_eq(crash_counts("user3", "pcrash", n), [1] * n)

    def counts():
        to = [re.search(r" pcrash(\d+)@elsewhere\.test:", e) for e in store.queue()]
        return [sum(1 for t in to if t and int(t.group(1)) == i) for i in range(n)]
    assert_eq(counts(), [1] * n)
    print(f"     kill -9 with {left} of {n} files left; one DSN each")


def crash_counts(user, tag, n):
    got = [re.search(rb"\r\nSubject: " + tag.encode() + rb" (\d+)\r\n",
                     store.body(user, int(m[0]))) for m in store.inbox(user)]
    return [sum(1 for g in got if g and int(g.group(1)) == i) for i in range(n)]


def test_kill9_queue_deliveries_once():
    """30 files to user3 (a Sieve script takes its delivery over: a flag, then keep) and
    user2; mtad is killed with -9 right after each of eight queue runner deliveries (the
    window between the delivery's commit and the queue's record of it) and started again:
    one copy each (the delivery's commit records the queue entry and recipient; a restart
    finds that record and does not deliver again)."""
    r = sendmail(["user3"], "Subject: user3 made\n\nx\n", conf=dead_conf())
    assert_eq(r.returncode, 0, r.stderr)
    wait_for(lambda: with_subject("user3", "user3 made"), what="user3's first message")
    script = os.path.join(TMP, "user3.sieve")
    with open(script, "w") as f:
        f.write('require "imap4flags";\naddflag "\\\\Flagged";\nkeep;\n')
    r = subprocess.run([MAILCTL, "-c", mtad.conf, "sieve", "put", "user3", "main", script,
                        "--activate"], capture_output=True, text=True)
    assert_eq(r.returncode, 0, r.stderr)
    mtad.stop()
    n = 30
    for i in range(n):
        r = sendmail(["user3", "user2"], f"Subject: qcrash {i}\n\nn\n")
        assert_eq(r.returncode, 0, r.stderr)
    sent = "status=sent (250 2.0.0 delivered"
    for _ in range(8):
        before = mtad.logtext().count(sent)
        mtad.start()
        end = time.time() + 30
        while mtad.logtext().count(sent) == before and time.time() < end:
            time.sleep(0.002)  # the kill as close to a delivery as the poll allows
        mtad.kill9()
    mtad.start()
    wait_for(lambda: files("drop.") == [], what="the files submitted")
    wait_for(lambda: sum(crash_counts("user3", "qcrash", n)) >= n
             and sum(crash_counts("user2", "qcrash", n)) >= n, what="every delivery")
    wait_for(lambda: not [e for e in store.queue() if "user3@" in e or "user2@" in e],
             what="the queue emptied")
    assert_eq(crash_counts("user3", "qcrash", n), [1] * n)
    assert_eq(crash_counts("user2", "qcrash", n), [1] * n)
    assert_in("delivered by sieve", mtad.logtext())
    print(f"     {mtad.logtext().count('delivered before a restart')} deliveries found "
          "recorded after a kill -9")
    # the records of deliveries the queue has recorded go (those a kill left, at the next
    # start): a start then finds every record finished, and a later one none left
    mtad_records_swept(mtad)


if __name__ == "__main__":
    if os.getuid() != 0:
        print("skip: needs root (runs heron-sendmail as the user nobody)")
        sys.exit(77)
    sys.exit(run_suite(mtad, [
        test_dropped_while_down, test_dropped_while_running, test_untrusted_files,
        test_kill9_exactly_once, test_removal_lost_after_250, test_xuid_refused_to_others,
        test_refused_notified, test_refused_sender_tells_owner, test_refused_null_sender,
        test_refused_rename_lost, test_refused_kill9_one_dsn, test_partly_refused_notified,
        test_partly_refused_kill9_one_dsn, test_kill9_queue_deliveries_once,
    ], TMP))
