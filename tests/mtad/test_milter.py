#!/usr/bin/env python3
"""test_milter.py — milters, one conversation per SMTP session, against a milter written in
the test (milterpeer.py): what mtad sends (option negotiation, connect/HELO/MAIL/RCPT/DATA
with the macros Postfix sends, each as its SMTP command comes, every header, the body, the
end, abort and quit), each action a milter takes at each step (at CONNECT or HELO a refusal
answers every later command; at MAIL the transaction, at RCPT only that recipient, at DATA
or the first BDAT the message is refused; accept leaves the milter out, discard at an
envelope step drops the message; at the end: reject with its own reply text, tempfail,
discard, quarantine as a held queue entry, header add/insert/change/delete, body
replacement, recipients added and removed, sender changed), negotiated steps left out or
left unanswered, refused recipients sent to a milter that asks, macro lists asked for, two
milters in a row (the second sent the message as the first changed it), and each failure
(down, silent past its timeout, garbage, a close after a step or in the middle of a reply,
a packet length past the limit; silence or garbage at MAIL and at RCPT under each
milter_default_action): the milter's default action at that step, answered in bounded time,
a log line, and mtad serving the next session. Also: SMFIR_SKIP in the body, NR_MAIL and
NR_RCPT, SMFIC_ABORT at RSET, a 421 or SMFIR_SHUTDOWN at each step (the 421, then the
session closed; at connect in place of the greeting), a client leaving while mtad waits for
the milter. scripts/test runs it under ASan+UBSan too.

  test_milter.py SOURCE_ROOT MTAD STORE_PEEK"""
import os
import signal
import smtplib
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from heronlib import (DOMAIN, Mtad, RelayTarget, Store, assert_eq, assert_in,  # noqa: E402
                      assert_not_in, assert_lt, run_suite, wait_for, write_users)
from milterpeer import (ACCEPT, ADDHEADER, ADDRCPT, CHGFROM, CHGHEADER, CONTINUE,  # noqa: E402
                        DELRCPT, DISCARD, INSHEADER, QUARANTINE, REJECT, REPLBODY,
                        REPLYCODE, SHUTDOWN, SKIP, TEMPFAIL, MilterPeer, Plan,
                        closed_port, pkt)

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-milter-")
WORKERS = 2
write_users(os.path.join(TMP, "users"), ["user1", "user2", "user3"])
peer = MilterPeer()
peer2 = MilterPeer()
relay = RelayTarget()
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"workers": str(WORKERS), "transport_map": f"remote.test=127.0.0.1:{relay.port}",
             "trusted_networks": "127.0.0.0/8", "max_message_size": "1M"}, tls=False)
mtad.sections["milter"] = {"smtpd_milters": peer.address, "command_timeout": "2s",
                           "content_timeout": "2s", "connect_timeout": "2s"}
mtad.write_conf()
store = Store(PEEK, mtad.conf)

MESSAGE = ("From: Sender <user3@heron.test>\r\nTo: user1@heron.test\r\n"
           "Subject: {subject}\r\nX-Remove: this one goes\r\nX-Folded: first\r\n"
           " second\r\n\r\nline one of the body\r\nline two\r\n")


def milters(**keys):
    """New [milter] keys, SIGHUP, every worker reloaded."""
    before = len(mtad.logtext())
    mtad.sections["milter"].update(keys)
    mtad.write_conf()
    mtad.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: mtad.logtext()[before:].count("config reloaded") >= WORKERS,
             what="every worker reloaded")


def send(subject, rcpts=("user1@heron.test",), sender="user3@heron.test"):
    """(code, text) of the answer to the message's final dot."""
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=30) as c:
        c.ehlo("client.test")
        c.mail(sender)
        for r in rcpts:
            assert_eq(c.rcpt(r)[0], 250)
        code, text = c.data(MESSAGE.format(subject=subject).encode())
        return code, text.decode()


def inbox_message(user, subject):
    for uid, _b, _s in store.inbox(user):
        body = store.body(user, uid)
        if f"Subject: {subject}".encode() in body:
            return body
    return None


def stored(user, subject, timeout=20):
    return wait_for(lambda: inbox_message(user, subject), timeout, f"{subject} for {user}")


def run(plan, subject, **kw):
    peer.reset(plan)
    return send(subject, **kw)


def test_accept_and_what_the_milter_sees():
    code, _ = run(Plan(), "seen")
    assert_eq(code, 250)
    body = stored("user1", "seen")
    conv = peer.last()
    cmds = [c for c, _ in conv.commands]
    # the order Postfix uses, once each (macros in between)
    order = [c for c in cmds if c != b"D"]
    assert_eq(order, [b"O", b"C", b"H", b"M", b"R", b"T"] + [b"L"] * 6 +
              [b"N", b"B", b"E", b"Q"])
    assert_eq(conv.offered[0], 6)
    m = conv.macros
    assert_eq(m["j"], "mx.heron.test")
    assert_eq(m["{client_addr}"], "127.0.0.1")
    assert_eq(m["{mail_addr}"], "user3@heron.test")
    assert_eq(m["{rcpt_addr}"], "user1@heron.test")
    assert_eq(m["{rcpt_mailer}"], "local")
    assert_eq(len(m["i"]), 16)
    connect = dict(conv.commands)[b"C"]
    assert_in(b"\x004", connect)  # hostname NUL, family '4'
    assert_in(b"127.0.0.1\0", connect)
    assert_eq(dict(conv.commands)[b"H"], b"client.test\0")
    assert_eq(dict(conv.commands)[b"M"], b"<user3@heron.test>\0")
    names = [n for n, _ in conv.headers]
    assert_eq(names[0], "Received")  # ours, as Postfix sends its own
    assert_in(("Subject", "seen"), conv.headers)
    assert_in(("X-Folded", "first\n second"), conv.headers)
    assert_eq(conv.body, b"line one of the body\r\nline two\r\n")
    assert body.endswith(b"\r\n\r\nline one of the body\r\nline two\r\n"), body


