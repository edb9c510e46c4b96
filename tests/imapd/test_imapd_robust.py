"""imapd end to end: bad input (the session goes on, too many errors end it with BYE, the
daemon stays up), two sessions on one mailbox, mail delivered by another process (as mtad
does), IDLE woken by a delivery (its continuation before the news, and a delivery while the
idler's output is full comes once it drains), and output back-pressure with a reader that
stops reading.

Usage: test_imapd_robust.py IMAPD_BINARY DELIVER_BINARY"""
import os
import fcntl
import socket
import struct
import sys
import termios
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import IMAP_PASSWORD as PASSWORD, Imapd, ImapRaw as Raw  # noqa: E402
from heronlib import children as worker_pids  # noqa: E402
from heronlib import (after_test, assert_eq, assert_gt, assert_lt, assert_raises,  # noqa: E402
                      run_suite, run_tests)
from messages import SIMPLE  # noqa: E402

D = None  # the imapd the running tests talk to
LIMITS = "max_connections_per_user = 2\nmax_connections_per_ip = 4\nlogin_timeout = 1s\n"


def test_errors_then_session_goes_on():
    r = D.raw()
    r.cmd("s", "SELECT INBOX")
    r.send("a1 NOOP " + "x" * 70000 + "\r\n")
    assert_eq(r.line(), "a1 BAD Command line too long")
    assert_eq(r.cmd("a2", "NOOP"), ["a2 OK Completed"])
    assert_eq(r.cmd("a3", "LOGIN {99999999}"), ["a3 BAD Literal too large"])
    assert_eq(r.cmd("a4", "FETCH 1 (FLAGS"),
              ["a4 BAD Unbalanced parentheses: missing ')'"])
    assert_eq(r.cmd("a5", "FETCH 1 FLAGS)"),
              ["a5 BAD Unbalanced parentheses: unexpected ')'"])
    for bad in ["1:", "*:*:1", "1,,2", "0", "-1", "4294967296", "a"]:
        assert_eq(r.cmd("a6", "UID FETCH %s FLAGS" % bad),
                  ["a6 BAD Invalid sequence set"], bad)
        assert_eq(r.cmd("a6", "NOOP"), ["a6 OK Completed"])  # not 10 in a row
    assert_eq(r.cmd("a7", "NOOP"), ["a7 OK Completed"])
    r.send(b"\xff\xfe\x00garbage\r\n")
    assert_eq(r.line(), "* BAD Invalid tag")
    r.send(b"a8 NO\xc3\xa9OP\r\n")
    assert_eq(r.line(), "a8 BAD 8-bit data outside a string")
    assert_eq(r.cmd("a9", "SELECT \"caf\xc3\xa9\""),
              ["a9 NO Mailbox name is not valid modified UTF-7"])
    assert_eq(r.cmd("b1", "FOO"), ["b1 BAD Unknown command"])
    assert_eq(r.cmd("b2", "UID NOOP"), ["b2 BAD Unknown UID command"])
    assert_eq(r.cmd("b3", 'LOGIN "a\\qb" c'), ["b3 BAD Bad escape in quoted string"])
    assert_eq(r.cmd("b4", "X " + "(" * 40 + ")" * 40),
              ["b4 BAD Lists nested too deeply"])
    assert_eq(r.cmd("b5", "NOOP"), ["b5 OK Completed"])


def test_too_many_errors_bye():
    r = D.raw(login=False)
    for i in range(9):
        assert_eq(r.cmd("t%d" % i, "BOGUS"), ["t%d BAD Unknown command" % i])
    r.send("t9 BOGUS\r\n")
    assert_eq(r.line(), "t9 BAD Unknown command")
    assert_eq(r.line(), "* BYE Too many invalid commands")
    with assert_raises(EOFError):
        r.line()
    # the daemon is still there for others
    r2 = D.raw()
    assert_eq(r2.cmd("x", "NOOP"), ["x OK Completed"])


