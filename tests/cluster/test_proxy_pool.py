#!/usr/bin/env python3
"""test_proxy_pool.py — the front's pool of store host connections (imapd/imap_proxy.c;
tests/cluster/heroncluster.py: two store hosts and a front imapd, proxy_tls = starttls).
A client's LOGOUT through the front is answered by the front (BYE, tagged OK), the store
host's connection UNAUTHENTICATEd and parked; the next login of a user of that host runs on
it (the store host's log: the same session id unauthenticated, then logged in as the new
user; the front's: leg=reused, and its heron_imap_proxy_logins_total{leg="reused"}), IDLE before the LOGOUT included. Nothing of the first user's
session reaches the second: ENABLE CONDSTORE is news again, no mailbox is selected, and the
store host's log names the second client's address from its own ID. A store host restarted
or killed while connections are parked, a parked connection its store host closes, or one
that sends anything while parked is dropped and the next login dials afresh; a parked
connection that dies only when the next login uses it is replaced by a new one without the
client seeing it; the store host's login_timeout runs from the UNAUTHENTICATE, and its
autologout BYE closes the parked connection. A client's own UNAUTHENTICATE through the front
leaves a connection on which the store host takes only a proxy login (no password login
under an address the client names in an ID), and which the front does not park. With proxy_pool_max = 0 (a SIGHUP) the LOGOUT is the store host's again.

  test_proxy_pool.py SOURCE_ROOT MTAD IMAPD STORE_PEEK"""
import imaplib
import os
import re
import signal
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heroncluster import FRONT_ADDR, Cluster, IMAPFrom, fake_starttls, listener  # noqa: E402
from heronlib import (assert_eq, assert_in, free_port, run_main, run_tests,  # noqa: E402
                      tls_client_ctx, wait_for, write_conf)

ROOT, MTAD, IMAPD, PEEK = sys.argv[1:5]
TMP = tempfile.mkdtemp(prefix="heron-cluster-pool-")
FAKE = "bad.heron.test"
FAKE_ADDR = "127.0.0.5"
METRICS = free_port()  # the front imapd's /metrics


class FakeStore:
    """A store host on FAKE_ADDR speaking just enough IMAP for the front (greeting, STARTTLS,
    ID, AUTHENTICATE, NOOP, UNAUTHENTICATE, LOGOUT). mode, read when a connection is parked
    (its UNAUTHENTICATE answered): "serve" (waits for the next login), "garbage" (sends an
    unsolicited line), "close" (closes it), "die" (closes it when the next login's first
    line comes). conns: connections accepted; events: what it saw, in order."""

    def __init__(self, cert):
        self.srv, self.port = listener(FAKE_ADDR)
        self.srv.settimeout(0.5)
        self.cert = cert
        self.mode = "serve"
        self.conns = 0
        self.events = []
        self.stop = threading.Event()
        self.threads = []
        self.t = threading.Thread(target=self.accept, daemon=True)
        self.t.start()

    def accept(self):
        while not self.stop.is_set():
            try:
                s, _ = self.srv.accept()
            except OSError:
                continue
            self.conns += 1
            t = threading.Thread(target=self.serve, args=(s, self.conns), daemon=True)
            self.threads.append(t)
            t.start()

    def serve(self, s, n):
        try:
            s.settimeout(60)
            f = s.makefile("rb")
            s.sendall(b"* OK fake store host\r\n")
            s, f = fake_starttls(s, f, *self.cert, tag=b"P0")
            with s:
                self.session(s, f, n)
        except (OSError, ValueError):
            pass

    def session(self, s, f, n):
        parked = None
        while (line := f.readline()):
            if parked == "die":
                self.events.append(f"died on reuse {n}")
                return
            parked = None
            tag, _, rest = line.rstrip(b"\r\n").partition(b" ")
            verb = rest.split(b" ")[0].upper()
            if verb == b"ID":
                s.sendall(tag + b" OK ID done\r\n")
            elif verb == b"AUTHENTICATE":
                self.events.append(f"login {n}")
                s.sendall(tag + b" OK [CAPABILITY IMAP4rev1 UNAUTHENTICATE] Logged in\r\n")
            elif verb == b"UNAUTHENTICATE":
                self.events.append(f"unauthenticate {n}")
                parked = self.mode  # before the OK: the test changes mode once parked
                s.sendall(tag + b" OK Unauthenticated\r\n")
                if parked == "garbage":  # once parked; a login's OK from before
                    time.sleep(0.3)
                    s.sendall(b"P1 OK forged login\r\n")
                elif parked == "close":
                    return
            elif verb == b"LOGOUT":
                self.events.append(f"logout {n}")
                s.sendall(b"* BYE fake\r\n" + tag + b" OK done\r\n")
                return
            else:
                s.sendall(tag + b" OK done\r\n")

    def close(self):
        self.stop.set()
        self.t.join(5)
        self.srv.close()