def test_replycode_reject():
    code, text = run(Plan(eob=[REPLYCODE("554 5.7.1 Spam go away")]), "spam")
    assert_eq((code, text), (554, "5.7.1 Spam go away"))
    time.sleep(0.5)
    assert inbox_message("user1", "spam") is None
    assert_in("result=reject", mtad.logtext())


def test_replycode_without_enhanced_code_gets_one():
    code, text = run(Plan(eob=[REPLYCODE("550 not here")]), "noesc")
    assert_eq((code, text), (550, "5.7.1 not here"))


def test_multiline_replycode():
    code, text = run(Plan(eob=[REPLYCODE("550-5.7.1 first\r\n550 5.7.1 second")]), "multi")
    assert_eq(code, 550)
    assert_eq(text, "5.7.1 first\n5.7.1 second")


def test_reject_tempfail_discard():
    assert_eq(run(Plan(eob=[REJECT]), "rej")[0], 550)
    assert_eq(run(Plan(eob=[TEMPFAIL]), "tmp")[0], 451)
    code, text = run(Plan(eob=[DISCARD]), "disc")
    assert_eq(code, 250)
    time.sleep(0.5)
    for s in ("rej", "tmp", "disc"):
        assert inbox_message("user1", s) is None, s
    assert_in("status=discarded", mtad.logtext())


def test_accept_skips_the_rest():
    code, _ = run(Plan(replies={b"M": ACCEPT}), "acc")
    assert_eq(code, 250)
    stored("user1", "acc")
    cmds = [c for c, _ in peer.last().commands if c != b"D"]
    assert_not_in(b"R", cmds)
    assert_not_in(b"E", cmds)


def test_header_changes():
    plan = Plan(eob=[ADDHEADER("X-Milter", "added"), INSHEADER(0, "X-First", "top"),
                     CHGHEADER(1, "Subject", "hdrs changed"), CHGHEADER(1, "X-Remove", ""),
                     ADDHEADER("X-Long", "one\n\ttwo"), CONTINUE])
    assert_eq(run(plan, "hdrs")[0], 250)
    body = stored("user1", "hdrs changed")
    head = body.split(b"\r\n\r\n", 1)[0]
    assert head.startswith(b"X-First: top\r\nReceived:"), head
    assert_in(b"\r\nX-Milter: added\r\n", body)
    assert_in(b"\r\nX-Long: one\r\n\ttwo", body)
    assert_not_in(b"X-Remove", body)
    assert_not_in(b"Subject: hdrs\r\n", body)
    assert body.endswith(b"\r\n\r\nline one of the body\r\nline two\r\n")


def test_header_leading_space_negotiated():
    plan = Plan(protocol=0x100000, eob=[ADDHEADER("X-Lead", "nospace"), CONTINUE])
    assert_eq(run(plan, "lead")[0], 250)
    body = stored("user1", "lead")
    assert_in(b"\r\nX-Lead:nospace\r\n", body)
    assert_in(("Subject", " lead"), peer.last().headers)


def test_body_replaced():
    plan = Plan(eob=[REPLBODY(b"new body\nwith a bare LF\r\n"), CONTINUE])
    assert_eq(run(plan, "body")[0], 250)
    body = stored("user1", "body")
    assert body.endswith(b"Subject: body\r\nX-Remove: this one goes\r\nX-Folded: first\r\n"
                         b" second\r\n\r\nnew body\r\nwith a bare LF\r\n"), body


def test_recipients_changed():
    plan = Plan(eob=[ADDRCPT("<user2@heron.test>"), DELRCPT("<user1@heron.test>"),
                     ADDRCPT("<far@remote.test>"), CONTINUE])
    assert_eq(run(plan, "rcpts")[0], 250)
    stored("user2", "rcpts", 30)
    wait_for(lambda: relay.with_subject("rcpts"), 30, "the added remote recipient")
    assert inbox_message("user1", "rcpts") is None
    assert_eq(relay.with_subject("rcpts")[0][1], ["far@remote.test"])


def test_sender_changed():
    plan = Plan(eob=[CHGFROM("<bounces@heron.test>"), CONTINUE])
    assert_eq(run(plan, "from", rcpts=("x@remote.test",))[0], 250)
    got = wait_for(lambda: relay.with_subject("from"), 30, "relayed")
    assert_eq(got[0][0], "bounces@heron.test")


