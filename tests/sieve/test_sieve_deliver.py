#!/usr/bin/env python3
"""test_sieve_deliver.py — Sieve at local delivery, end to end: scripts stored with
`mailctl sieve put`, mail sent with smtplib (SMTP and LMTP) to the real mtad, folders and
flags read back with imaplib from the real imapd on the same store, redirects arriving at
the real sink; vacation answered once per :days, never to lists or auto-replies; reject as
the 550 (SMTP, LMTP); a vacation loop between two local users ends; the admin's before and
after scripts around the user's (in that order, after not run once a script stops); the
envelope sender of a redirected copy (RFC 5228 4.2: the original one, its SRS form off-site,
<> stays <>) and a redirect loop between two local users ending with the message kept;
editheader applied on the queue runner's delivery as on the SMTP path (RFC 5293);
vacation never answering daemon, list-owner/-request or Precedence bulk/list/junk mail.

  test_sieve_deliver.py SOURCE_ROOT MTAD IMAPD MAILCTL SINK"""
import base64
import hashlib
import hmac
import imaplib
import os
import re
import shutil
import smtplib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, HOST, Daemon, Sink, SmtpRaw, free_port, run_main,  # noqa
                      run_tests, shared_conf, wait_for)

ROOT, MTAD, IMAPD, MAILCTL, SINK = sys.argv[1:6]
TMP = tempfile.mkdtemp(prefix="heron-sieve-")
USERS = ["alice", "bob", "carol", "dave", "erin", "fay", "gus", "hal", "ivy", "jay", "kim"]
sink = Sink(SINK, TMP, {"keep": os.path.join(TMP, "sinkmail"), "records": "all"})
BEFORE = os.path.join(TMP, "before.sieve")
with open(BEFORE, "w") as f:
    f.write('require ["fileinto", "mailbox", "editheader"];\n'
            'if header :contains "X-Spam-Flag" "YES" { fileinto :create "Junk"; stop; }\n'
            'if header :contains "subject" "chain" { addheader :last "X-Chain" "before"; }\n')
AFTER = os.path.join(TMP, "after.sieve")
with open(AFTER, "w") as f:
    f.write('require ["fileinto", "mailbox", "editheader", "spamtest", "relational",\n'
            '         "comparator-i;ascii-numeric"];\n'
            'if header :contains "subject" "chain" { addheader :last "X-Chain" "after"; }\n'
            'if spamtest :value "ge" :comparator "i;ascii-numeric" "5" '
            '{ fileinto :create "Junk"; }\n')
SRS_SECRET = "sieve-test-srs-secret"
with open(os.path.join(TMP, "srs.secret"), "w") as f:
    f.write(SRS_SECRET + "\n")
lmtp_port = free_port()
CONF, SMTP_PORT, IMAP_PORT = shared_conf(TMP, USERS, keys={
    "mtad": {"transport_map": f"sink.test=127.0.0.1:{sink.port}", "retry_schedule": "1s",
             "lmtp": f"{HOST}:{lmtp_port}",
             # the test sends as local users on port 25 (boss, bob): an internal hub
             "trusted_networks": "127.0.0.1",
             "srs_secret_file": os.path.join(TMP, "srs.secret")},
    "sieve": {"before": BEFORE, "after": AFTER, "vacation_min_days": "0"},
})
mtad = Daemon(MTAD, CONF, os.path.join(TMP, "mtad.log"), SMTP_PORT)
imapd = Daemon(IMAPD, CONF, os.path.join(TMP, "imapd.log"), IMAP_PORT)


def mailctl(*args, input=None, ok=True):
    r = subprocess.run([MAILCTL, "-c", CONF, *args], capture_output=True, text=True,
                       input=input)
    if ok:
        assert r.returncode == 0, (args, r.returncode, r.stdout, r.stderr)
    return r


def put(user, script, name="main"):
    path = os.path.join(TMP, f"{user}-{name}.sieve")
    with open(path, "w") as f:
        f.write(script)
    mailctl("sieve", "put", user, name, path, "--activate")


