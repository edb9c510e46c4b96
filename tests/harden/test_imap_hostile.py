"""Hostile IMAP clients against the real imapd: a client that leaves IDLE with a
partial line, slow-loris and half-open connections, the per-address and total connection
limits, overlong lines and literals, huge APPENDs, failed logins logged, and mailbox-name
tricks that try to reach another user's mail. Every test asserts what the server answers and
that others are still served; the held reply of a failed login is checked by order and by the
delay the log states (the time it took is only printed). Each group of tests has an imapd of
its own (one worker: anything that stalls it stalls every session, which is what we look
for).

Usage: test_imap_hostile.py IMAPD_BINARY DELIVER_BINARY"""
import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "imapd"))
from heronlib import (IMAP_PASSWORD as PASSWORD, Imapd, ImapRaw as Raw,  # noqa: E402
                      after_test, assert_eq, assert_ge, assert_in, assert_not_in, assert_re,
                      root_warning_count, run_suite, wait_for)
from messages import SIMPLE  # noqa: E402

IMAPD = DELIVER = None
D = None  # the imapd of the running group


def raw(user="alice", login=True, timeout=20):
    r = Raw(D.port, timeout=timeout)
    after_test(r.close)
    if login:
        assert r.cmd("L", 'LOGIN %s "%s"' % (user, PASSWORD))[-1].startswith("L OK")
    return r


def assert_served():
    """A fresh client logs in and gets an answer: the worker is not stuck."""
    r = raw(timeout=10)
    assert_eq(r.cmd("n", "NOOP")[-1], "n OK Completed")


# 100 quiet connections not logged in: more than the default per-address cap on those
STALLS = "max_unauth_connections_per_ip = 200"


def test_idle_partial_done_does_not_spin():
    # Regression (found by fuzz_imap_session): a partial line during IDLE made the worker
    # loop forever, so no other session was served.
    r = raw()
    r.send("i IDLE\r\n")
    assert r.line().startswith("+")
    r.send("DO")
    assert_served()
    r.send("NE\r\n")
    assert_eq(r.until_tag("i")[-1], "i OK IDLE terminated")
    assert_eq(r.cmd("n", "NOOP")[-1], "n OK Completed")


def test_slow_loris_and_half_open():
    # 100 connections that send nothing or half a line, and one that sends a byte at a
    # time, while others log in and work.
    quiet = []
    try:
        for i in range(100):
            s = socket.create_connection(("127.0.0.1", D.port), timeout=10)
            if i % 2:
                s.sendall(b"h%d LOGIN alice" % i)
            quiet.append(s)
        slow = Raw(D.port)
        after_test(slow.close)
        line = b'x LOGIN alice "%s"\r\n' % PASSWORD.encode()
        for k, b in enumerate(line):
            slow.send(bytes([b]))
            if k % 8 == 0:
                assert_served()
            time.sleep(0.02)
        assert slow.until_tag("x")[-1].startswith("x OK")
    finally:
        for s in quiet:
            s.close()
    assert_served()


def test_overlong_and_huge_literals():
    r = raw()
    r.send("a1 NOOP " + "x" * 100000 + "\r\n")
    assert_eq(r.line(), "a1 BAD Command line too long")
    assert_eq(r.cmd("a2", "NOOP")[-1], "a2 OK Completed")
    # a synchronizing literal too large is refused before any data is sent
    assert_eq(r.cmd("a3", "SELECT {99999999999}")[-1], "a3 BAD Literal too large")
    # a non-synchronizing one is skipped with its line: the session goes on
    r.send("a4 SELECT {200000+}\r\n" + "y" * 200000 + "\r\n")
    assert r.until_tag("a4")[-1].startswith("a4 BAD")
    assert_eq(r.cmd("a5", "NOOP")[-1], "a5 OK Completed")
    # APPEND larger than max_append_size: refused before the data (no '+')
    out = r.cmd("a6", "APPEND INBOX {99999999999}")
    assert_re(out[-1], r"^a6 (NO|BAD) ")
    assert not any(x.startswith("+") for x in out), out
    st = r.cmd("a7", "STATUS INBOX (MESSAGES)")
    assert_in("(MESSAGES 0)", st[0])
    assert_served()