def test_quarantine_holds_in_queue():
    assert_eq(run(Plan(eob=[QUARANTINE("looks bad"), CONTINUE]), "quar")[0], 250)
    lines = wait_for(lambda: [q for q in store.queue() if "user1@heron.test" in q], 20,
                     "a queue entry")
    assert lines[0].endswith(" held"), lines
    time.sleep(1.5)  # the runner's tick: still not delivered
    assert inbox_message("user1", "quar") is None
    assert_in("milter quarantine", mtad.logtext())


def test_action_not_negotiated_is_garbage():
    # asked only to add headers, it changes the body: a protocol violation
    plan = Plan(actions=0x01, eob=[REPLBODY(b"x\r\n"), CONTINUE])
    assert_eq(run(plan, "notneg")[0], 451)


def test_steps_left_out_and_unanswered():
    # NOHELO | NOBODY, no replies for connect, headers, EOH
    plan = Plan(protocol=0x02 | 0x10 | 0x1000 | 0x80 | 0x40000)
    assert_eq(run(plan, "steps")[0], 250)
    stored("user1", "steps")
    cmds = [c for c, _ in peer.last().commands if c != b"D"]
    assert_not_in(b"H", cmds)
    assert_not_in(b"B", cmds)
    assert_in(b"L", cmds)


def test_symlist_limits_macros():
    plan = Plan(actions=0x1ff, symlists={2: "{mail_addr}"})
    assert_eq(run(plan, "syms")[0], 250)
    m = peer.last().macros
    assert_eq(m.get("{mail_addr}"), "user3@heron.test")
    assert_not_in("{mail_mailer}", m)
    assert_in("{rcpt_addr}", m)  # other stages keep the default macros


def test_two_milters():
    peer2.reset(Plan(eob=[ADDHEADER("X-Second", "2"), CONTINUE]))
    milters(smtpd_milters=f"{peer.address}, {peer2.address}")
    try:
        assert_eq(run(Plan(eob=[ADDHEADER("X-First-Milter", "1"), CONTINUE]), "two")[0], 250)
        body = stored("user1", "two")
        assert_in(b"X-First-Milter: 1\r\n", body)
        assert_in(b"X-Second: 2\r\n", body)
        # the first one refuses the message: the second is not sent it, and is told the
        # transaction ended
        peer2.reset(Plan())
        assert_eq(run(Plan(eob=[REJECT]), "two-rej")[0], 550)
        cmds = [c for c, _ in peer2.last().commands if c != b"D"]
        assert_eq(cmds, [b"O", b"C", b"H", b"M", b"R", b"T", b"A", b"Q"])
    finally:
        milters(smtpd_milters=peer.address)


def test_chained_milters_see_the_changes():
    # the second milter is sent the message as the first one left it: its header fields and
    # its body (the envelope went to both as the client gave it, command by command); its
    # own changes apply to that message and to the envelope as the first changed it
    first = Plan(eob=[ADDHEADER("X-First-Milter", "1"), CHGHEADER(1, "Subject", "chain2"),
                      CHGHEADER(1, "X-Remove", ""), REPLBODY(b"body of the first\r\n"),
                      ADDRCPT("<user2@heron.test>"), CHGFROM("<bounces@heron.test>"),
                      CONTINUE])
    peer2.reset(Plan(eob=[CHGHEADER(1, "X-First-Milter", ""), ADDHEADER("X-Second", "2"),
                          REPLBODY(b"body of the second\r\n"),
                          DELRCPT("<user1@heron.test>"), CONTINUE]))
    milters(smtpd_milters=f"{peer.address}, {peer2.address}")
    try:
        assert_eq(run(first, "chain1")[0], 250)
        conv = peer2.last()
        assert_in(("X-First-Milter", "1"), conv.headers)
        assert_in(("Subject", "chain2"), conv.headers)
        assert_not_in("X-Remove", [n for n, _ in conv.headers])
        assert_eq(conv.body, b"body of the first\r\n")
        cmds = conv.commands
        assert_eq(dict(cmds)[b"M"], b"<user3@heron.test>\0")
        assert_eq([d for c, d in cmds if c == b"R"], [b"<user1@heron.test>\0"])
        # the first milter saw the message as sent
        assert_in(("Subject", "chain1"), peer.last().headers)
        body = stored("user2", "chain2", 30)
        assert_not_in(b"X-First-Milter", body)
        assert_in(b"\r\nX-Second: 2\r\n", body)
        assert_not_in(b"X-Remove", body)
        assert body.endswith(b"\r\n\r\nbody of the second\r\n"), body
        assert inbox_message("user1", "chain2") is None
        # all recipients removed by the first: the second is not sent the message, nothing
        # is kept
        peer2.reset(Plan())
        gone = Plan(eob=[DELRCPT("<user1@heron.test>"), CONTINUE])
        assert_eq(run(gone, "chain-none")[0], 250)
        assert_not_in(b"E", [c for c, _ in peer2.last().commands])
        assert_in("status=discarded", mtad.logtext())
    finally:
        milters(smtpd_milters=peer.address)



