#!/usr/bin/env python3
"""test_milter_pymilter.py — mtad against an independent milter: one written with Debian's
pymilter (python3-milter, libmilter underneath), started by the test on loopback (this file
run with --milter PORT LOG) and stopped by its pid. Nothing of mtad's own milter code is on
the milter's side, so this checks mtad's half of the protocol against libmilter's.

What the milter does is picked by the envelope (at MAIL and RCPT) or by the message's
Subject (at the end of the message); each outcome is checked on what mtad answered, stored
or queued:

  - MAIL from tempfail@example.org: 451 with the milter's text (setreply), no transaction;
  - RCPT to user2 from rcptreject@example.org: 550 with the milter's text, user1 kept;
  - "headers": a field added, one inserted first, Subject changed, X-Remove deleted;
  - "body": the body replaced;
  - "rcpts": user2 added, user1 removed;
  - "sender": the sender changed (seen by the relay target as MAIL FROM);
  - "quarantine": accepted, held in the queue, not delivered;
  - "discard": 250, nothing kept;
  - "reject": 554 with the milter's text.

The milter writes one line per message it saw to its log (the headers and body it was
sent), which the test reads back. Skipped (77) without pymilter (scripts/bootstrap installs
python3-milter).

  test_milter_pymilter.py SOURCE_ROOT MTAD STORE_PEEK"""
import json
import os
import smtplib
import subprocess
import sys
import tempfile
import time

def milter_main(port, log):
    """The milter (a separate process): libmilter's loop on 127.0.0.1:port."""
    import Milter

    class TestMilter(Milter.Base):
        def __init__(self):
            self.sender, self.rcpts, self.headers, self.content = "", [], [], b""

        def envfrom(self, mailfrom, *params):
            self.sender, self.rcpts, self.headers, self.content = mailfrom, [], [], b""
            if mailfrom.lower() == "<tempfail@example.org>":
                self.setreply("451", "4.7.1", "Try later, says pymilter")
                return Milter.TEMPFAIL
            return Milter.CONTINUE

        def envrcpt(self, to, *params):
            if (self.sender.lower() == "<rcptreject@example.org>" and
                    to.lower() == "<user2@heron.test>"):
                self.setreply("550", "5.7.1", "No mail for user2 from you")
                return Milter.REJECT
            self.rcpts.append(to)
            return Milter.CONTINUE

        def header(self, name, value):
            self.headers.append([name, value])
            return Milter.CONTINUE

        def body(self, chunk):
            self.content += chunk
            return Milter.CONTINUE

        def eom(self):
            subject = next((v for n, v in self.headers if n.lower() == "subject"), "")
            with open(log, "a") as f:
                f.write(json.dumps({"subject": subject, "sender": self.sender,
                                    "rcpts": self.rcpts, "headers": self.headers,
                                    "body": self.content.decode(errors="replace"),
                                    "queue_id": self.getsymval("i")}) + "\n")
            if subject == "headers":
                self.addheader("X-Pymilter", "added")
                self.addheader("X-Pymilter-First", "inserted", 0)
                self.chgheader("Subject", 1, "headers changed")
                self.chgheader("X-Remove", 1, "")
            elif subject == "body":
                self.replacebody(b"replaced by pymilter\r\nsecond line\r\n")
            elif subject == "rcpts":
                self.addrcpt("<user2@heron.test>")
                self.delrcpt("<user1@heron.test>")
            elif subject == "sender":
                self.chgfrom("<bounces@heron.test>")
            elif subject == "quarantine":
                self.quarantine("held by pymilter")
            elif subject == "discard":
                return Milter.DISCARD
            elif subject == "reject":
                self.setreply("554", "5.7.1", "Rejected by pymilter")
                return Milter.REJECT
            return Milter.CONTINUE

    Milter.factory = TestMilter
    Milter.set_flags(Milter.ADDHDRS | Milter.CHGHDRS | Milter.CHGBODY | Milter.ADDRCPT |
                     Milter.DELRCPT | Milter.CHGFROM | Milter.QUARANTINE)
    Milter.runmilter("heron-test", f"inet:{port}@127.0.0.1", 60)


