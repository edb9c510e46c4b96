"""imapd end to end: bad input (the session goes on, too many errors end it with BYE, the
daemon stays up), two sessions on one mailbox, mail delivered by another process (as mtad
does), IDLE woken by a delivery, and output back-pressure with a reader that stops reading.

Usage: test_imapd_robust.py IMAPD_BINARY DELIVER_BINARY"""
import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import IMAP_PASSWORD as PASSWORD, Imapd, ImapRaw as Raw  # noqa: E402
from heronlib import children as worker_pids  # noqa: E402
from messages import SIMPLE  # noqa: E402

IMAPD = DELIVER = None


class Base(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.d = Imapd(IMAPD, deliver=DELIVER)
        cls.d.__enter__()
        cls.addClassCleanup(cls.d.__exit__, None, None, None)

    def raw(self, user="alice", login=True):
        r = Raw(self.d.port)
        self.addCleanup(r.close)
        if login:
            self.assertTrue(r.cmd("L", 'LOGIN %s "%s"' % (user, PASSWORD))[-1].startswith("L OK"))
        return r


class TestBadInput(Base):
    def test_errors_then_session_goes_on(self):
        r = self.raw()
        r.cmd("s", "SELECT INBOX")
        r.send("a1 NOOP " + "x" * 70000 + "\r\n")
        self.assertEqual(r.line(), "a1 BAD Command line too long")
        self.assertEqual(r.cmd("a2", "NOOP"), ["a2 OK Completed"])
        self.assertEqual(r.cmd("a3", "LOGIN {99999999}"), ["a3 BAD Literal too large"])
        self.assertEqual(r.cmd("a4", "FETCH 1 (FLAGS"),
                         ["a4 BAD Unbalanced parentheses: missing ')'"])
        self.assertEqual(r.cmd("a5", "FETCH 1 FLAGS)"),
                         ["a5 BAD Unbalanced parentheses: unexpected ')'"])
        for bad in ["1:", "*:*:1", "1,,2", "0", "-1", "4294967296", "a"]:
            self.assertEqual(r.cmd("a6", "UID FETCH %s FLAGS" % bad),
                             ["a6 BAD Invalid sequence set"], bad)
            self.assertEqual(r.cmd("a6", "NOOP"), ["a6 OK Completed"])  # not 10 in a row
        self.assertEqual(r.cmd("a7", "NOOP"), ["a7 OK Completed"])
        r.send(b"\xff\xfe\x00garbage\r\n")
        self.assertEqual(r.line(), "* BAD Invalid tag")
        r.send(b"a8 NO\xc3\xa9OP\r\n")
        self.assertEqual(r.line(), "a8 BAD 8-bit data outside a string")
        self.assertEqual(r.cmd("a9", "SELECT \"caf\xc3\xa9\""),
                         ["a9 NO Mailbox name is not valid modified UTF-7"])
        self.assertEqual(r.cmd("b1", "FOO"), ["b1 BAD Unknown command"])
        self.assertEqual(r.cmd("b2", "UID NOOP"), ["b2 BAD Unknown UID command"])
        self.assertEqual(r.cmd("b3", 'LOGIN "a\\qb" c'), ["b3 BAD Bad escape in quoted string"])
        self.assertEqual(r.cmd("b4", "X " + "(" * 40 + ")" * 40),
                         ["b4 BAD Lists nested too deeply"])
        self.assertEqual(r.cmd("b5", "NOOP"), ["b5 OK Completed"])

    def test_too_many_errors_bye(self):
        r = self.raw(login=False)
        for i in range(9):
            self.assertEqual(r.cmd("t%d" % i, "BOGUS"), ["t%d BAD Unknown command" % i])
        r.send("t9 BOGUS\r\n")
        self.assertEqual(r.line(), "t9 BAD Unknown command")
        self.assertEqual(r.line(), "* BYE Too many invalid commands")
        with self.assertRaises(EOFError):
            r.line()
        # the daemon is still there for others
        r2 = self.raw()
        self.assertEqual(r2.cmd("x", "NOOP"), ["x OK Completed"])

    def test_non_sync_literal_refused_is_skipped(self):
        r = self.raw()
        r.send("a APPEND INBOX {99999999999+}\r\n")
        self.assertEqual(r.line(), "a NO [TOOBIG] Message too large")
        r.close()  # the client would have to send 93 GB: it just goes away
        r2 = self.raw()
        self.assertEqual(r2.cmd("b", "NOOP"), ["b OK Completed"])

    def test_disconnect_mid_literal(self):
        r = self.raw()
        r.send("a APPEND INBOX {100000+}\r\n" + "x" * 5000)
        r.close()
        r2 = self.raw()
        out = r2.cmd("b", "STATUS INBOX (MESSAGES)")
        self.assertEqual(out[-1], "b OK STATUS completed")


class TestConcurrency(Base):
    def test_two_sessions(self):
        a = self.raw("bob")
        b = self.raw("bob")
        b.cmd("c", "CREATE Shared")
        a.cmd("s", "SELECT Shared")
        b.cmd("s", "SELECT Shared")
        b.send(b"ap APPEND Shared {%d+}\r\n" % len(SIMPLE) + SIMPLE + b"\r\n")
        out = b.until_tag("ap")
        self.assertEqual(out[:2], ["* 1 EXISTS", "* 1 RECENT"])
        self.assertEqual(a.cmd("n", "NOOP"), ["* 1 EXISTS", "n OK Completed"])
        b.cmd("st", "STORE 1 +FLAGS.SILENT (\\Flagged)")
        self.assertEqual(a.cmd("n", "NOOP"), ["* 1 FETCH (FLAGS (\\Flagged))", "n OK Completed"])
        b.cmd("st", "STORE 1 +FLAGS.SILENT (\\Deleted)")
        self.assertEqual(b.cmd("ex", "EXPUNGE"), ["* 1 EXPUNGE", "ex OK EXPUNGE completed"])
        # no EXPUNGE during FETCH: the message is still number 1 for a, its data gone
        self.assertEqual(a.cmd("f", "FETCH 1 UID"), ["f OK Fetch completed"])
        self.assertEqual(a.cmd("n", "NOOP"), ["* 1 EXPUNGE", "n OK Completed"])
        self.assertEqual(a.cmd("n2", "NOOP"), ["n2 OK Completed"])

    def test_delivered_mail_appears(self):
        a = self.raw()
        out = a.cmd("s", "SELECT INBOX")
        n = int([x for x in out if x.endswith(" EXISTS")][0].split()[1])
        uid = self.d.deliver("alice", SIMPLE)
        self.assertGreater(uid, 0)
        self.assertEqual(a.cmd("n", "NOOP"), ["* %d EXISTS" % (n + 1), "* 1 RECENT",
                                              "n OK Completed"])
        out = a.cmd("f", "UID FETCH %d (FLAGS BODY.PEEK[HEADER.FIELDS (Subject)])" % uid)
        self.assertEqual(out, ["* %d FETCH (UID %d FLAGS (\\Recent) BODY[HEADER.FIELDS "
                               "(Subject)] {24}\r\nSubject: Lunch plans\r\n\r\n)" % (n + 1, uid),
                               "f OK Fetch completed"])

    def test_idle_woken_by_delivery(self):
        a = self.raw("bob")
        a.cmd("s", "SELECT INBOX")
        out = a.cmd("s2", "SELECT INBOX")
        n = int([x for x in out if x.endswith(" EXISTS")][0].split()[1])
        a.send("i IDLE\r\n")
        self.assertEqual(a.line(), "+ idling")
        self.d.deliver("bob", SIMPLE)
        a.s.settimeout(10)  # a bound, not a timing assertion: the push comes within a second
        self.assertEqual(a.line(), "* %d EXISTS" % (n + 1))
        self.assertEqual(a.line(), "* 1 RECENT")
        a.send("DONE\r\n")
        self.assertEqual(a.line(), "i OK IDLE terminated")
        self.assertEqual(a.cmd("n", "NOOP"), ["n OK Completed"])


class TestLimits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        extra = ("max_connections_per_user = 2\nmax_connections_per_ip = 4\n"
                 "login_timeout = 1s\n")
        cls.d = Imapd(IMAPD, deliver=DELIVER, extra=extra)
        cls.d.__enter__()
        cls.addClassCleanup(cls.d.__exit__, None, None, None)

    def test_caps_and_login_timeout(self):
        a, b = Raw(self.d.port), Raw(self.d.port)
        self.addCleanup(a.close)
        self.addCleanup(b.close)
        for r in (a, b):
            self.assertTrue(r.cmd("l", 'LOGIN alice "%s"' % PASSWORD)[-1].startswith("l OK"))
        c = Raw(self.d.port)
        self.addCleanup(c.close)
        self.assertEqual(c.cmd("l", 'LOGIN alice "%s"' % PASSWORD),
                         ["l NO [LIMIT] Too many sessions for this user"])
        self.assertTrue(c.cmd("m", 'LOGIN bob "%s"' % PASSWORD)[-1].startswith("m OK"))
        # a fifth connection from 127.0.0.1 is turned away at once
        d = socket.create_connection(("127.0.0.1", self.d.port), timeout=10)
        self.addCleanup(d.close)
        e = socket.create_connection(("127.0.0.1", self.d.port), timeout=10)
        self.addCleanup(e.close)
        data = b""
        while not data.endswith(b"\r\n"):
            chunk = e.recv(4096)
            if not chunk:
                break
            data += chunk
        self.assertEqual(data, b"* BYE Too many connections from your address\r\n")
        # d never logs in: after login_timeout it is told so and closed (bounded wait)
        d.settimeout(15)
        got = b""
        while True:
            chunk = d.recv(4096)
            if not chunk:
                break
            got += chunk
        self.assertTrue(got.endswith(b"* BYE Autologout; not logged in in time\r\n"), got)


class TestDrain(unittest.TestCase):
    def test_sigterm_says_bye(self):
        with Imapd(IMAPD, deliver=DELIVER) as d:
            a, b = Raw(d.port), Raw(d.port)
            self.addCleanup(a.close)
            self.addCleanup(b.close)
            a.cmd("l", 'LOGIN alice "%s"' % PASSWORD)
            b.cmd("l", 'LOGIN bob "%s"' % PASSWORD)
            b.cmd("s", "SELECT INBOX")
            b.send("i IDLE\r\n")
            self.assertEqual(b.line(), "+ idling")
            d.proc.terminate()
            for r in (a, b):
                r.s.settimeout(15)
                self.assertEqual(r.line(), "* BYE Server shutting down")
                with self.assertRaises(EOFError):
                    r.line()
            self.assertEqual(d.proc.wait(timeout=30), 0)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class TestBackPressure(Base):
    def test_slow_reader_big_fetch(self):
        size = 24 * 1024 * 1024
        body = b"Subject: big\r\n\r\n" + (b"0123456789abcdef" * 4 + b"\r\n") * (size // 66)
        r = self.raw("bob")
        r.cmd("c", "CREATE Big")
        r.send(b"a APPEND Big {%d+}\r\n" % len(body))
        r.s.sendall(body + b"\r\n")
        self.assertTrue(r.until_tag("a")[-1].startswith("a OK [APPENDUID"))
        r.cmd("s", "SELECT Big")
        workers = worker_pids(self.d.proc.pid)
        self.assertEqual(len(workers), 1)
        before = rss_kib(workers[0])
        r.send("f FETCH 1 BODY.PEEK[]\r\n")
        time.sleep(1.0)  # let the worker fill what it may; memory must stay bounded
        grown = rss_kib(workers[0]) - before
        self.assertLess(grown, 8 * 1024, "worker grew %d KiB for a 24 MiB body" % grown)
        first = r.line()
        self.assertEqual(first, "* 1 FETCH (BODY[] {%d}" % len(body))
        self.assertEqual(r.read(len(body)), body)
        self.assertEqual(r.line(), ")")
        self.assertEqual(r.line(), "f OK Fetch completed")


def main():
    global IMAPD, DELIVER
    IMAPD, DELIVER = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])


if __name__ == "__main__":
    main()