class Dialogue:
    """A raw SMTP session: each command's whole reply (its lines joined by LF)."""

    def __init__(self, port=None):
        self.sock = socket.create_connection(("127.0.0.1", port or mtad.port), timeout=30)
        self.f = self.sock.makefile("rwb")
        self.greeting = self.reply()

    def reply(self):
        lines = []
        while True:
            line = self.f.readline()
            if not line:
                raise EOFError("mtad closed the connection")
            lines.append(line.decode().rstrip("\r\n"))
            if line[3:4] != b"-":
                return "\n".join(lines)

    def cmd(self, line, raw=b""):
        self.f.write(line.encode() + b"\r\n" + raw)
        self.f.flush()
        return self.reply()

    def close(self):
        self.f.close()
        self.sock.close()


def commands(conv):
    return [c for c, _ in conv.commands if c != b"D"]


TEMPFAIL_TEXT = "451 4.7.1 Service unavailable - try again later"


def test_connect_refused_every_command():
    peer.reset(Plan(replies={b"C": REPLYCODE("554 5.7.1 Go away, bad neighbourhood")}))
    d = Dialogue()
    assert d.greeting.startswith("220 "), d.greeting
    for line in ("EHLO client.test", "MAIL FROM:<user3@heron.test>",
                 "RCPT TO:<user1@heron.test>", "DATA", "NOOP", "RSET", "HELO again.test"):
        assert_eq(d.cmd(line), "554 5.7.1 Go away, bad neighbourhood", line)
    assert d.cmd("QUIT").startswith("221 ")
    d.close()
    # asked once, before the greeting; told nothing more but the end
    assert_eq(commands(peer.last()), [b"O", b"C", b"Q"])
    assert_in("step=connect result=reject", mtad.logtext())


def test_helo_tempfail_refuses_the_session():
    peer.reset(Plan(replies={b"H": TEMPFAIL}))
    d = Dialogue()
    assert d.greeting.startswith("220 "), d.greeting
    assert_eq(d.cmd("EHLO client.test"), TEMPFAIL_TEXT)
    assert_eq(d.cmd("MAIL FROM:<user3@heron.test>"), TEMPFAIL_TEXT)
    assert_eq(d.cmd("EHLO other.test"), TEMPFAIL_TEXT)
    assert d.cmd("QUIT").startswith("221 ")
    d.close()
    conv = peer.last()
    assert_eq(commands(conv), [b"O", b"C", b"H", b"Q"])
    assert_eq(dict(conv.commands)[b"H"], b"client.test\0")


def test_mail_rejected_with_its_text():
    def mail(data):
        return REPLYCODE("550 5.7.1 Sender not welcome here") if b"user3" in data else CONTINUE
    peer.reset(Plan(replies={b"M": mail}))
    d = Dialogue()
    assert d.cmd("EHLO client.test").startswith("250-")
    assert_eq(d.cmd("MAIL FROM:<user3@heron.test>"), "550 5.7.1 Sender not welcome here")
    assert_eq(d.cmd("RCPT TO:<user1@heron.test>"), "503 5.5.1 Bad sequence of commands")
    # the session goes on: another sender is let through
    assert_eq(d.cmd("MAIL FROM:<user2@heron.test>"), "250 2.1.0 Ok")
    assert d.cmd("QUIT").startswith("221 ")
    d.close()
    # the refused transaction and the one left open are each ended with an abort
    assert_eq(commands(peer.last()), [b"O", b"C", b"H", b"M", b"A", b"M", b"A", b"Q"])


def test_one_rcpt_of_two_refused():
    def rcpt(data):
        return REPLYCODE("550 5.7.1 Not for this one") if b"user2" in data else CONTINUE
    peer.reset(Plan(replies={b"R": rcpt}))
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=30) as c:
        c.ehlo("client.test")
        assert_eq(c.mail("user3@heron.test")[0], 250)
        assert_eq(c.rcpt("user1@heron.test"), (250, b"2.1.5 Ok"))
        assert_eq(c.rcpt("user2@heron.test"), (550, b"5.7.1 Not for this one"))
        code, _ = c.data(MESSAGE.format(subject="one-of-two").encode())
        assert_eq(code, 250)
    stored("user1", "one-of-two")
    conv = peer.last()
    assert_eq([d for c, d in conv.commands if c == b"R"],
              [b"<user1@heron.test>\0", b"<user2@heron.test>\0"])
    assert_in(b"E", commands(conv))
    time.sleep(0.5)
    assert inbox_message("user2", "one-of-two") is None
    # the 250'd message is stored once
    subjects = [store.body("user1", uid) for uid, _b, _s in store.inbox("user1")]
    assert_eq(sum(b"Subject: one-of-two\r\n" in b for b in subjects), 1)


def test_discard_at_rcpt_drops_the_message():
    peer.reset(Plan(replies={b"R": DISCARD}))
    before = len(mtad.logtext())
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=30) as c:
        c.ehlo("client.test")
        c.mail("user3@heron.test")
        assert_eq(c.rcpt("user1@heron.test")[0], 250)
        assert_eq(c.rcpt("user2@heron.test")[0], 250)
        assert_eq(c.data(MESSAGE.format(subject="rcpt-discard").encode())[0], 250)
    # the message is not asked about any more: one RCPT, no DATA, no message
    assert_eq(commands(peer.last()), [b"O", b"C", b"H", b"M", b"R", b"A", b"Q"])
    time.sleep(0.5)
    for user in ("user1", "user2"):
        assert inbox_message(user, "rcpt-discard") is None, user
    assert_in("status=discarded", mtad.logtext()[before:])