if len(sys.argv) == 4 and sys.argv[1] == "--milter":
    milter_main(int(sys.argv[2]), sys.argv[3])
    sys.exit(0)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (Mtad, RelayTarget, Store, assert_eq, assert_in,  # noqa: E402
                      assert_not_in, end_process, free_port, run_main, run_tests, wait_for,
                      wait_port, write_users)

try:
    import Milter  # noqa: F401
except ImportError:
    print("pymilter (python3-milter) not installed (scripts/bootstrap installs it): skipped")
    sys.exit(77)

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-pymilter-")
PORT = free_port()
LOG = os.path.join(TMP, "milter.log")
write_users(os.path.join(TMP, "users"), ["user1", "user2", "user3"])
relay = RelayTarget()
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"workers": "1", "transport_map": f"remote.test=127.0.0.1:{relay.port}",
             "trusted_networks": "127.0.0.0/8"}, tls=False)
mtad.sections["milter"] = {"smtpd_milters": f"inet:127.0.0.1:{PORT}",
                           "command_timeout": "60s", "content_timeout": "60s",
                           "connect_timeout": "30s"}
mtad.write_conf()
store = Store(PEEK, mtad.conf)
milter = None

MESSAGE = ("From: Sender <user3@heron.test>\r\nTo: user1@heron.test\r\n"
           "Subject: {subject}\r\nX-Remove: this one goes\r\n\r\n"
           "line one of the body\r\nline two\r\n")


def start_milter():
    global milter
    out = open(os.path.join(TMP, "milter.out"), "ab")
    milter = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--milter",
                               str(PORT), LOG], stdout=out, stderr=out,
                              stdin=subprocess.DEVNULL)
    out.close()
    wait_port(PORT, 60, milter, "the pymilter milter")


def stop_milter():
    end_process(milter)


def send(subject, rcpts=("user1@heron.test",), sender="user3@heron.test"):
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=120) as c:
        c.ehlo("client.test")
        assert_eq(c.mail(sender)[0], 250)
        for r in rcpts:
            assert_eq(c.rcpt(r)[0], 250)
        code, text = c.data(MESSAGE.format(subject=subject).encode())
        return code, text.decode()


def inbox_message(user, subject):
    for uid, *_ in store.inbox(user):
        body = store.body(user, uid)
        if f"\r\nSubject: {subject}\r\n".encode() in body:
            return body
    return None


def stored(user, subject):
    return wait_for(lambda: inbox_message(user, subject), 60, f"{subject} for {user}")


def seen(subject):
    """What the milter was sent of the message with that subject."""
    def find():
        if not os.path.exists(LOG):
            return None
        with open(LOG) as f:
            for line in f:
                rec = json.loads(line)
                if rec["subject"] == subject:
                    return rec
        return None
    return wait_for(find, 30, f"the milter's record of {subject}")


def test_plain_message_passes_and_what_the_milter_saw():
    assert_eq(send("plain")[0], 250)
    body = stored("user1", "plain")
    assert body.endswith(b"\r\n\r\nline one of the body\r\nline two\r\n"), body
    rec = seen("plain")
    assert_eq(rec["sender"], "<user3@heron.test>")
    assert_eq(rec["rcpts"], ["<user1@heron.test>"])
    assert_eq(rec["body"], "line one of the body\r\nline two\r\n")
    assert_in(["X-Remove", "this one goes"], rec["headers"])
    assert_eq(rec["headers"][0][0], "Received")
    assert_eq(len(rec["queue_id"]), 16)


def test_tempfail_at_mail():
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=120) as c:
        c.ehlo("client.test")
        assert_eq(c.mail("tempfail@example.org"), (451, b"4.7.1 Try later, says pymilter"))
        # no transaction was left open
        assert_eq(c.rcpt("user1@heron.test")[0], 503)
        # the session goes on
        assert_eq(c.mail("user3@heron.test")[0], 250)
    assert_in("step=mail result=tempfail", mtad.logtext())


