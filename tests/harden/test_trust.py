#!/usr/bin/env python3
"""Who may do what, against the real mtad and imapd on one store and one users file: the SASL
PLAIN responses both decode the same way (one decoder); the login throttle both share holds
against an attacker who owns an account (good logins in between do not reset the victim's
count), against parallel connections and against guesses spread over many addresses, while
the victim's own client still logs in; unauthenticated sessions per address are capped; the
time before login, of a transaction and of its data is a deadline that trickled input does
not move.

  test_trust.py SOURCE_ROOT MTAD IMAPD STORE_PEEK"""
import base64
import os
import re
import select
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import (DOMAIN, HOST, Daemon, ImapRaw, SmtpRaw, Store, free_port,  # noqa: E402
                      run_main, run_tests, shared_conf, wait_for, wait_workers_ready)

ROOT, MTAD, IMAPD, PEEK = sys.argv[1:5]
TMP = tempfile.mkdtemp(prefix="heron-harden-trust-")
USERS = ["user%d" % i for i in range(1, 10)]
SUB_PORT = free_port()
SENDER_MAP = os.path.join(TMP, "senders")
with open(SENDER_MAP, "w") as f:
    f.write("# shared mailboxes and role addresses\nsales@%s  user1, user4\n"
            "@shared.test user2\n" % DOMAIN)
CONF, SMTP_PORT, IMAP_PORT = shared_conf(TMP, USERS, workers=2, keys={
    "mtad": {"submission": f"{HOST}:{SUB_PORT}", "auth_require_tls": "no",
             "max_message_size": "1M", "max_unauth_connections_per_ip": "4",
             "login_timeout": "20s", "max_transaction_time": "8s", "max_data_time": "4s",
             "sender_login_map": SENDER_MAP, "sender_login_exempt": "user9"},
    "imapd": {"max_unauth_connections_per_ip": "30", "login_timeout": "20s"},
})
mtad = Daemon(MTAD, CONF, os.path.join(TMP, "mtad.log"), SMTP_PORT)
imapd = Daemon(IMAPD, CONF, os.path.join(TMP, "imapd.log"), IMAP_PORT)
store = Store(PEEK, CONF)


def b64(raw):
    return base64.b64encode(raw).decode()


def smtp_auth(token, user_tag="x"):
    """AUTH PLAIN token on the submission port: the reply (code, text)."""
    c = SmtpRaw(SUB_PORT)
    try:
        c.send("EHLO %s.test\r\n" % user_tag)
        assert c.reply()[0] == 250
        c.send("AUTH PLAIN %s\r\n" % token)
        return c.reply()
    finally:
        c.close()


def imap_auth(token):
    """AUTHENTICATE PLAIN with token as the initial response: the tagged reply."""
    r = ImapRaw(IMAP_PORT)
    try:
        return r.cmd("a", "AUTHENTICATE PLAIN %s" % token)[-1]
    finally:
        r.close()


def test_sasl_plain_one_decoder():
    # Both servers take the same responses and refuse the same ones (common/sasl.c).
    good = [b"\0user1\0user1", b"user1\0user1\0user1"]
    bad = [b"\0user1\0user1\0x",       # a fourth field: mtad answered 235 to it once
           b"\0user1\0user1\0",        # a trailing NUL
           b"user2\0user1\0user1",     # another identity
           b"\0user1", b"\0\0user1", b"\0user1\0", b""]
    for raw in good:
        code, text = smtp_auth(b64(raw))
        assert code == 235, (raw, code, text)
        assert imap_auth(b64(raw)).startswith("a OK"), raw
    for raw in bad:
        code, text = smtp_auth(b64(raw) or "=")
        assert code in (501, 535) and code != 235, (raw, code, text)
        got = imap_auth(b64(raw) or "=")
        assert got.startswith(("a NO", "a BAD")), (raw, got)
    # base64 that is not strict: white space inside, a stray '=', set bits after the data
    # (each decodes to a good login leniently)
    alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    t = b64(b"user1\0user1\0user1")
    assert t.endswith("=") and not t.endswith("==")
    stray = t[:-2] + alpha[alpha.index(t[-2]) + 1] + "="
    for token in ["AHVzZXIxAHVzZXIx=", "AHVz ZXIxAHVzZXIx", stray]:
        code, text = smtp_auth(token)
        assert code == 501, (token, code, text)
        assert imap_auth(token).startswith(("a BAD", "a NO")), token