def test_accept_at_connect_leaves_the_milter_out():
    code, _ = run(Plan(replies={b"C": ACCEPT}), "conn-accept")
    assert_eq(code, 250)
    stored("user1", "conn-accept")
    assert_eq(commands(peer.last()), [b"O", b"C", b"Q"])


def test_data_and_bdat_refused():
    peer.reset(Plan(replies={b"T": REPLYCODE("554 5.7.1 No data today")}))
    d = Dialogue()
    d.cmd("EHLO client.test")
    assert_eq(d.cmd("MAIL FROM:<user3@heron.test>"), "250 2.1.0 Ok")
    assert_eq(d.cmd("RCPT TO:<user1@heron.test>"), "250 2.1.5 Ok")
    assert_eq(d.cmd("DATA"), "554 5.7.1 No data today")
    assert_eq(d.cmd("RCPT TO:<user1@heron.test>"), "503 5.5.1 Bad sequence of commands")
    # the first BDAT is asked about: refused, its chunk is read and dropped
    assert_eq(d.cmd("MAIL FROM:<user3@heron.test>"), "250 2.1.0 Ok")
    assert_eq(d.cmd("RCPT TO:<user1@heron.test>"), "250 2.1.5 Ok")
    chunk = b"Subject: bdat-refused\r\n\r\nx\r\n"
    assert_eq(d.cmd(f"BDAT {len(chunk)} LAST", chunk), "554 5.7.1 No data today")
    assert_eq(d.cmd("NOOP"), "250 2.0.0 Ok")
    d.cmd("QUIT")
    d.close()
    assert_eq(commands(peer.last()).count(b"T"), 2)
    time.sleep(0.5)
    assert inbox_message("user1", "bdat-refused") is None


def test_refused_recipients_told_when_asked():
    peer.reset(Plan(protocol=0x800))  # SMFIP_RCPT_REJ
    d = Dialogue()
    d.cmd("EHLO client.test")
    d.cmd("MAIL FROM:<user3@heron.test>")
    assert d.cmd("RCPT TO:<nobody@heron.test>").startswith("550 5.1.1 "), "unknown user"
    d.cmd("QUIT")
    d.close()
    conv = peer.last()
    assert_eq([d for c, d in conv.commands if c == b"R"], [b"<nobody@heron.test>\0"])
    assert_eq(conv.macros["{rcpt_mailer}"], "error")
    assert_eq(conv.macros["{rcpt_host}"], "5.1.1")
    # without the flag, a refused recipient is not sent
    peer.reset(Plan())
    d = Dialogue()
    d.cmd("EHLO client.test")
    d.cmd("MAIL FROM:<user3@heron.test>")
    assert d.cmd("RCPT TO:<nobody@heron.test>").startswith("550 5.1.1 ")
    d.cmd("QUIT")
    d.close()
    assert_not_in(b"R", commands(peer.last()))


def test_milter_dying_after_connect_gets_the_default_at_mail():
    # NOHELO: after CONNECT its next step is MAIL
    peer.reset(Plan(protocol=0x02, die_after=b"C"))
    assert_eq(ehlo(), (250, 451))
    assert_in("connection closed", mtad.logtext())
    milters(smtpd_milters=f"{{ {peer.address}, default_action=accept }}")
    try:
        peer.reset(Plan(protocol=0x02, die_after=b"C"))
        assert_eq(send("died-accept")[0], 250)
        stored("user1", "died-accept")
    finally:
        milters(smtpd_milters=peer.address)

def test_failure_at_mail_and_rcpt_each_default_action():
    # a milter silent past command_timeout, or answering garbage, at MAIL or at RCPT: that
    # command gets the default action, and so does every later one of the session
    silent = lambda data: b""  # noqa: E731
    garbage = pkt(b"Z", b"junk")
    refused = {"tempfail": TEMPFAIL_TEXT, "reject": "554 5.7.1 Command rejected by a filter"}
    try:
        for action in ("tempfail", "accept", "reject"):
            milters(milter_default_action=action)
            for how, reply in (("silent", silent), ("garbage", garbage)):
                # at MAIL
                before = len(mtad.logtext())
                peer.reset(Plan(replies={b"M": reply}))
                d = Dialogue()
                d.cmd("EHLO client.test")
                got = d.cmd("MAIL FROM:<user3@heron.test>")
                if action == "accept":
                    assert_eq(got, "250 2.1.0 Ok", (action, how))
                    assert_eq(d.cmd("RCPT TO:<user1@heron.test>"), "250 2.1.5 Ok")
                    subject = f"mail-{how}-{action}"
                    assert d.cmd("DATA").startswith("354")
                    got = d.cmd(MESSAGE.format(subject=subject) + ".")
                    assert got.startswith("250 "), got
                    stored("user1", subject)
                else:
                    assert_eq(got, refused[action], (action, how))
                    # the milter is given up for the session: the next MAIL gets the same
                    # at once
                    assert_eq(d.cmd("MAIL FROM:<user2@heron.test>"), refused[action])
                assert d.cmd("QUIT").startswith("221 ")
                d.close()
                log = mtad.logtext()[before:]
                assert_in("timed out" if how == "silent" else "result=fail", log)
                assert_in(f"action={action}", log)
                # at RCPT: the transaction stays, that recipient gets the default
                before = len(mtad.logtext())
                peer.reset(Plan(replies={b"R": reply}))
                d = Dialogue()
                d.cmd("EHLO client.test")
                assert_eq(d.cmd("MAIL FROM:<user3@heron.test>"), "250 2.1.0 Ok")
                got = d.cmd("RCPT TO:<user1@heron.test>")
                if action == "accept":
                    assert_eq(got, "250 2.1.5 Ok", (action, how))
                    subject = f"rcpt-{how}-{action}"
                    assert d.cmd("DATA").startswith("354")
                    got = d.cmd(MESSAGE.format(subject=subject) + ".")
                    assert got.startswith("250 "), got
                    stored("user1", subject)
                else:
                    assert_eq(got, refused[action], (action, how))
                    assert_eq(d.cmd("RCPT TO:<user2@heron.test>"), refused[action])
                    assert_eq(d.cmd("DATA"), "554 5.5.1 No valid recipients")
                assert d.cmd("QUIT").startswith("221 ")
                d.close()
                log = mtad.logtext()[before:]
                assert_in("timed out" if how == "silent" else "result=fail", log)
                assert_in(f"action={action}", log)
    finally:
        milters(milter_default_action="tempfail")