def send(to, subject, frm="sender@example.org", extra="", body="Hello.\r\n", port=None):
    msg = (f"From: <{frm}>\r\nTo: <{to}>\r\nSubject: {subject}\r\n"
           f"Message-ID: <{subject.replace(' ', '.')}.{time.time()}@test>\r\n{extra}\r\n{body}")
    with smtplib.SMTP(HOST, port or SMTP_PORT, timeout=30) as c:
        return c.sendmail(frm, [to], msg)


def imap(user):
    c = imaplib.IMAP4(HOST, IMAP_PORT, timeout=20)
    c.login(user, user)
    return c


def subjects(user, mailbox="INBOX"):
    c = imap(user)
    typ, data = c.select(f'"{mailbox}"', readonly=True)
    if typ != "OK":
        c.logout()
        return None
    if int(data[0]) == 0:
        c.logout()
        return {}
    typ, data = c.fetch("1:*", "(FLAGS BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
    out = {}
    for item in data:
        if isinstance(item, tuple):
            subj = item[1].decode().strip().replace("Subject: ", "")
            out[subj] = item[0].decode()
    c.logout()
    return out


def test_fileinto_flags_and_keywords():
    put("alice", 'require ["fileinto", "imap4flags", "mailbox"];\n'
                 'if header :contains "subject" "report" {\n'
                 '  fileinto :create :flags ["\\\\Flagged", "$Work"] "Reports/2026";\n'
                 '} elsif address :is "from" "boss@heron.test" { addflag "\\\\Seen"; }\n')
    send("alice@heron.test", "weekly report")
    send("alice@heron.test", "hi from boss", frm="boss@heron.test")
    send("alice@heron.test", "plain")
    wait_for(lambda: subjects("alice", "Reports/2026"), what="Reports/2026 has mail")
    rep = subjects("alice", "Reports/2026")
    assert "weekly report" in rep, rep
    assert "\\Flagged" in rep["weekly report"] and "$Work" in rep["weekly report"], rep
    inbox = subjects("alice")
    assert "weekly report" not in inbox, inbox
    assert "\\Seen" in inbox["hi from boss"], inbox
    assert "plain" in inbox and "\\Seen" not in inbox["plain"], inbox


def test_admin_before_script():
    send("alice@heron.test", "spammy", extra="X-Spam-Flag: YES\r\n")
    wait_for(lambda: "spammy" in (subjects("alice", "Junk") or {}), what="spam in Junk")
    assert "spammy" not in subjects("alice")


def sink_has(subject):
    d = os.path.join(TMP, "sinkmail", "new")
    if not os.path.isdir(d):
        return False
    for n in os.listdir(d):
        with open(os.path.join(d, n), "rb") as f:
            if f"Subject: {subject}".encode() in f.read():
                return True
    return False


def test_redirect_to_sink():
    put("bob", 'if header :contains "subject" "fwd" { redirect "someone@sink.test"; }\n')
    send("bob@heron.test", "please fwd this")
    wait_for(lambda: sink_has("please fwd this"), timeout=60, what="redirect at the sink")
    assert "please fwd this" not in subjects("bob")


def test_redirect_to_local_user_runs_their_script():
    put("bob", 'if header :contains "subject" "for alice" { redirect "alice@heron.test"; }\n')
    send("bob@heron.test", "report for alice")
    # alice's own script files "report" mail (the queue runner runs it for her)
    wait_for(lambda: "report for alice" in (subjects("alice", "Reports/2026") or {}),
             timeout=60, what="the redirected report in alice's Reports/2026")
    assert "report for alice" not in subjects("bob")
    assert "report for alice" not in subjects("alice")


def test_reject_smtp_and_lmtp():
    put("carol", 'require "reject";\nif header :contains "subject" "offer" '
                 '{ reject "No offers, thanks."; }\n')
    try:
        send("carol@heron.test", "special offer")
        assert False, "accepted"
    except smtplib.SMTPRecipientsRefused as e:
        code, text = e.recipients["carol@heron.test"]
        assert code == 550 and b"No offers, thanks." in text, e.recipients
    except smtplib.SMTPDataError as e:
        assert e.smtp_code == 550 and b"No offers, thanks." in e.smtp_error, e
    r = SmtpRaw(lmtp_port)
    r.send("LHLO client.test\r\n")
    r.reply()
    r.send("MAIL FROM:<x@example.org>\r\nRCPT TO:<carol@heron.test>\r\n"
           "RCPT TO:<dave@heron.test>\r\nDATA\r\n")
    assert [c for c, _t in r.replies(4)] == [250, 250, 250, 354]
    r.send("From: <x@heron.test>\r\nSubject: lmtp offer\r\n\r\nbody\r\n.\r\n")
    (c1, t1), (c2, t2) = r.replies(2)
    assert c1 == 550 and "carol@heron.test" in t1 and "No offers" in t1, (c1, t1)
    assert c2 == 250 and "dave@heron.test" in t2, (c2, t2)
    r.close()
    assert "special offer" not in subjects("carol")
    wait_for(lambda: "lmtp offer" in subjects("dave"), what="dave got the LMTP message")
    # SMTP with two recipients has one reply: dave gets it, the sender a DSN for carol
    with smtplib.SMTP(HOST, SMTP_PORT, timeout=30) as c:
        c.sendmail("shop@sink.test", ["carol@heron.test", "dave@heron.test"],
                   "From: shop@sink.test\r\nSubject: another offer\r\n\r\nbuy\r\n")
    wait_for(lambda: "another offer" in subjects("dave"), what="dave got the offer")

    def dsn():
        d = os.path.join(TMP, "sinkmail", "new")
        for n in os.listdir(d) if os.path.isdir(d) else []:
            data = open(os.path.join(d, n), "rb").read()
            if b"report-type=delivery-status" in data and b"another offer" in data:
                return data
        return None
    wait_for(dsn, timeout=60, what="the DSN for carol at the sink")
    data = dsn()
    assert b"Final-Recipient: rfc822; carol@heron.test" in data and b"Status: 5.7.1" in data
    assert b"No offers, thanks." in data and b"dave@heron.test" not in data.split(b"--")[0]


def vacation_replies(to_subject):
    d = os.path.join(TMP, "sinkmail", "new")
    n = 0
    if os.path.isdir(d):
        for name in os.listdir(d):
            with open(os.path.join(d, name), "rb") as f:
                data = f.read()
            if b"Auto-Submitted: auto-replied" in data and to_subject.encode() in data:
                n += 1
    return n


def test_vacation_once_per_days():
    put("dave", 'require "vacation";\nvacation :days 7 :subject "Away: out of office" '
                '"I am away until Monday.";\n')
    frm = "friend@sink.test"
    send("dave@heron.test", "question one", frm=frm)
    wait_for(lambda: vacation_replies("Away: out of office") >= 1, timeout=60,
             what="vacation reply at the sink")
    send("dave@heron.test", "question two", frm=frm)
    send("dave@heron.test", "from a list", frm="list@sink.test",
         extra="List-Id: <devel.sink.test>\r\n")
    send("dave@heron.test", "an auto reply", frm="bot@sink.test",
         extra="Auto-Submitted: auto-replied\r\n")
    send("dave@heron.test", "null sender", frm="")
    wait_for(lambda: "null sender" in subjects("dave"), what="all delivered")
    time.sleep(3)  # the queue runner tries every second: a second reply would be there
    assert vacation_replies("Away: out of office") == 1
    for s in ("question one", "question two", "from a list", "an auto reply"):
        assert s in subjects("dave"), s
    data = [open(os.path.join(TMP, "sinkmail", "new", n), "rb").read()
            for n in os.listdir(os.path.join(TMP, "sinkmail", "new"))]
    reply = [d for d in data if b"Away: out of office" in d][0]
    assert b"In-Reply-To: <question.one." in reply, reply[:600]
    assert b"References: <question.one." in reply


def test_vacation_loop_between_local_users():
    put("erin", 'require "vacation";\nvacation :days 1 "erin is away";\n')
    put("bob", 'require "vacation";\nvacation :days 1 "bob is away";\n')
    send("erin@heron.test", "ping", frm="bob@heron.test")
    # erin answers bob once; bob's vacation does not answer an auto-reply
    wait_for(lambda: any("Auto" in s or "ping" in s for s in subjects("bob")), timeout=60,
             what="erin's reply in bob's INBOX")
    time.sleep(3)
    bob = subjects("bob")
    erin = subjects("erin")
    assert len([s for s in bob if "ping" in s]) == 1, bob
    assert len([s for s in erin if "ping" in s]) == 1, erin


def test_editheader_and_duplicate():
    put("carol", 'require ["editheader", "duplicate", "fileinto"];\n'
                 'if duplicate { discard; stop; }\n'
                 'addheader "X-Filtered" "by heron sieve";\n'
                 'deleteheader "X-Internal";\n')
    msg = ("From: <a@heron.test>\r\nTo: <carol@heron.test>\r\nSubject: edited\r\n"
           "Message-ID: <dup-1@test>\r\nX-Internal: secret\r\n\r\nbody\r\n")
    for _ in range(2):
        with smtplib.SMTP(HOST, SMTP_PORT, timeout=30) as c:
            c.sendmail("a@example.org", ["carol@heron.test"], msg)
    wait_for(lambda: "edited" in subjects("carol"), what="edited message")
    c = imap("carol")
    typ, data = c.select("INBOX", readonly=True)
    typ, res = c.search(None, "SUBJECT", "edited")
    uids = res[0].split()
    assert len(uids) == 1, f"the duplicate was delivered: {uids}"
    typ, data = c.fetch(uids[0], "(BODY.PEEK[HEADER])")
    c.logout()
    hdr = data[0][1]
    assert hdr.startswith(b"X-Filtered: by heron sieve\r\n"), hdr[:200]
    assert b"X-Internal" not in hdr and b"Received: from" in hdr, hdr


def test_vacation_seconds_expire():
    put("erin", 'require "vacation-seconds";\nvacation :seconds 1 :subject "erin-secs" "away";\n')
    frm = "pal@sink.test"
    send("erin@heron.test", "first", frm=frm)
    wait_for(lambda: vacation_replies("erin-secs") == 1, timeout=60, what="first reply")
    time.sleep(2.5)  # the remembered reply expired
    send("erin@heron.test", "second", frm=frm)
    wait_for(lambda: vacation_replies("erin-secs") == 2, timeout=60, what="second reply")


def test_runtime_error_keeps():
    put("erin", 'require ["include"];\ninclude "missing";\ndiscard;\n')
    send("erin@heron.test", "kept despite error")
    wait_for(lambda: "kept despite error" in subjects("erin"), what="kept")


def test_mailctl_sieve():
    r = mailctl("sieve", "list", "alice")
    assert "main" in r.stdout and "true" in r.stdout.lower(), r.stdout
    bad = os.path.join(TMP, "bad.sieve")
    with open(bad, "w") as f:
        f.write('require "fileinto";\nif header :is "subject" "x" {\n  fileinto "y"\n}\n')
    r = mailctl("sieve", "check", "alice", bad, ok=False)
    assert r.returncode == 1 and "line 4, column 1" in r.stderr, r.stderr
    r = mailctl("sieve", "get", "alice")
    assert "Reports/2026" in r.stdout
    r = mailctl("sieve", "delete", "alice", "main", ok=False)
    assert r.returncode == 1 and "active" in r.stderr
    mailctl("sieve", "deactivate", "alice")
    mailctl("sieve", "delete", "alice", "main")
    assert "main" not in mailctl("sieve", "list", "alice").stdout
    site = os.path.join(TMP, "site.sieve")
    with open(site, "w") as f:
        f.write('require "fileinto";\nif header :contains "subject" "site" '
                '{ fileinto "Site"; }\n')
    r = mailctl("sieve", "put-all", "site", site, "--activate")
    assert f"for {len(USERS)} users" in r.stdout, r.stdout
    for u in USERS:
        assert "site" in mailctl("sieve", "get", u).stdout


def header_of(user, subject, mailbox="INBOX"):
    """The header section of the one message of mailbox with this subject (bytes)."""
    c = imap(user)
    c.select(f'"{mailbox}"', readonly=True)
    typ, res = c.search(None, "SUBJECT", f'"{subject}"')
    uids = res[0].split()
    assert len(uids) == 1, (user, mailbox, subject, uids)
    typ, data = c.fetch(uids[0], "(BODY.PEEK[HEADER])")
    c.logout()
    return data[0][1]


def test_admin_after_script():
    # before, the user's script, after: one run, so the three X-Chain fields each appends
    # come in that order; after still runs when the user's script left the implicit keep
    put("fay", 'require "editheader";\n'
               'if header :contains "subject" "chain" { addheader :last "X-Chain" "user"; }\n'
               'if header :contains "subject" "stopped" { stop; }\n')
    send("fay@heron.test", "chain order")
    send("fay@heron.test", "chain stopped spam", extra="X-Spam-Score: 12.5\r\n")
    send("fay@heron.test", "after spam", extra="X-Spam-Score: 12.5\r\n")
    send("fay@heron.test", "after ham", extra="X-Spam-Score: 0.5\r\n")
    # a user without a script of his own gets the before and after scripts as well
    send("gus@heron.test", "no script spam", extra="X-Spam-Score: 14\r\n")
    send("gus@heron.test", "no script ham")
    wait_for(lambda: "no script ham" in subjects("gus"), what="gus's ham in INBOX")
    wait_for(lambda: "after ham" in subjects("fay"), what="fay's ham in INBOX")
    hdr = header_of("fay", "chain order").decode()
    assert re.findall(r"^X-Chain: (\w+)\r$", hdr, re.M) == ["before", "user", "after"], hdr
    # the user's stop ends the chain: after never saw the spam score, the header has no
    # "after", the message stays in INBOX (no Junk)
    hdr = header_of("fay", "chain stopped spam").decode()
    assert re.findall(r"^X-Chain: (\w+)\r$", hdr, re.M) == ["before", "user"], hdr
    junk = subjects("fay", "Junk")
    assert junk is not None and "after spam" in junk, junk
    assert "chain stopped spam" not in junk and "after ham" not in junk, junk
    inbox = subjects("fay")
    assert "after spam" not in inbox and "after ham" in inbox, inbox
    assert "no script spam" in (subjects("gus", "Junk") or {}), subjects("gus", "Junk")
    assert "no script spam" not in subjects("gus")


def sink_messages():
    d = os.path.join(TMP, "sinkmail", "new")
    out = []
    for n in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        with open(os.path.join(d, n), "rb") as f:
            out.append(f.read())
    return out


def sink_copy(subject):
    """The sink's kept copy with this subject: its first line is the envelope sender
    (Return-Path: <MAIL FROM>), then a Delivered-To per RCPT."""
    got = [m for m in sink_messages() if f"\r\nSubject: {subject}\r\n".encode() in m]
    assert len(got) <= 1, (subject, len(got))
    return got[0] if got else None


def srs_hash(tt, domain, local):
    """The Guarded SRS0 hash mtad.8 documents: 4 characters of base64(HMAC-SHA1) over the
    lower-cased timestamp, domain and local part."""
    mac = hmac.new(SRS_SECRET.encode(), (tt + domain + local).lower().encode(), hashlib.sha1)
    return base64.b64encode(mac.digest()).decode()[:4]


def test_redirect_envelope_sender():
    # RFC 5228 4.2: the copy's envelope sender may be the original one, and an empty one
    # MUST stay empty; with [mtad] srs_secret_file a copy sent off-site goes from the SRS
    # form of the original sender (mtad.8), a sender of our own domains as it is
    put("hal", 'if header :contains "subject" "fwd" { redirect "far@sink.test"; }\n')
    send("hal@heron.test", "fwd external", frm="ext@example.org")
    send("hal@heron.test", "fwd local", frm="boss@heron.test")
    send("hal@heron.test", "fwd null", frm="")
    for subj in ("fwd external", "fwd local", "fwd null"):
        wait_for(lambda: sink_copy(subj), timeout=60, what=f"{subj} at the sink")
    ext = sink_copy("fwd external")
    m = re.match(rb"Return-Path: <SRS0=([^=]{4})=([A-Z2-7]{2})=example\.org=ext@heron\.test>"
                 rb"\r\nDelivered-To: far@sink\.test\r\n", ext)
    assert m is not None, ext[:300]
    assert m.group(1).decode() == srs_hash(m.group(2).decode(), "example.org", "ext"), m.group(0)
    assert b"\r\nDelivered-To: hal@heron.test\r\n" in ext, ext[:400]  # the loop mark
    assert sink_copy("fwd local").startswith(
        b"Return-Path: <boss@heron.test>\r\nDelivered-To: far@sink.test\r\n")
    assert sink_copy("fwd null").startswith(
        b"Return-Path: <>\r\nDelivered-To: far@sink.test\r\n"), sink_copy("fwd null")[:200]
    for subj in ("fwd external", "fwd local", "fwd null"):
        assert subj not in subjects("hal"), subj  # redirect cancels the implicit keep


def test_redirect_loop_between_local_users():
    # hal -> ivy -> hal: the copy coming back to hal carries his Delivered-To mark; RFC 5228
    # 4.2: a detected loop is an error, and an error keeps the message (2.10.6): hal gets it
    # once in INBOX, nothing goes round again
    put("hal", 'if header :contains "subject" "loop" { redirect "ivy@heron.test"; }\n')
    put("ivy", 'if header :contains "subject" "loop" { redirect "hal@heron.test"; }\n')
    send("hal@heron.test", "redirect loop", frm="ext@example.org")
    wait_for(lambda: "refused: the message was already delivered" in mtad.logtext(),
             timeout=60, what="the loop found")
    wait_for(lambda: "redirect loop" in subjects("hal"), timeout=60,
             what="the looping message kept in hal's INBOX")
    time.sleep(3)  # the queue runner tries every second: another round would be there
    c = imap("hal")
    c.select("INBOX", readonly=True)
    n = len(c.search(None, "SUBJECT", '"redirect loop"')[1][0].split())
    c.logout()
    assert n == 1, n
    assert "redirect loop" not in subjects("ivy")
    hdr = header_of("hal", "redirect loop")
    assert hdr.count(b"Delivered-To: hal@heron.test\r\n") == 1, hdr
    assert b"Delivered-To: ivy@heron.test\r\n" in hdr, hdr
    assert mtad.logtext().count("refused: the message was already delivered") == 1


def body_of(user, subject, mailbox="INBOX"):
    """The body (BODY[TEXT]) of the one message of mailbox with this subject (bytes)."""
    c = imap(user)
    c.select(f'"{mailbox}"', readonly=True)
    uids = c.search(None, "SUBJECT", f'"{subject}"')[1][0].split()
    assert len(uids) == 1, (user, mailbox, subject, uids)
    typ, data = c.fetch(uids[0], "(BODY.PEEK[TEXT])")
    c.logout()
    return data[0][1]


def test_editheader_on_queued_delivery():
    # hal redirects to kim, a local user: the queue runner delivers that copy and runs kim's
    # script, whose addheader/deleteheader (RFC 5293) must reach both of its stored copies
    # exactly as on the SMTP path (test_editheader_and_duplicate); the body unchanged
    put("hal", 'if header :contains "subject" "qedit" { redirect "kim@heron.test"; }\n')
    put("kim", 'require ["editheader", "fileinto", "mailbox"];\n'
               'addheader "X-Filtered" "by kim";\n'
               'deleteheader "X-Internal";\n'
               'fileinto :create "Edited"; keep;\n')
    send("hal@heron.test", "qedit via queue", extra="X-Internal: secret\r\n",
         body="first line\r\n\r\nlast line\r\n")
    wait_for(lambda: "qedit via queue" in subjects("kim"), timeout=60,
             what="the redirected copy in kim's INBOX")
    for box in ("INBOX", "Edited"):
        hdr = header_of("kim", "qedit via queue", box)
        assert hdr.startswith(b"X-Filtered: by kim\r\nDelivered-To: hal@heron.test\r\n"), \
            (box, hdr[:300])
        assert b"X-Internal" not in hdr and b"\r\nSubject: qedit via queue\r\n" in hdr, \
            (box, hdr)
        assert body_of("kim", "qedit via queue", box) == b"first line\r\n\r\nlast line\r\n"
    assert "qedit via queue" not in subjects("hal")
    assert "editheader not applied" not in mtad.logtext()


def vacation_replies_to(addr):
    """Vacation replies the sink got for addr (its RCPT, the Delivered-To it records)."""
    return len([m for m in sink_messages()
                if m.startswith(b"Return-Path: <>\r\n") and
                f"\r\nDelivered-To: {addr}\r\n".encode() in m.split(b"\r\n\r\n")[0] and
                b"\r\nSubject: jay-away" in m])


def test_vacation_not_to_daemons_owners_bulk():
    # RFC 3834 2 / RFC 5230 4.5: no reply to MAILER-DAEMON, owner-*, *-request senders, nor
    # to Precedence: bulk, list or junk; a plain sender sent last is answered (the check)
    put("jay", 'require "vacation";\nvacation :days 1 :subject "jay-away" "jay is away";\n')
    quiet = [("MAILER-DAEMON@sink.test", ""), ("mailer-daemon@sink.test", ""),
             ("owner-devel@sink.test", ""), ("devel-request@sink.test", ""),
             ("bulk@sink.test", "Precedence: bulk\r\n"),
             ("list@sink.test", "Precedence: list\r\n"),
             ("junk@sink.test", "Precedence: junk\r\n"),
             ("bulk2@sink.test", "Precedence: Bulk\r\n")]
    for frm, extra in quiet:
        send("jay@heron.test", f"to jay from {frm}", frm=frm, extra=extra)
    send("jay@heron.test", "to jay from a person", frm="person@sink.test")
    wait_for(lambda: vacation_replies_to("person@sink.test") == 1, timeout=60,
             what="the reply to the plain sender")
    time.sleep(3)  # replies queued before that one have been tried by now
    for frm, _extra in quiet:
        assert vacation_replies_to(frm) == 0, frm
        assert f"to jay from {frm}" in subjects("jay"), frm  # delivered all the same
    assert vacation_replies_to("person@sink.test") == 1


TESTS = [test_fileinto_flags_and_keywords, test_admin_before_script, test_admin_after_script,
         test_redirect_envelope_sender, test_redirect_loop_between_local_users,
         test_editheader_on_queued_delivery,
         test_vacation_not_to_daemons_owners_bulk, test_redirect_to_sink,
         test_redirect_to_local_user_runs_their_script,
         test_reject_smtp_and_lmtp, test_vacation_once_per_days,
         test_vacation_loop_between_local_users, test_editheader_and_duplicate,
         test_vacation_seconds_expire, test_runtime_error_keeps, test_mailctl_sieve]


def main():
    def body():
        sink.start()
        for u in USERS:
            mailctl("user", "add", u)
        mtad.start()
        imapd.start()
        return run_tests(TESTS)
    return run_main(body, TMP, [mtad, imapd, sink], tail=8000)


if __name__ == "__main__":
    sys.exit(main())