def test_reject_at_rcpt():
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=120) as c:
        c.ehlo("client.test")
        assert_eq(c.mail("rcptreject@example.org")[0], 250)
        assert_eq(c.rcpt("user1@heron.test")[0], 250)
        assert_eq(c.rcpt("user2@heron.test"), (550, b"5.7.1 No mail for user2 from you"))
        assert_eq(c.data(MESSAGE.format(subject="rcpt-reject").encode())[0], 250)
    stored("user1", "rcpt-reject")
    assert_eq(seen("rcpt-reject")["rcpts"], ["<user1@heron.test>"])
    time.sleep(0.5)
    assert inbox_message("user2", "rcpt-reject") is None


def test_header_changes():
    assert_eq(send("headers")[0], 250)
    body = stored("user1", "headers changed")
    head = body.split(b"\r\n\r\n", 1)[0] + b"\r\n"
    assert head.startswith(b"X-Pymilter-First: inserted\r\n"), head
    assert_in(b"\r\nX-Pymilter: added\r\n", head)
    assert_not_in(b"X-Remove", head)
    assert_not_in(b"Subject: headers\r\n", head)
    assert body.endswith(b"\r\n\r\nline one of the body\r\nline two\r\n"), body


def test_body_replaced():
    assert_eq(send("body")[0], 250)
    body = stored("user1", "body")
    assert body.endswith(b"Subject: body\r\nX-Remove: this one goes\r\n\r\n"
                         b"replaced by pymilter\r\nsecond line\r\n"), body


def test_recipients_changed():
    assert_eq(send("rcpts")[0], 250)
    stored("user2", "rcpts")
    time.sleep(0.5)
    assert inbox_message("user1", "rcpts") is None


def test_sender_changed():
    assert_eq(send("sender", rcpts=("far@remote.test",))[0], 250)
    got = wait_for(lambda: relay.with_subject("sender"), 60, "the relayed message")
    assert_eq(got[0][0], "bounces@heron.test")
    assert_eq(got[0][1], ["far@remote.test"])


def test_quarantine_holds_in_queue():
    assert_eq(send("quarantine")[0], 250)
    held = wait_for(lambda: [q for q in store.queue()
                             if "user1@heron.test" in q and q.endswith(" held")], 30,
                    "a held queue entry")
    assert_eq(len(held), 1, store.queue())
    time.sleep(1.5)  # the runner's tick: still not delivered
    assert inbox_message("user1", "quarantine") is None
    assert_in('milter quarantine reason="held by pymilter"', mtad.logtext())


def test_discard():
    before = len(mtad.logtext())
    assert_eq(send("discard")[0], 250)
    wait_for(lambda: "status=discarded" in mtad.logtext()[before:], 30, "the discard")
    assert inbox_message("user1", "discard") is None


def test_reject_at_the_end():
    assert_eq(send("reject"), (554, "5.7.1 Rejected by pymilter"))
    time.sleep(0.5)
    assert inbox_message("user1", "reject") is None


def main():
    def body():
        start_milter()
        mtad.start()
        failed = run_tests([test_plain_message_passes_and_what_the_milter_saw,
                            test_tempfail_at_mail, test_reject_at_rcpt, test_header_changes,
                            test_body_replaced, test_recipients_changed, test_sender_changed,
                            test_quarantine_holds_in_queue, test_discard,
                            test_reject_at_the_end])
        if failed:
            for name in ("milter.out", "milter.log"):
                path = os.path.join(TMP, name)
                if os.path.exists(path):
                    with open(path, errors="replace") as f:
                        sys.stdout.write(f.read()[-4000:])
        return failed
    return run_main(body, TMP, [mtad], cleanup=[stop_milter, relay.close])


if __name__ == "__main__":
    sys.exit(main())