def test_skip_during_the_body():
    # SMFIP_SKIP negotiated; the milter skips after the first body chunk: it is sent no
    # more of the body, the end of the message comes next, and its changes apply
    plan = Plan(protocol=0x400, replies={b"B": SKIP},
                eob=[ADDHEADER("X-Skipped", "yes"), CONTINUE])
    peer.reset(plan)
    big = "".join(f"body line {i:06d} of a long message\r\n" for i in range(6000))
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=30) as c:
        c.ehlo("client.test")
        c.mail("user3@heron.test")
        c.rcpt("user1@heron.test")
        msg = ("From: user3@heron.test\r\nTo: user1@heron.test\r\nSubject: skip\r\n\r\n" +
               big).encode()
        assert_eq(c.data(msg)[0], 250)
    body = stored("user1", "skip")
    assert_in(b"\r\nX-Skipped: yes\r\n", body)
    assert body.endswith(big.encode()), body[-200:]
    conv = peer.last()
    cmds = commands(conv)
    assert_eq(cmds.count(b"B"), 1)
    assert_lt(len(conv.body), len(big))
    assert_eq(cmds[cmds.index(b"B") + 1], b"E")


def test_no_reply_at_mail_and_rcpt():
    # SMFIP_NR_MAIL | SMFIP_NR_RCPT: sent MAIL and RCPT, their answers not waited for (a
    # wait would run into command_timeout and tempfail)
    before = len(mtad.logtext())
    code, _ = run(Plan(protocol=0x4000 | 0x8000), "no-reply",
                  rcpts=("user1@heron.test", "user2@heron.test"))
    assert_eq(code, 250)
    stored("user1", "no-reply")
    stored("user2", "no-reply")
    conv = peer.last()
    cmds = commands(conv)
    assert_eq(cmds.count(b"M"), 1)
    assert_eq(cmds.count(b"R"), 2)
    assert_in(b"E", cmds)
    assert_not_in("result=fail", mtad.logtext()[before:])


def test_abort_on_rset_alone():
    peer.reset(Plan())
    d = Dialogue()
    d.cmd("EHLO client.test")
    assert_eq(d.cmd("MAIL FROM:<user3@heron.test>"), "250 2.1.0 Ok")
    assert_eq(d.cmd("RCPT TO:<user1@heron.test>"), "250 2.1.5 Ok")
    assert d.cmd("RSET").startswith("250 ")
    # the abort is sent at the RSET, the session still open
    wait_for(lambda: peer.conversations and b"A" in commands(peer.conversations[-1]), 20,
             "SMFIC_ABORT after RSET")
    # a RSET with no transaction aborts nothing; the next transaction is asked as usual
    assert d.cmd("RSET").startswith("250 ")
    assert_eq(d.cmd("MAIL FROM:<user3@heron.test>"), "250 2.1.0 Ok")
    assert d.cmd("QUIT").startswith("221 ")
    d.close()
    assert_eq(commands(peer.last()), [b"O", b"C", b"H", b"M", b"R", b"A", b"M", b"A", b"Q"])


def closed(d):
    """True once mtad closed the session (nothing more to read)."""
    d.sock.settimeout(20)
    try:
        return d.f.readline() == b""
    except TimeoutError:
        return False
    except OSError:  # reset
        return True


SHUTDOWN_TEXT = "421 4.7.0 Server closing connection"
CONN_FAIL = pkt(b"f")  # SMFIR_CONN_FAIL, "cause a connection failure": ends it as SHUTDOWN


def test_421_at_connect_closes_without_greeting():
    for reply, want in ((REPLYCODE("421 4.7.0 Too busy, come back later"),
                         "421 4.7.0 Too busy, come back later"),
                        (SHUTDOWN, SHUTDOWN_TEXT)):
        peer.reset(Plan(replies={b"C": reply}))
        d = Dialogue()
        assert_eq(d.greeting, want)
        assert closed(d), "mtad kept the session open"
        d.close()
        assert_eq(commands(peer.last()), [b"O", b"C", b"Q"])
    assert_in('reason="milter 421 at connect"', mtad.logtext())