def test_non_sync_literal_refused_is_skipped():
    r = D.raw()
    r.send("a APPEND INBOX {99999999999+}\r\n")
    assert_eq(r.line(), "a NO [TOOBIG] Message too large")
    r.close()  # the client would have to send 93 GB: it just goes away
    r2 = D.raw()
    assert_eq(r2.cmd("b", "NOOP"), ["b OK Completed"])


def test_disconnect_mid_literal():
    r = D.raw()
    r.send("a APPEND INBOX {100000+}\r\n" + "x" * 5000)
    r.close()
    r2 = D.raw()
    out = r2.cmd("b", "STATUS INBOX (MESSAGES)")
    assert_eq(out[-1], "b OK STATUS completed")


def test_two_sessions():
    a = D.raw("bob")
    b = D.raw("bob")
    b.cmd("c", "CREATE Shared")
    a.cmd("s", "SELECT Shared")
    b.cmd("s", "SELECT Shared")
    b.send(b"ap APPEND Shared {%d+}\r\n" % len(SIMPLE) + SIMPLE + b"\r\n")
    out = b.until_tag("ap")
    assert_eq(out[:2], ["* 1 EXISTS", "* 1 RECENT"])
    assert_eq(a.cmd("n", "NOOP"), ["* 1 EXISTS", "n OK Completed"])
    b.cmd("st", "STORE 1 +FLAGS.SILENT (\\Flagged)")
    assert_eq(a.cmd("n", "NOOP"), ["* 1 FETCH (FLAGS (\\Flagged))", "n OK Completed"])
    b.cmd("st", "STORE 1 +FLAGS.SILENT (\\Deleted)")
    assert_eq(b.cmd("ex", "EXPUNGE"), ["* 1 EXPUNGE", "ex OK EXPUNGE completed"])
    # no EXPUNGE during FETCH: the message is still number 1 for a, its data gone
    assert_eq(a.cmd("f", "FETCH 1 UID"), ["f OK Fetch completed"])
    assert_eq(a.cmd("n", "NOOP"), ["* 1 EXPUNGE", "n OK Completed"])
    assert_eq(a.cmd("n2", "NOOP"), ["n2 OK Completed"])


def test_delivered_mail_appears():
    a = D.raw()
    out = a.cmd("s", "SELECT INBOX")
    n = int([x for x in out if x.endswith(" EXISTS")][0].split()[1])
    uid = D.deliver("alice", SIMPLE)
    assert_gt(uid, 0)
    assert_eq(a.cmd("n", "NOOP"), ["* %d EXISTS" % (n + 1), "* 1 RECENT",
                                   "n OK Completed"])
    out = a.cmd("f", "UID FETCH %d (FLAGS BODY.PEEK[HEADER.FIELDS (Subject)])" % uid)
    assert_eq(out, ["* %d FETCH (UID %d FLAGS (\\Recent) BODY[HEADER.FIELDS "
                    "(Subject)] {24}\r\nSubject: Lunch plans\r\n\r\n)" % (n + 1, uid),
                    "f OK Fetch completed"])


def test_idle_woken_by_delivery():
    a = D.raw("bob")
    a.cmd("s", "SELECT INBOX")
    out = a.cmd("s2", "SELECT INBOX")
    n = int([x for x in out if x.endswith(" EXISTS")][0].split()[1])
    a.send("i IDLE\r\n")
    assert_eq(a.line(), "+ idling")
    D.deliver("bob", SIMPLE)
    a.s.settimeout(10)  # a bound, not a timing assertion: the push comes within a second
    assert_eq(a.line(), "* %d EXISTS" % (n + 1))
    assert_eq(a.line(), "* 1 RECENT")
    a.send("DONE\r\n")
    assert_eq(a.line(), "i OK IDLE terminated")
    assert_eq(a.cmd("n", "NOOP"), ["n OK Completed"])


