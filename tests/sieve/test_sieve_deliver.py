#!/usr/bin/env python3
"""test_sieve_deliver.py — Sieve at local delivery, end to end: scripts stored with
`mailctl sieve put`, mail sent with smtplib (SMTP and LMTP) to the real mtad, folders and
flags read back with imaplib from the real imapd on the same store, redirects arriving at
the real sink; vacation answered once per :days, never to lists or auto-replies; reject as
the 550 (SMTP, LMTP); a vacation loop between two local users ends; admin before script.

  test_sieve_deliver.py SOURCE_ROOT MTAD IMAPD MAILCTL SINK"""
import imaplib
import os
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
USERS = ["alice", "bob", "carol", "dave", "erin"]
sink = Sink(SINK, TMP, {"keep": os.path.join(TMP, "sinkmail"), "records": "all"})
BEFORE = os.path.join(TMP, "before.sieve")
with open(BEFORE, "w") as f:
    f.write('require ["fileinto", "mailbox"];\n'
            'if header :contains "X-Spam-Flag" "YES" { fileinto :create "Junk"; stop; }\n')
lmtp_port = free_port()
CONF, SMTP_PORT, IMAP_PORT = shared_conf(TMP, USERS, keys={
    "mtad": {"transport_map": f"sink.test=127.0.0.1:{sink.port}", "retry_schedule": "1s",
             "lmtp": f"{HOST}:{lmtp_port}",
             # the test sends as local users on port 25 (boss, bob): an internal hub
             "trusted_networks": "127.0.0.1"},
    "sieve": {"before": BEFORE, "vacation_min_days": "0"},
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


TESTS = [test_fileinto_flags_and_keywords, test_admin_before_script, test_redirect_to_sink,
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