def test_421_at_later_steps_closes():
    steps = [(b"H", []), (b"M", ["EHLO client.test"]),
             (b"R", ["EHLO client.test", "MAIL FROM:<user3@heron.test>"]),
             (b"T", ["EHLO client.test", "MAIL FROM:<user3@heron.test>",
                     "RCPT TO:<user1@heron.test>"])]
    last = {b"H": "EHLO client.test", b"M": "MAIL FROM:<user3@heron.test>",
            b"R": "RCPT TO:<user1@heron.test>", b"T": "DATA"}
    for cmd, first in steps:
        for reply, want in ((REPLYCODE("421 4.7.0 Going down"), "421 4.7.0 Going down"),
                            (SHUTDOWN, SHUTDOWN_TEXT), (CONN_FAIL, SHUTDOWN_TEXT)):
            peer.reset(Plan(replies={cmd: reply}))
            d = Dialogue()
            for line in first:
                assert not d.cmd(line).startswith("4"), line
            assert_eq(d.cmd(last[cmd]), want, cmd)
            assert closed(d), (cmd, "mtad kept the session open")
            d.close()
            assert_eq(commands(peer.last())[-1], b"Q")
    # pipelined commands after the 421 get no reply: the session ends at the 421
    peer.reset(Plan(replies={b"M": SHUTDOWN}))
    d = Dialogue()
    d.cmd("EHLO client.test")
    assert_eq(d.cmd("MAIL FROM:<user3@heron.test>",
                    b"RCPT TO:<user1@heron.test>\r\nDATA\r\nNOOP\r\n"), SHUTDOWN_TEXT)
    assert closed(d), "mtad answered after its 421"
    d.close()
    # at the end of the message: refused with the 421, nothing kept, the session closed
    for reply, want in ((REPLYCODE("421 4.7.0 Going down"), "421 4.7.0 Going down"),
                        (SHUTDOWN, SHUTDOWN_TEXT)):
        peer.reset(Plan(eob=[reply]))
        d = Dialogue()
        d.cmd("EHLO client.test")
        d.cmd("MAIL FROM:<user3@heron.test>")
        d.cmd("RCPT TO:<user1@heron.test>")
        assert d.cmd("DATA").startswith("354")
        assert_eq(d.cmd(MESSAGE.format(subject="eom-421") + "."), want)
        assert closed(d), "mtad kept the session open after the end of data"
        d.close()
    time.sleep(0.5)
    assert inbox_message("user1", "eom-421") is None


def test_client_leaves_while_the_milter_works():
    # the client closes while mtad waits for the milter at CONNECT, at RCPT and at the end
    # of the message: the milter's late answer finds the session gone (nothing kept, it was
    # not answered), and the next session is served
    def late(data):
        time.sleep(1.0)
        return CONTINUE
    for cmd, lines in ((b"C", []), (b"R", ["EHLO client.test", "MAIL FROM:<user3@heron.test>"])):
        peer.reset(Plan(replies={cmd: late}))
        sock = socket.create_connection(("127.0.0.1", mtad.port), timeout=30)
        f = sock.makefile("rwb")
        if lines:
            f.readline()
            for line in lines:
                f.write(line.encode() + b"\r\n")
                f.flush()
                while f.readline()[3:4] == b"-":
                    pass
            f.write(b"RCPT TO:<user1@heron.test>\r\n")
            f.flush()
        f.close()
        sock.close()
        assert_in(cmd, commands(peer.last()))  # the conversation ended
    peer.reset(Plan(eob_delay=1.0))
    d = Dialogue()
    d.cmd("EHLO client.test")
    d.cmd("MAIL FROM:<user3@heron.test>")
    d.cmd("RCPT TO:<user1@heron.test>")
    assert d.cmd("DATA").startswith("354")
    d.f.write((MESSAGE.format(subject="left-early") + ".\r\n").encode())
    d.f.flush()
    d.close()
    assert_in(b"E", commands(peer.last()))
    assert_eq(run(Plan(), "after-leaving")[0], 250)
    stored("user1", "after-leaving")
    assert inbox_message("user1", "left-early") is None


def failure(plan, subject, want, limit=10.0):
    t0 = time.monotonic()
    code, _ = run(plan, subject)
    took = time.monotonic() - t0
    assert_eq(code, want, (subject, code))
    assert_lt(took, limit)


def ehlo(plan=None):
    """(code, text) of the answers to EHLO and MAIL in a new session."""
    if plan is not None:
        peer.reset(plan)
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=30) as c:
        code, _ = c.ehlo("client.test")
        mail = c.mail("user3@heron.test")
        return code, mail[0]