class Imap:
    """A raw IMAP line client from a chosen 127.0.0.0/8 source address."""

    def __init__(self, source="127.0.0.1", timeout=60):
        self.s = socket.create_connection((HOST, IMAP_PORT), timeout=timeout,
                                          source_address=(source, 0))
        self.buf = b""
        self.greeting = self.line()

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line.decode(errors="replace")

    def cmd(self, tag, text):
        self.s.sendall(("%s %s\r\n" % (tag, text)).encode())
        while True:
            line = self.line()
            if line.startswith(tag + " "):
                return line

    def close(self):
        self.s.close()


def login(user, password, source="127.0.0.1"):
    c = Imap(source)
    try:
        return c.cmd("l", "LOGIN %s %s" % (user, password))
    finally:
        c.close()


def login_lines(user, log):
    return [ln for ln in log.splitlines() if " imap login " in ln and f"user={user} " in ln]


def smtp_lines(user, log):
    return [ln for ln in log.splitlines() if " smtp auth " in ln and f"user={user} " in ln]


def field(line, name):
    m = re.search(r"(?:^| )%s=(\S+)" % name, line)
    return m.group(1) if m else None


def test_good_logins_do_not_reset_the_victims_count():
    # user2 owns an account and guesses user3's password, logging in as itself in between
    # (which once cleared the failures of the whole address)
    for i in range(3):
        assert login("user3", "guess%d" % i).startswith("l NO"), i
        assert login("user2", "user2").startswith("l OK")
    fails = [ln for ln in login_lines("user3", imapd.logtext()) if "result=" in ln]
    assert [field(ln, "failures") for ln in fails] == ["1", "2", "3"], fails
    assert [field(ln, "delay_ms") for ln in fails] == ["500", "1000", "2000"], fails
    # the count is the same table for mtad: its next failure for user3 is the fourth
    code, text = smtp_auth(b64(b"\0user3\0guess3"))
    assert code == 535, (code, text)
    last = smtp_lines("user3", mtad.logtext())[-1]
    assert field(last, "failures") == "4" and field(last, "delay_ms") == "4000", last
    # and mtad's failures count for imapd (the fifth), which holds the check for its slot
    assert login("user3", "guess4").startswith("l NO")
    last = login_lines("user3", imapd.logtext())[-1]
    assert field(last, "failures") == "5", last
    # the right password works, and forgets the pair's failures only
    assert login("user3", "user3").startswith("l OK")
    assert login("user3", "wrong").startswith("l NO")
    last = login_lines("user3", imapd.logtext())[-1]
    assert field(last, "failures") == "1" and field(last, "user_failures") == "6", last