def test_refused_nonsync_literal_never_runs_as_commands():
    # An APPEND whose {n+} size cannot be read (or is too large to skip) is answered BAD
    # and the connection closed (RFC 7888 4): the literal's bytes, sent without waiting,
    # are never read as the commands they look like.
    a = raw()
    assert a.cmd("c", "CREATE victimbox")[-1].startswith("c OK")
    for size in ("99999999999999999999", "9999999999999999"):
        r = raw()
        r.send("a APPEND INBOX {%s+}\r\nb DELETE victimbox\r\nc LOGOUT\r\n" % size)
        out = []
        try:
            while True:
                out.append(r.line())
        except (EOFError, OSError):
            pass
        assert_re(out[0] if out else "", r"^a (BAD|NO) ", out)
        assert_in("* BYE Cannot skip the literal data", out, out)
        assert not [x for x in out if x.startswith(("b ", "c "))], out
    # a line dropped for its length that ends in {n+}: the literal's data is dropped
    # with it
    r = raw()
    r.send("a1 NOOP " + "x" * 70000 + " {18+}\r\nb1 DELETE victimbox\r\n\r\n")
    assert_eq(r.line(), "a1 BAD Command line too long")
    assert_eq(r.cmd("a2", "NOOP")[-1], "a2 OK Completed")
    # a refused {n+} of a size the server skips: its data is read and dropped
    r.send("a3 APPEND nosuchbox {20+}\r\nb3 DELETE victimbox\r\n\r\n")
    assert r.until_tag("a3")[-1].startswith("a3 NO")
    assert_eq(r.cmd("a4", "NOOP")[-1], "a4 OK Completed")
    out = a.cmd("l", 'LIST "" victimbox')
    assert [x for x in out if x.startswith("* LIST") and "victimbox" in x], out
    assert_not_in("b DELETE", D.logtext())


def test_root_warning_once():
    # started as root with [imapd] user empty: the master warns, once (not per worker)
    assert_eq(root_warning_count(D, "imapd"), 1 if os.geteuid() == 0 else 0,
              D.logtext()[:2000])


def test_failed_logins_are_refused_and_logged():
    raw()  # a success from this address forgets its earlier failures
    r = raw(login=False)
    for i in range(3):
        out = r.cmd("b%d" % i, 'LOGIN alice "wrong%d"' % i)
        assert out[-1].startswith("b%d NO" % i), out
    # the right password still works afterwards on a fresh connection
    assert_served()
    log = D.logtext()
    fails = [x for x in log.splitlines()
             if " imap login " in x and "result=ok" not in x]
    assert_ge(len(fails), 3, log)
    assert_in("user=alice ", fails[-1])
    assert_not_in("wrong0", log)  # never the password


def test_failed_login_reply_is_held():
    raw()  # a success from this address forgets its earlier failures
    r = raw(login=False)
    for i in range(2):
        assert r.cmd("w%d" % i, 'LOGIN alice "bad%d"' % i)[-1].startswith("w%d NO" % i)
    # the third failure's NO waits 2 s; a NOOP pipelined behind it is read only after
    # the NO (the session takes no command meanwhile), and others are served meanwhile
    start = time.monotonic()
    r.send('w2 LOGIN alice "bad2"\r\nn NOOP\r\n')
    # the failure is logged (with the delay) when the directory answers, before the NO
    def third_failure():
        lines = [x for x in D.logtext().splitlines() if " imap login " in x]
        return lines[-1] if lines and "failures=3 " in lines[-1] else None
    last = wait_for(third_failure, 20, "the third failed LOGIN in the log")
    assert_in("user=alice ", last)
    assert_in("failures=3 delay_ms=2000 ", last)
    assert_served()  # the worker is not blocked by the held reply
    assert r.line().startswith("w2 NO [AUTHENTICATIONFAILED]")
    held = time.monotonic() - start
    assert_eq(r.line(), "n OK Completed")
    print("third failed LOGIN answered after %.2f s" % held)  # printed, not asserted
    # a name with control characters and quotes is logged sanitized and capped
    assert r.cmd("z", 'LOGIN {7}\r\nx\x1b"y\\z\x7f "p"')[-1].startswith("z NO")
    last = [x for x in D.logtext().splitlines() if " imap login " in x][-1]
    assert_in("user=x??y?z? ", last)
    long_name = "u" * 300
    assert r.cmd("y", 'LOGIN %s "p"' % long_name)[-1].startswith("y NO")
    last = [x for x in D.logtext().splitlines() if " imap login " in x][-1]
    assert_in("user=" + "u" * 61 + "... ", last)


def refused():
    """A new connection's first line; the server must close it right after."""
    r = Raw(D.port, timeout=20)
    after_test(r.close)
    assert_eq(r.buf + r.s.recv(4096), b"")  # nothing more, and closed
    return r.greeting


def assert_served_again():
    # a slot is free again (the close is seen asynchronously: retry a few times)
    for _ in range(200):
        r = Raw(D.port, timeout=10)
        after_test(r.close)
        if r.greeting.startswith("* OK"):
            break
        time.sleep(0.1)
    assert r.greeting.startswith("* OK"), r.greeting


def test_fifth_connection_refused_with_bye():
    held = [raw(login=False) for _ in range(4)]
    assert_eq(refused(), "* BYE Too many connections from your address")
    held[0].close()
    assert_served_again()