def test_failures_get_the_default_action():
    # at the negotiation (before the greeting): the session is refused with the default
    assert_eq(ehlo(Plan(optneg_raw=b"\x00\x00\x00\x05xhello")), (451, 451))
    assert_eq(ehlo(Plan(optneg_raw=b"\x7f\xff\xff\xff")), (451, 451))
    # at the end of the message
    failure(Plan(eob=[REPLYCODE("554 5.7.1 cut short")], close_after=7), "midclose", 451)
    failure(Plan(eob_delay=5.0), "silent", 451)
    log = mtad.logtext()
    for why in ("unknown reply", "connection closed", "packet too long", "timed out"):
        assert_in(why, log)
    # the next message is served as usual
    assert_eq(run(Plan(), "after")[0], 250)
    stored("user1", "after")


def test_down_milter_default_actions():
    down = f"inet:127.0.0.1:{closed_port()}"
    milters(smtpd_milters=down)
    try:
        assert_eq(ehlo(), (451, 451))
        milters(milter_default_action="reject")
        assert_eq(ehlo(), (554, 554))
        # one milter's own setting wins over the default
        milters(smtpd_milters=f"{{ {down}, default_action=accept }}")
        assert_eq(send("down-acc")[0], 250)
        stored("user1", "down-acc")
        assert_in("cannot connect", mtad.logtext())
    finally:
        milters(smtpd_milters=peer.address, milter_default_action="tempfail")


def test_per_milter_timeout():
    milters(smtpd_milters=f"{{ {peer.address}, content_timeout=500ms }}",
            content_timeout="30s")
    try:
        t0 = time.monotonic()
        assert_eq(run(Plan(eob_delay=2.0), "fast-timeout")[0], 451)
        assert_lt(time.monotonic() - t0, 1.8)
    finally:
        milters(smtpd_milters=peer.address, content_timeout="2s")


def test_lmtp_gets_non_smtpd_milters():
    # smtpd_milters do not apply to LMTP; non_smtpd_milters do
    import socket
    milters(non_smtpd_milters=peer.address, smtpd_milters="")
    try:
        peer.reset(Plan(eob=[REPLYCODE("550 5.7.1 not via lmtp")]))
        with socket.create_connection(("127.0.0.1", mtad.lmtp_port), timeout=20) as s:
            f = s.makefile("rwb")
            f.readline()
            for line in (b"LHLO client.test", b"MAIL FROM:<user3@heron.test>",
                         b"RCPT TO:<user1@heron.test>", b"RCPT TO:<user2@heron.test>",
                         b"DATA"):
                f.write(line + b"\r\n")
                f.flush()
                while True:
                    r = f.readline()
                    if r[3:4] != b"-":
                        break
            f.write(MESSAGE.format(subject="lmtp").encode() + b".\r\n")
            f.flush()
            replies = [f.readline(), f.readline()]
        assert all(r.startswith(b"550 5.7.1 not via lmtp") for r in replies), replies
        offered_actions = peer.last().offered[1]
        assert_eq(offered_actions & 0x8c, 0)  # no recipient changes over LMTP
    finally:
        milters(non_smtpd_milters="", smtpd_milters=peer.address)


def test_bad_list_refused_at_start():
    import subprocess
    bad = os.path.join(TMP, "bad.conf")
    with open(mtad.conf) as f:
        text = f.read()
    with open(bad, "w") as f:
        f.write(text.replace(f"smtpd_milters = {peer.address}", "smtpd_milters = tcp:nowhere"))
    r = subprocess.run([MTAD, "-c", bad, "-t"], capture_output=True, text=True, timeout=30)
    out = r.stdout + r.stderr
    # -t checks the keys; the start refuses the list with a clear message
    r2 = subprocess.run([MTAD, "-c", bad, "-f"], capture_output=True, text=True, timeout=30)
    assert r2.returncode != 0, out
    assert_in("bad milter", r2.stderr + r2.stdout)


def main():
    tests = [test_accept_and_what_the_milter_sees, test_replycode_reject,
             test_replycode_without_enhanced_code_gets_one, test_multiline_replycode,
             test_reject_tempfail_discard, test_accept_skips_the_rest, test_header_changes,
             test_header_leading_space_negotiated, test_body_replaced,
             test_recipients_changed, test_sender_changed, test_quarantine_holds_in_queue,
             test_action_not_negotiated_is_garbage, test_steps_left_out_and_unanswered,
             test_symlist_limits_macros, test_two_milters,
             test_chained_milters_see_the_changes,
             test_connect_refused_every_command, test_helo_tempfail_refuses_the_session,
             test_mail_rejected_with_its_text, test_one_rcpt_of_two_refused,
             test_discard_at_rcpt_drops_the_message,
             test_accept_at_connect_leaves_the_milter_out, test_data_and_bdat_refused,
             test_refused_recipients_told_when_asked,
             test_milter_dying_after_connect_gets_the_default_at_mail,
             test_failures_get_the_default_action, test_down_milter_default_actions,
             test_per_milter_timeout, test_lmtp_gets_non_smtpd_milters,
             test_bad_list_refused_at_start,
             test_failure_at_mail_and_rcpt_each_default_action, test_skip_during_the_body,
             test_no_reply_at_mail_and_rcpt, test_abort_on_rset_alone,
             test_421_at_connect_closes_without_greeting, test_421_at_later_steps_closes,
             test_client_leaves_while_the_milter_works]
    return run_suite(mtad, tests, TMP, cleanup=[peer.close, peer2.close, relay.close])


if __name__ == "__main__":
    sys.exit(main())