def test_parallel_guesses_are_spaced():
    # 10 guesses for one pair at once: each waits for its own slot (0.5 s, 1 s, 2 s, 4 s,
    # 8 s apart) whatever connection or worker it came on, and those whose slot is more than
    # 15 s away are refused without a check
    conns = [Imap() for _ in range(10)]
    out = [None] * 10

    def guess(i):
        out[i] = conns[i].cmd("g", "LOGIN user4 guess%d" % i)
    threads = [threading.Thread(target=guess, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    for c in conns:
        c.close()
    refused = [x for x in out if x and x.startswith("g NO [UNAVAILABLE]")]
    failed = [x for x in out if x and x.startswith("g NO [AUTHENTICATIONFAILED]")]
    assert len(refused) + len(failed) == 10, out
    assert 1 <= len(failed) <= 6 and len(refused) >= 4, out
    log = imapd.logtext()
    waits = [int(field(ln, "wait_ms")) for ln in log.splitlines()
             if " imap throttle " in ln and "user=user4 " in ln and "decision=wait" in ln]
    assert len(waits) == len(failed) - 1, (waits, out)
    assert len([ln for ln in log.splitlines() if " imap throttle " in ln
                and "user=user4 " in ln and "decision=refuse" in ln]) == len(refused)
    # the slots grow: 0.5 s, 1.5 s, 3.5 s, 7.5 s after the first (less what passed)
    assert sorted(waits) == waits or len(waits) <= 1, waits
    assert all(w <= 15000 for w in waits), waits


def test_guesses_from_many_addresses_and_the_users_own_client():
    # the victim logs in from its usual client first: that pair is known
    assert login("user5", "user5").startswith("l OK")
    # 14 guesses at once from 14 other addresses: one per pair, but the user's count grows,
    # and past 9 failures of the user its checks are spaced: 4 of them wait
    out = [None] * 14

    def guess(i):
        out[i] = login("user5", "guess%d" % i, source="127.0.0.%d" % (i + 2))
    threads = [threading.Thread(target=guess, args=(i,)) for i in range(14)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert all(x and x.startswith("l NO [AUTHENTICATIONFAILED]") for x in out), out
    lines = [ln for ln in login_lines("user5", imapd.logtext()) if "result=" in ln][1:]
    assert [field(ln, "failures") for ln in lines] == ["1"] * 14, lines
    assert sorted(int(field(ln, "user_failures")) for ln in lines) == list(range(1, 15))
    thr = [ln for ln in imapd.logtext().splitlines()
           if " imap throttle " in ln and "user=user5 " in ln]
    assert len(thr) == 4 and all(field(ln, "decision") == "wait" and field(ln, "known") == "no"
               for ln in thr), thr
    # the victim's own client is spaced by its own pair only: it logs in at once
    got = login("user5", "user5")
    assert got.startswith("l OK"), got
    assert len([ln for ln in imapd.logtext().splitlines()
                if " imap throttle " in ln and "user=user5 " in ln]) == 4


def test_unauth_sessions_per_address_capped():
    held = [SmtpRaw(SUB_PORT) for _ in range(4)]
    try:
        extra = SmtpRaw(SUB_PORT)
        assert extra.greeting[0] == 421 and "unauthenticated" in extra.greeting[1], \
            extra.greeting
        extra.close()
        # one logs in: it no longer counts
        held[0].send("EHLO a.test\r\n")
        assert held[0].reply()[0] == 250
        held[0].send("AUTH PLAIN %s\r\n" % b64(b"\0user6\0user6"))
        assert held[0].reply()[0] == 235
        ok = wait_for(lambda: (lambda c: (c.close(), c.greeting)[1])(SmtpRaw(SUB_PORT))
                      [0] == 220, 20, "a submission slot")
        assert ok
    finally:
        for c in held:
            c.close()


def unread(s):
    """What a socket has received and not yet been read, without waiting."""
    out = b""
    s.setblocking(False)
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
    except OSError:
        pass
    return out


def trickle(socks, data, end_after, interval=0.5):
    """Sends data one byte per interval on every socket (each its own copy, cycling) until
    the server closes it or end_after seconds pass; returns what each received."""
    got = {s: b"" for s in socks}
    open_ = set(socks)
    pos = {s: 0 for s in socks}
    end = time.monotonic() + end_after
    while open_ and time.monotonic() < end:
        for s in list(open_):
            try:
                s.sendall(data[pos[s] % len(data):pos[s] % len(data) + 1])
                pos[s] += 1
            except OSError:
                # closed by the server (its reset, for the bytes it had not read): what it
                # sent before is still here to read
                got[s] += unread(s)
                open_.discard(s)
        r, _, _ = select.select(list(open_), [], [], interval)
        for s in r:
            try:
                chunk = s.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                open_.discard(s)
            got[s] += chunk
    return got, open_


def test_login_is_a_deadline_not_idle_time():
    # 5 IMAP and 3 submission connections send a byte every half second and never log in:
    # each is closed at login_timeout (20 s here) after its connect, the bytes do not
    # keep it (they once reset an idle timer: 30 such connections stayed 80 s at 60 s)
    imap = [socket.create_connection((HOST, IMAP_PORT), timeout=10) for _ in range(5)]
    # (from addresses of their own: the slots the test before let go may not be free yet)
    sub = [socket.create_connection((HOST, SUB_PORT), timeout=10,
                                    source_address=("127.0.1.%d" % (i + 1), 0))
           for i in range(3)]
    try:
        got, still = trickle(imap + sub, b"a NOOP\r\nb CAPABILITY\r\n", 60)
        assert not still, "%d connections still open after 60 s" % len(still)
        for s in imap:
            assert b"* BYE Autologout; not logged in in time" in got[s], got[s][-200:]
        for s in sub:
            assert b"421 4.4.2 mx.heron.test Timeout: login timeout" in got[s], got[s][-200:]
    finally:
        for s in imap + sub:
            s.close()
    assert 'reason="login timeout"' in imapd.logtext()


def test_transaction_and_data_are_deadlines():
    # a transaction kept alive by NOOPs, and a DATA fed a byte at a time, end at
    # max_transaction_time (8 s) and max_data_time (4 s) whatever arrives; nothing is stored
    before = len(store.inbox("user7"))
    a = SmtpRaw(SMTP_PORT)
    b = SmtpRaw(SMTP_PORT)
    for c in (a, b):
        c.send("EHLO slow.test\r\nMAIL FROM:<slow@example.org>\r\n"
               "RCPT TO:<user7@%s>\r\n" % DOMAIN)
        assert [r[0] for r in c.replies(3)] == [250, 250, 250]
    b.send("DATA\r\n")
    assert b.reply()[0] == 354
    got, still = trickle([a.s, b.s], b"NOOP\r\n", 60)
    assert not still, "%d connections still open after 60 s" % len(still)
    assert b"421 4.4.2 mx.heron.test Timeout: transaction took too long" in got[a.s], got[a.s]
    assert b"421 4.4.2 mx.heron.test Timeout: message data took too long" in got[b.s], \
        got[b.s]
    a.close()
    b.close()
    assert len(store.inbox("user7")) == before


def submission(user):
    """A submission session logged in as user (password = name)."""
    c = SmtpRaw(SUB_PORT)
    c.send("EHLO %s.test\r\nAUTH PLAIN %s\r\n" % (user, b64(b"\0%s\0%s" % (
        user.encode(), user.encode()))))
    assert [r[0] for r in c.replies(2)] == [250, 235]
    return c


def mail_from(c, sender):
    c.send("MAIL FROM:<%s>\r\n" % sender)
    code, text = c.reply()
    if code == 250:
        c.send("RSET\r\n")
        assert c.reply()[0] == 250
    return code, text


def test_sender_bound_to_the_login():
    c = submission("user1")
    try:
        # someone else's address, or any domain: 553 5.7.1 (once 250, and relayed)
        for other in ["ceo@bigbank.example", f"user2@{DOMAIN}", f"alias.user2@{DOMAIN}",
                      f"user1@{DOMAIN}.evil.example", "user1@shared.test"]:
            code, text = mail_from(c, other)
            assert code == 553 and "5.7.1" in text and other in text, (other, code, text)
        # its own: the directory's address and aliases, a +detail, any case; and what the
        # map grants it
        for own in [f"user1@{DOMAIN}", f"alias.user1@{DOMAIN}", f"user1+lists@{DOMAIN}",
                    f"User1@{DOMAIN.upper()}", f"sales@{DOMAIN}"]:
            code, text = mail_from(c, own)
            assert code == 250, (own, code, text)
        # the null sender: one recipient (a receipt, a bounce), not two
        c.send(f"MAIL FROM:<>\r\nRCPT TO:<user3@{DOMAIN}>\r\nRCPT TO:<user4@{DOMAIN}>\r\n"
               "RSET\r\n")
        got = c.replies(4)
        assert [r[0] for r in got] == [250, 250, 550, 250], got
        assert "5.7.1" in got[2][1], got
    finally:
        c.close()
    c = submission("user2")
    try:
        assert mail_from(c, f"sales@{DOMAIN}")[0] == 553
        assert mail_from(c, "anyone@shared.test")[0] == 250  # a whole domain granted
    finally:
        c.close()
    c = submission("user9")  # sender_login_exempt
    try:
        assert mail_from(c, "ceo@bigbank.example")[0] == 250
    finally:
        c.close()
    log = mtad.logtext()
    assert 'user=user1 result=fail reason="sender not owned by the login"' in log


def test_received_names_the_login():
    c = submission("user1")
    try:
        c.send(f"MAIL FROM:<user1@{DOMAIN}>\r\nRCPT TO:<user3@{DOMAIN}>\r\nDATA\r\n")
        assert [r[0] for r in c.replies(3)] == [250, 250, 354]
        c.send("Subject: traceable\r\n\r\nhello\r\n.\r\n")
        assert c.reply()[0] == 250
    finally:
        c.close()
    rows = store.inbox("user3")
    assert rows, "no message for user3"
    body = store.body("user3", rows[-1][0])
    head = body.split(b"\r\n\r\n", 1)[0]
    assert b"(authenticated as user1)" in head and b"with ESMTPA" in head, head


def test_port25_local_sender_needs_login():
    c = SmtpRaw(SMTP_PORT)
    try:
        c.send("EHLO outside.example\r\n")
        assert c.reply()[0] == 250
        code, text = mail_from(c, f"user2@{DOMAIN}")
        assert code == 553 and "5.7.1" in text, (code, text)
        assert mail_from(c, f"postmaster@{DOMAIN.upper()}")[0] == 553
        # strangers' own domains, and bounces, are still welcome
        assert mail_from(c, "friend@example.org")[0] == 250
        assert mail_from(c, "")[0] == 250
    finally:
        c.close()


def test_nul_refused_by_mtad_masked_by_imapd():
    # mtad refuses NUL in DATA and in BDAT (554 5.6.0), as imapd refuses it in a plain
    # APPEND literal; nothing is stored
    before = len(store.inbox("user8"))
    c = SmtpRaw(SMTP_PORT)
    try:
        c.send(f"EHLO n.test\r\nMAIL FROM:<n@example.org>\r\nRCPT TO:<user8@{DOMAIN}>\r\n"
               "DATA\r\n")
        assert [r[0] for r in c.replies(4)] == [250, 250, 250, 354]
        c.send(b"Subject: nul\r\n\r\nbefore\x00after\r\n.\r\n")
        code, text = c.reply()
        assert code == 554 and "5.6.0" in text, (code, text)
        body = b"Subject: nul2\r\n\r\nx\x00y\r\n"
        c.send(f"MAIL FROM:<n@example.org>\r\nRCPT TO:<user8@{DOMAIN}>\r\n"
               f"BDAT {len(body)} LAST\r\n".encode() + body)
        got = c.replies(3)
        assert [r[0] for r in got] == [250, 250, 554] and "5.6.0" in got[2][1], got
    finally:
        c.close()
    assert len(store.inbox("user8")) == before
    # a message APPENDed as literal8 may hold NUL: BINARY[] gives it back in a literal8,
    # BODY[] in a plain literal, where NUL cannot be, with each NUL sent as 0x80
    msg = b"Subject: bin\r\n\r\nab\x00cd\r\n"
    r = Imap()
    try:
        assert r.cmd("l", "LOGIN user8 user8").startswith("l OK")
        r.s.sendall(b"a APPEND INBOX ~{%d}\r\n" % len(msg))
        assert r.line().startswith("+")
        r.s.sendall(msg + b"\r\n")
        assert r.line().startswith("a OK"), "APPEND of a literal8"
        assert r.cmd("s", "SELECT INBOX").startswith("s OK")
        r.s.sendall(b"f FETCH 1 (BODY.PEEK[] BINARY.PEEK[])\r\n")
        raw = b""
        while b"\r\nf OK" not in raw and not raw.startswith(b"f "):
            chunk = r.s.recv(65536)
            assert chunk, raw
            raw += chunk
    finally:
        r.close()
    plain = msg.replace(b"\x00", b"\x80")
    assert b"BODY[] {%d}\r\n%s" % (len(msg), plain) in raw, raw
    assert b"BINARY[] ~{%d}\r\n%s" % (len(msg), msg) in raw, raw


def main():
    def body():
        mtad.start()
        imapd.start()
        wait_workers_ready(mtad, "mtad", 2)
        wait_workers_ready(imapd, "imapd", 2)
        return run_tests([test_sasl_plain_one_decoder,
                          test_good_logins_do_not_reset_the_victims_count,
                          test_parallel_guesses_are_spaced,
                          test_guesses_from_many_addresses_and_the_users_own_client,
                          test_unauth_sessions_per_address_capped,
                          test_login_is_a_deadline_not_idle_time,
                          test_transaction_and_data_are_deadlines,
                          test_sender_bound_to_the_login, test_received_names_the_login,
                          test_port25_local_sender_needs_login,
                          test_nul_refused_by_mtad_masked_by_imapd])
    return run_main(body, TMP, [mtad, imapd], tail=6000)


if __name__ == "__main__":
    sys.exit(main())