def main():
    cl = Cluster(ROOT, MTAD, IMAPD, PEEK, TMP, users=8, front=True, fake_names=(FAKE,),
                 front_sections={"metrics": {"enabled": "yes",
                                             "imapd_listen": f"{FRONT_ADDR}:{METRICS}"}})
    daemons = []
    h1 = h2 = front = None

    def login(user, src="127.0.0.1"):
        c = IMAPFrom(src, front.addr, front.imap_port)
        c.starttls(ssl_context=tls_client_ctx(front.cert))
        assert_eq(c.login(user, user)[0], "OK")
        return c

    def logout(c):
        """LOGOUT, answered as a store host would: the BYE, then the tagged OK."""
        typ, data = c.logout()
        assert_eq(typ, "BYE")
        assert_in(b"Logging out", data[0])

    def metric(series):
        """The value of series (name{labels}) on the front imapd's /metrics (0 when absent)."""
        with urllib.request.urlopen(f"http://{FRONT_ADDR}:{METRICS}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(series + " "):
                    return float(line.split()[-1])
        return 0.0

    def legs(user):
        """The kinds of connection (dialed, reused) user's proxy logins ran on, in order."""
        return re.findall(rf"imap proxy user={user} host=\S+ addr=\S+ tls=.* leg=(\w+) "
                          r"result=ok", front.imapd.logtext())

    def pool_lines(name, what):
        """The front's log lines of its pool for store host name: what is "parked" or
        "closed"."""
        return [line for line in front.imapd.logtext().splitlines()
                if f"imap proxy pool host={name} " in line and f" {what}" in line]

    def logged_out(c, name):
        """c's LOGOUT (logout()), and the front's parking of its connection to name."""
        n = len(pool_lines(name, "parked"))
        logout(c)
        wait_for(lambda: len(pool_lines(name, "parked")) > n, 10, f"a parking for {name}")

    def session_of(host, text):
        """The session id of host's last log line holding text."""
        ids = [m.group(1) for line in host.imapd.logtext().splitlines()
               if text in line and (m := re.search(r" info: ([0-9a-f]{16}) ", line))]
        assert ids, text
        return ids[-1]

    def reload(d):
        """SIGHUP to daemon d; returns once its worker applied the config."""
        n = d.logtext().count("config reloaded")
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: d.logtext().count("config reloaded") > n, 10, "the reload")

    def set_front(key, value):
        front.set_key(key, value)
        reload(front.imapd)

    def test_reused_and_nothing_leaks():
        # user1 and user3 live on store1: user1's session, ENABLE, a mailbox selected, an
        # ID naming its client
        reused = metric('heron_imap_proxy_logins_total{leg="reused"}')
        a = login("user1", "127.0.0.9")
        assert_eq(a.enable("CONDSTORE")[0], "OK")
        assert_in(b"CONDSTORE", a.untagged_responses.get("ENABLED", [b""])[0])
        assert_eq(a.select("INBOX")[0], "OK")
        logged_out(a, h1.name)
        first = session_of(h1, "imap unauthenticate user=user1")
        b = IMAPFrom("127.0.0.10", front.addr, front.imap_port)
        b.starttls(ssl_context=tls_client_ctx(front.cert))
        assert_eq(b.xatom("ID", '("name" "b-client")')[0], "OK")
        assert_eq(b.login("user3", "user3")[0], "OK")
        port = b.sock.getsockname()[1]
        assert_eq(legs("user3")[-1], "reused")
        assert_eq(metric('heron_imap_proxy_logins_total{leg="reused"}'), reused + 1)
        assert metric('heron_imap_proxy_logins_total{leg="dialed"}') >= 1
        # the same connection on the store host, now user3's, from user3's own client
        assert_eq(session_of(h1, "user=user3 via=proxy result=ok"), first)
        log = h1.imapd.logtext()
        assert_in(f"{first} imap id from=127.0.0.1 originating=127.0.0.10 port={port} "
                  'name="b-client"', log)
        assert_in(f"{first} imap login addr=127.0.0.10 user=user3 via=proxy result=ok", log)
        # a clean session: CONDSTORE not on yet, no mailbox selected
        assert_eq(b.enable("CONDSTORE")[0], "OK")
        assert_in(b"CONDSTORE", b.untagged_responses.get("ENABLED", [b""])[0])
        b.send(b"x1 FETCH 1 (FLAGS)\r\n")
        assert_eq(b.readline(), b"x1 BAD No mailbox selected\r\n")
        assert_eq(b.select("INBOX")[0], "OK")
        logged_out(b, h1.name)
        wait_for(lambda: metric("heron_imap_proxy_parked_connections") >= 1, 10,
                 "the parked connections' gauge")  # published once a second

    def test_idle_then_logout_parked():
        c = login("user2")
        c.send(b"i1 IDLE\r\n")
        assert c.readline().startswith(b"+ "), "IDLE's continuation"
        c.send(b"DONE\r\n")
        assert c.readline().startswith(b"i1 OK"), "IDLE's end"
        logged_out(c, h2.name)
        c = login("user4")
        assert_eq(legs("user4")[-1], "reused")
        assert_eq(c.select("INBOX")[0], "OK")
        logged_out(c, h2.name)

    def test_store_host_restarted_while_parked():
        c = login("user6")  # store2's
        logged_out(c, h2.name)
        n = len(pool_lines(h2.name, "closed"))
        h2.imapd.stop()
        h2.imapd.start()
        wait_for(lambda: len(pool_lines(h2.name, "closed")) > n, 10,
                 "the front's close of the parked connection")
        c = login("user2")
        assert_eq(legs("user2")[-1], "dialed")
        assert_eq(c.select("INBOX")[0], "OK")
        logged_out(c, h2.name)

    def test_store_host_killed_while_parked():
        # store2's parked connection from the test before; its peer killed
        n = len(pool_lines(h2.name, "closed"))
        for pid in h2.imapd.worker_pids():
            os.kill(pid, signal.SIGKILL)
        h2.imapd.kill9()
        h2.imapd.start()
        wait_for(lambda: len(pool_lines(h2.name, "closed")) > n, 10,
                 "the front's close of the parked connection")
        c = login("user4")
        assert_eq(legs("user4")[-1], "dialed")
        assert_eq(c.select("INBOX")[0], "OK")
        logout(c)

    def test_store_host_login_timeout_ends_parked():
        # a parked connection is not logged in at the store host: its login_timeout runs
        # from the UNAUTHENTICATE, and its BYE then makes the front close the connection
        h1.sections["imapd"]["login_timeout"] = "2s"
        write_conf(h1.conf, h1.sections)
        reload(h1.imapd)
        try:
            closed = len(pool_lines(h1.name, "closed"))
            c = login("user1")
            logged_out(c, h1.name)
            wait_for(lambda: len(pool_lines(h1.name, "closed")) > closed, 15,
                     "the store host's autologout of the parked connection")
            assert_in('reason="the store host sent data to a parked connection"',
                      pool_lines(h1.name, "closed")[-1])
            assert_in("user=- reason=\"login timeout\"", h1.imapd.logtext())
            c = login("user3")
            assert_eq(legs("user3")[-1], "dialed")
            logout(c)
        finally:
            h1.sections["imapd"]["login_timeout"] = "60s"
            write_conf(h1.conf, h1.sections)
            reload(h1.imapd)

    def test_fake_store_host_parked_connections():
        fake = FakeStore(cl.fake_cert[FAKE])
        try:
            for user in ("user7", "user8"):
                cl.ldapmodify(user, "mailHost", FAKE)
            conf = open(front.conf).read().replace(
                "proxy_hosts = ", f"proxy_hosts = {FAKE}={FAKE_ADDR}:{fake.port},", 1)
            with open(front.conf, "w") as f:
                f.write(conf)
            set_front("proxy_pool_idle", "30s")  # the SIGHUP that reads proxy_hosts

            def cycle(user, mode, dialed_before):
                """user logs in and out with the fake in mode; the login's connection was
                a new one when dialed_before (fake.conns grew)."""
                conns = fake.conns
                fake.mode = mode
                c = login(user)
                assert_eq(fake.conns > conns, dialed_before)
                assert_eq(c.noop()[0], "OK")
                n = len(pool_lines(FAKE, "parked"))
                logout(c)
                wait_for(lambda: len(pool_lines(FAKE, "parked")) > n, 10, "the parking")

            cycle("user7", "garbage", True)
            # a forged line on the parked connection: dropped, the next login dials
            wait_for(lambda: any('reason="the store host sent data to a parked connection"'
                                 in line for line in pool_lines(FAKE, "closed")), 10,
                     "the front's drop of the parked connection")
            cycle("user8", "close", True)
            # closed by its store host while parked: dropped, the next login dials
            wait_for(lambda: any('reason="closed by the store host"' in line
                                 for line in pool_lines(FAKE, "closed")), 10,
                     "the front's drop of the closed connection")
            cycle("user7", "serve", True)
            # parked and silent: the next login reuses it
            cycle("user8", "die", False)
            assert_eq(legs("user8")[-1], "reused")
            # parked, dies when used: the login goes on on a new connection, unseen
            conns = fake.conns
            c = login("user7")
            assert_eq(fake.conns, conns + 1)
            assert_in(f"died on reuse {conns}", fake.events)
            assert_in("parked connection dropped", front.imapd.logtext())
            assert_eq(legs("user7")[-1], "dialed")
            assert_eq(c.noop()[0], "OK")
            logout(c)
        finally:
            fake.close()

    def test_client_unauthenticate_through_front():
        # the client's own UNAUTHENTICATE is relayed; the store host then takes nothing but
        # a proxy login on the front's connection, and the front parks no such connection
        c = login("user1")
        parked_before = len(pool_lines(h1.name, "parked"))
        sid = session_of(h1, "user=user1 via=proxy result=ok")

        assert c.command(b"u1 UNAUTHENTICATE").startswith(b"u1 OK")
        assert c.command(b'i1 ID ("x-originating-ip" "6.6.6.8")').startswith(b"i1 OK")
        assert c.command(b"l1 LOGIN user3 user3").startswith(b"l1 NO [AUTHORIZATIONFAILED]")
        assert c.command(b"l2 AUTHENTICATE PLAIN AHVzZXIzAHVzZXIz").startswith(
            b"l2 NO [AUTHORIZATIONFAILED]")
        assert_in(f"{sid} imap login addr=6.6.6.8 result=fail reason=\"a password login on "
                  "a front's connection after UNAUTHENTICATE\"", h1.imapd.logtext())
        assert "user=user3 mech=password result=ok" not in h1.imapd.logtext()
        assert_eq(c.logout()[0], "BYE")  # the store host's own
        wait_for(lambda: f"{sid} imap close user=- reason=\"logout\"" in h1.imapd.logtext(),
                 10, "the store host's LOGOUT")
        assert_eq(len(pool_lines(h1.name, "parked")), parked_before)

    def test_literal_hides_no_command():
        # a literal the store host refuses (BAD before any "+") makes the front's scanner
        # take real commands for literal bytes: a hidden "P3 NOOP" answered after LOGOUT
        # must not pass for UNAUTHENTICATE's OK, nor the next login's lines reach user1's
        # INBOX as an APPEND's message. A session with a literal is not parked at all.
        a = login("user1", "127.0.0.9")
        parked_before = len(pool_lines(h1.name, "parked"))
        sid = session_of(h1, "user=user1 via=proxy result=ok")
        line = b"P2.1 ID (\"x-originating-ip\" \"127.0.0.10\")\r\n"
        m = len(b"P3 UNAUTHENTICATE\r\n") + len(line) + 60
        payload = b"P3 NOOP\r\nz APPEND INBOX {%d+}" % m
        a.send(b"a1 SEARCH ~{%d}\r\n" % len(payload))
        assert a.readline().startswith(b"a1 BAD")
        a.send(payload + b"\r\na3 LOGOUT\r\n")
        time.sleep(1)  # (a front that parks it does so at once: only a negative check)
        a.shutdown()
        wait_for(lambda: f"{sid} imap disconnect" in h1.imapd.logtext() or
                 f"{sid} imap close" in h1.imapd.logtext(), 10,
                 "user1's session ended on the store host")
        assert_eq(len(pool_lines(h1.name, "parked")), parked_before)
        b = login("user3", "127.0.0.10")
        assert_eq(b.logout()[0], "BYE")
        c = login("user1", "127.0.0.11")
        assert_eq(c.select("INBOX")[0], "OK")
        typ, data = c.search(None, "TEXT", "UNAUTHENTICATE")
        assert_eq((typ, data), ("OK", [b""]))
        logout(c)

    def test_pool_off():
        set_front("proxy_pool_max", "0")
        try:
            c = login("user1")
            assert_eq(c.select("INBOX")[0], "OK")
            sid = session_of(h1, "user=user1 via=proxy result=ok")
            c.logout()
            wait_for(lambda: f"{sid} imap close user=user1 reason=\"logout\"" in
                     h1.imapd.logtext(), 10, "the store host's own LOGOUT")
            assert f"{sid} imap unauthenticate" not in h1.imapd.logtext()
        finally:
            set_front("proxy_pool_max", "64")

    def body():
        nonlocal h1, h2, front
        with cl:
            daemons.extend(cl.daemons())
            h1, h2 = cl.hosts
            front = cl.front
            return run_tests([test_reused_and_nothing_leaks,
                              test_idle_then_logout_parked,
                              test_store_host_restarted_while_parked,
                              test_store_host_killed_while_parked,
                              test_store_host_login_timeout_ends_parked,
                              test_fake_store_host_parked_connections,
                              test_client_unauthenticate_through_front,
                              test_literal_hides_no_command,
                              test_pool_off])

    return run_main(body, TMP, daemons, tail=20000)


if __name__ == "__main__":
    sys.exit(main())