def test_idle_continuation_before_news():
    """Mail delivered after the last command but before IDLE: "+ idling" comes first, then
    the EXISTS, so that a client that leaves IDLE on news once it is idling sees it (#25:
    mailload's probe, given the EXISTS before the "+", waited for its 2 s timer)."""
    a = D.raw("bob")
    out = a.cmd("s", "SELECT INBOX")
    n = int([x for x in out if x.endswith(" EXISTS")][0].split()[1])
    D.deliver("bob", SIMPLE)
    a.send("i IDLE\r\n")
    a.s.settimeout(10)  # a bound, not a timing assertion
    assert_eq(a.line(), "+ idling")
    assert_eq(a.line(), "* %d EXISTS" % (n + 1))
    assert_eq(a.line(), "* 1 RECENT")
    a.send("DONE\r\n")
    assert_eq(a.line(), "i OK IDLE terminated")
    assert_eq(a.cmd("n", "NOOP"), ["n OK Completed"])


def slow_raw(user):
    """An ImapRaw whose socket takes little before the server's output backs up."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window
    s.settimeout(20)
    s.connect(("127.0.0.1", D.port))
    r = Raw.__new__(Raw)
    r.s, r.buf = s, b""
    after_test(r.close)
    r.greeting = r.line()
    assert r.cmd("L", 'LOGIN %s "%s"' % (user, PASSWORD))[-1].startswith("L OK")
    return r


def test_idle_change_while_output_full():
    """A delivery while an idler's output is full (a flag burst it does not read yet) is not
    lost: its EXISTS comes when the output drains, with no further change to wake it (#23:
    the wake-up skipped the full session and the drain synced nothing)."""
    b = D.raw("bob")
    b.cmd("c", "CREATE Burst")
    msg = b"Subject: m\r\n\r\nx\r\n"
    n = 0
    for _ in range(10):  # 500 messages, 50 an APPEND (IMAP_APPEND_MAX is 64)
        b.send(b"a APPEND Burst" + b"".join(b" {%d+}\r\n" % len(msg) + msg
                                             for _ in range(50)) + b"\r\n")
        out = b.until_tag("a")
        assert out[-1].startswith("a OK"), out[-1]
        n += 50
    a = slow_raw("bob")
    a.cmd("s", "SELECT Burst")
    a.send("i IDLE\r\n")
    assert_eq(a.line(), "+ idling")
    # about 6 KiB of FETCH a message, 3 MiB in all: far beyond the sockets' buffers, so the
    # idler's output stays full until it reads
    kws = " ".join("k%02d" % i + "x" * 90 for i in range(60))
    b.cmd("s", "SELECT Burst")
    assert_eq(b.cmd("f", "STORE 1:* +FLAGS.SILENT (%s)" % kws)[-1], "f OK STORE completed")
    waited = 0
    while struct.unpack("i", fcntl.ioctl(a.s, termios.FIONREAD, b"\0" * 4))[0] == 0:
        assert_lt(waited, 200, "the flag burst never reached the idler")  # a bound
        time.sleep(0.05)
        waited += 1
    D.deliver("bob", SIMPLE, "Burst")  # the idler's output is full now
    a.s.settimeout(10)  # a bound, not a timing assertion: nothing else will wake it
    fetches = 0
    while True:
        try:
            line = a.line()
        except socket.timeout:
            raise AssertionError("no EXISTS after %d of %d FETCH" % (fetches, n)) from None
        if line.endswith(" EXISTS"):
            break
        assert "FETCH" in line or line.startswith("* FLAGS") or line.startswith("* OK"), line
        fetches += "FETCH" in line
    assert_eq(line, "* %d EXISTS" % (n + 1))
    assert_eq(fetches, n)
    a.send("DONE\r\n")
    assert_eq(a.until_tag("i")[-1], "i OK IDLE terminated")


def test_caps_and_login_timeout():
    a, b = Raw(D.port), Raw(D.port)
    after_test(a.close)
    after_test(b.close)
    for r in (a, b):
        assert r.cmd("l", 'LOGIN alice "%s"' % PASSWORD)[-1].startswith("l OK")
    c = Raw(D.port)
    after_test(c.close)
    assert_eq(c.cmd("l", 'LOGIN alice "%s"' % PASSWORD),
              ["l NO [LIMIT] Too many sessions for this user"])
    assert c.cmd("m", 'LOGIN bob "%s"' % PASSWORD)[-1].startswith("m OK")
    # a fifth connection from 127.0.0.1 is turned away at once
    d = socket.create_connection(("127.0.0.1", D.port), timeout=10)
    after_test(d.close)
    e = socket.create_connection(("127.0.0.1", D.port), timeout=10)
    after_test(e.close)
    data = b""
    while not data.endswith(b"\r\n"):
        chunk = e.recv(4096)
        if not chunk:
            break
        data += chunk
    assert_eq(data, b"* BYE Too many connections from your address\r\n")
    # d never logs in: after login_timeout it is told so and closed (bounded wait)
    d.settimeout(15)
    got = b""
    while True:
        chunk = d.recv(4096)
        if not chunk:
            break
        got += chunk
    assert got.endswith(b"* BYE Autologout; not logged in in time\r\n"), got


def test_sigterm_says_bye():
    with Imapd(IMAPD, deliver=DELIVER) as d:
        a, b = Raw(d.port), Raw(d.port)
        after_test(a.close)
        after_test(b.close)
        a.cmd("l", 'LOGIN alice "%s"' % PASSWORD)
        b.cmd("l", 'LOGIN bob "%s"' % PASSWORD)
        b.cmd("s", "SELECT INBOX")
        b.send("i IDLE\r\n")
        assert_eq(b.line(), "+ idling")
        d.proc.terminate()
        for r in (a, b):
            r.s.settimeout(15)
            assert_eq(r.line(), "* BYE Server shutting down")
            with assert_raises(EOFError):
                r.line()
        assert_eq(d.proc.wait(timeout=30), 0)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_slow_reader_big_fetch():
    size = 24 * 1024 * 1024
    body = b"Subject: big\r\n\r\n" + (b"0123456789abcdef" * 4 + b"\r\n") * (size // 66)
    r = D.raw("bob")
    r.cmd("c", "CREATE Big")
    r.send(b"a APPEND Big {%d+}\r\n" % len(body))
    r.s.sendall(body + b"\r\n")
    assert r.until_tag("a")[-1].startswith("a OK [APPENDUID")
    r.cmd("s", "SELECT Big")
    workers = worker_pids(D.proc.pid)
    assert_eq(len(workers), 1)
    before = rss_kib(workers[0])
    r.send("f FETCH 1 BODY.PEEK[]\r\n")
    time.sleep(1.0)  # let the worker fill what it may; memory must stay bounded
    grown = rss_kib(workers[0]) - before
    assert_lt(grown, 8 * 1024, "worker grew %d KiB for a 24 MiB body" % grown)
    first = r.line()
    assert_eq(first, "* 1 FETCH (BODY[] {%d}" % len(body))
    assert_eq(r.read(len(body)), body)
    assert_eq(r.line(), ")")
    assert_eq(r.line(), "f OK Fetch completed")


def main():
    global D, IMAPD, DELIVER
    IMAPD, DELIVER = sys.argv[1], sys.argv[2]
    rc = 0
    for extra, tests in [
            ("", [test_errors_then_session_goes_on, test_too_many_errors_bye,
                  test_non_sync_literal_refused_is_skipped, test_disconnect_mid_literal]),
            ("", [test_two_sessions, test_delivered_mail_appears, test_idle_woken_by_delivery,
                  test_idle_continuation_before_news, test_idle_change_while_output_full]),
            (LIMITS, [test_caps_and_login_timeout]),
            ("", [test_slow_reader_big_fetch])]:
        D = Imapd(IMAPD, deliver=DELIVER, extra=extra)  # each group on a fresh imapd
        rc |= run_suite(D, tests, D.dir)
    return rc | run_tests([test_sigterm_says_bye])  # its own imapd


if __name__ == "__main__":
    sys.exit(main())