def test_fourth_connection_not_logged_in_refused():
    held = [raw(login=False) for _ in range(3)]
    assert_eq(refused(), "* BYE Too many connections not logged in from your address")
    # a connection that logs in no longer counts: another may come
    assert held[0].cmd("L", 'LOGIN alice "%s"' % PASSWORD)[-1].startswith("L OK")
    assert_served_again()
    assert_in('reason="too many connections not logged in from address"', D.logtext())


def test_over_the_cap_is_refused_then_served():
    # At the cap a client is answered BYE and closed at once (not left waiting in the
    # backlog); once a connection ends, new clients are served again.
    held = [raw(login=False) for _ in range(5)]
    assert_eq(refused(), "* BYE Too many connections")
    held[0].close()
    assert_served_again()


TRICKS = ["../bob/INBOX", "../bob", "..", "../../store", "/bob/INBOX", "/INBOX", "~bob",
          "~bob/INBOX", "~/INBOX", "#users/bob/INBOX", "bob/INBOX", "%", "*", "INBOX/*",
          "&AC4ALgAv-bob/INBOX", "&AH4-bob/INBOX", "..%2fbob", "INBOX/../../bob/INBOX",
          "\\\\bob\\INBOX", "Other Users/bob/INBOX", "user.bob", "&-&-/bob"]


def quote(name):
    return '"%s"' % name.replace("\\", "\\\\")


def test_other_users_mail_unreachable():
    b = raw("bob")  # the first login creates the user in the store
    a = raw("alice")
    D.deliver("bob", SIMPLE.replace(b"Subject: ", b"Subject: bob-secret ", 1))
    D.deliver("alice", SIMPLE)
    for name in TRICKS:
        q = quote(name)
        for cmd in ["SELECT", "EXAMINE"]:
            out = a.cmd("t", "%s %s" % (cmd, q))
            if out[-1].startswith("t OK"):
                got = a.cmd("f", "FETCH 1:* (BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
                assert_not_in("bob-secret", "\n".join(got), (cmd, name))
            a.cmd("u", "UNSELECT")
        out = a.cmd("t", "STATUS %s (MESSAGES)" % q)
        assert not (out[-1].startswith("t OK") and "MESSAGES 0" not in out[0]
                    and name not in ("/INBOX", "INBOX/*")), (name, out)
        # LIST with a tricky reference or pattern shows only names of alice's own
        # (a CREATE of "../bob/INBOX" made alice a parent mailbox "../bob", say)
        mine = [x for x in a.cmd("l", 'LIST "" "*"') if x.startswith("* LIST")]
        for ref, pat in [('""', q), (q, '"*"'), (q, '"%"')]:
            out = a.cmd("l", "LIST %s %s" % (ref, pat))
            assert out[-1].startswith("l "), out
            listed = [x for x in out if x.startswith("* LIST")]
            assert set(listed) <= set(mine), (ref, pat, listed, mine)
        # names alice may create live in her own namespace and go away with DELETE
        out = a.cmd("c", "CREATE %s" % q)
        if out[-1].startswith("c OK"):
            assert a.cmd("d", "DELETE %s" % q)[-1].startswith("d OK"), name
    # COPY of alice's mail into a tricky name never lands in bob's INBOX
    assert a.cmd("s", "SELECT INBOX")[-1].startswith("s OK")
    for name in TRICKS:
        a.cmd("c", "COPY 1:* %s" % quote(name))
    assert_in("* 1 EXISTS", b.cmd("s", "EXAMINE INBOX"))
    out = b.cmd("f", "FETCH 1 (BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
    assert_in("bob-secret", "\n".join(out))
    # mailbox names never reach the filesystem
    for root, dirs, files in os.walk(D.store):
        for n in dirs + files:
            assert_not_in("bob", n)
            assert_not_in("..", n)


def main():
    global D, IMAPD, DELIVER
    IMAPD, DELIVER = sys.argv[1], sys.argv[2]
    rc = 0
    for extra, tests in [
            (STALLS, [test_idle_partial_done_does_not_spin, test_slow_loris_and_half_open,
                      test_overlong_and_huge_literals,
                      test_refused_nonsync_literal_never_runs_as_commands,
                      test_root_warning_once, test_failed_logins_are_refused_and_logged,
                      test_failed_login_reply_is_held]),
            ("max_connections_per_ip = 4", [test_fifth_connection_refused_with_bye]),
            ("max_unauth_connections_per_ip = 3",
             [test_fourth_connection_not_logged_in_refused]),
            ("max_connections = 5", [test_over_the_cap_is_refused_then_served]),
            ("", [test_other_users_mail_unreachable])]:
        D = Imapd(IMAPD, deliver=DELIVER, workers=1, extra=extra)  # each group its own
        rc |= run_suite(D, tests, D.dir)
    return rc


if __name__ == "__main__":
    sys.exit(main())
