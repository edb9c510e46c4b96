#!/usr/bin/env python3
"""test_imap_proxy.py — imapd as a front (tests/cluster/heroncluster.py: two store hosts on
127.0.0.2/.3 and a front imapd on 127.0.0.4, [imapd] proxy = yes, one real slapd). imaplib
logs in through the front (STARTTLS, LOGIN and AUTHENTICATE PLAIN) and works on the store host
the directory homes the user on: mail delivered there is seen, APPEND literals land there,
IDLE through the front sees a delivery made on the store host, and a COMPRESS with a tag of
3000 bytes is followed (the deflated bytes relayed unread). A wrong password is refused by
the front; a store host that is down gives its users NO [UNAVAILABLE] while the other host's
users are served; one that answers garbage is cut off the same way; a client logged in
through the front gets * BYE [UNAVAILABLE] when its store host's imapd is killed, or when the
store host sends garbage after the login (after the whole responses before it); a proxy login
from an address not in proxy_trusted, or with a wrong secret, is refused by the store host.
The front's connection to the store host is TLS (proxy_tls = starttls, the store hosts'
certificates verified against the cluster's CA file; the front logs the TLS version of the
leg, tls=no with proxy_tls = none), and a CA that did not sign them gives
NO [UNAVAILABLE] with the TLS failure in the front's log, as does a certificate that names
another host than the mailHost.
The client's ID before login reaches the store host with x-originating-ip: its log names the
client's address, not the front's; the same pair from a direct client is not believed, nor
one the client sent itself through the front (before or after the login).

  test_imap_proxy.py SOURCE_ROOT MTAD IMAPD STORE_PEEK"""
import base64
import imaplib
import os
import signal
import smtplib
import socket
import ssl
import sys
import tempfile
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heroncluster import (PROXY_SECRET, Cluster, IMAPFrom, fake_starttls,  # noqa: E402
                          listener)
from heronlib import (DOMAIN, assert_eq, assert_in, assert_raises, run_main,  # noqa: E402
                      run_tests, tls_client_ctx, wait_for)

ROOT, MTAD, IMAPD, PEEK = sys.argv[1:5]
TMP = tempfile.mkdtemp(prefix="heron-cluster-proxy-")


def msg(subject):
    return (f"From: <x@example.org>\r\nSubject: {subject}\r\n"
            f"Message-ID: <{subject}@example.org>\r\n\r\nbody of {subject}\r\n")


def send(host, user, subject):
    with smtplib.SMTP(host.addr, host.smtp_port, timeout=30) as c:
        assert_eq(c.sendmail("x@example.org", [f"{user}@{DOMAIN}"], msg(subject)), {})


def main():
    cl = Cluster(ROOT, MTAD, IMAPD, PEEK, TMP, users=8, front=True,
                 fake_names=("compress.heron.test", "bad.heron.test"))
    daemons = []
    h1 = h2 = front = None

    def front_login(user, tls=True):
        c = imaplib.IMAP4(front.addr, front.imap_port, timeout=20)
        if tls:
            c.starttls(ssl_context=tls_client_ctx(front.cert))
        c.login(user, user)
        return c

    def login_unavailable(user):
        """user's login through the front is refused: NO [UNAVAILABLE]."""
        front.login_unavailable(user)

    def subjects(c):
        typ, data = c.search(None, "ALL")
        assert_eq(typ, "OK")
        out = []
        for n in data[0].split():
            typ, d = c.fetch(n, "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
            out.append(d[0][1].decode().strip().split(": ", 1)[1])
        return out

    def test_login_through_front_to_each_host():
        send(h2, "user2", "for-two")
        send(h1, "user1", "for-one")
        for user, subject in (("user2", "for-two"), ("user1", "for-one")):
            c = front_login(user)
            typ, _ = c.select("INBOX")
            assert_eq(typ, "OK")
            assert_eq(subjects(c), [subject])
            c.logout()
        # the sessions ran on the store hosts, logged in by the proxy credential
        assert_in("user=user2 via=proxy result=ok", h2.imapd.logtext())
        assert_in("user=user1 via=proxy result=ok", h1.imapd.logtext())
        assert "user=user2 via=proxy" not in h1.imapd.logtext()

    def test_authenticate_plain_and_capability():
        c = imaplib.IMAP4(front.addr, front.imap_port, timeout=20)
        c.starttls(ssl_context=tls_client_ctx(front.cert))
        typ, _ = c.authenticate("PLAIN", lambda _: b"\0user4\0user4")
        assert_eq(typ, "OK")
        typ, caps = c.capability()
        assert_eq(typ, "OK")
        assert_in(b"IDLE", caps[0])
        typ, _ = c.select("INBOX")
        assert_eq(typ, "OK")
        c.logout()
        assert_in("user=user4 via=proxy result=ok", h2.imapd.logtext())

    def test_plaintext_refused_and_wrong_password():
        c = imaplib.IMAP4(front.addr, front.imap_port, timeout=20)
        with assert_raises(imaplib.IMAP4.error):
            c.login("user2", "user2")  # allow_plaintext_auth = no on the front
        c.starttls(ssl_context=tls_client_ctx(front.cert))
        with assert_raises(imaplib.IMAP4.error) as e:
            c.login("user2", "wrong")
        assert_in("AUTHENTICATIONFAILED", str(e.exception))
        c.logout()
        assert "user=user2 via=proxy result=fail" not in h2.imapd.logtext()

    def test_compress_over_tls_logout_answered():
        # a store host's session in TLS (as the front's are) with COMPRESS: LOGOUT's answer
        # leaves through every layer (deflate, TLS, the socket) before the close
        c = imaplib.IMAP4(h1.addr, h1.imap_port, timeout=20)
        c.starttls(ssl_context=tls_client_ctx(cl.ca))
        c.login("user1", "user1")
        c.send(b"t COMPRESS DEFLATE\r\n")
        assert_eq(c.readline(), b"t OK DEFLATE active\r\n")
        co, de = zlib.compressobj(6, zlib.DEFLATED, -15), zlib.decompressobj(-15)
        c.sock.sendall(co.compress(b"z3 LOGOUT\r\n") + co.flush(zlib.Z_SYNC_FLUSH))
        c.sock.settimeout(30)
        got = b""
        while d := c.sock.recv(65536):
            got += de.decompress(d)
        assert_in(b"z3 OK", got)
        c.shutdown()

    def test_compress_relayed_not_cut():
        # the store host's bytes after its COMPRESS OK are deflated: the front, which follows
        # the responses to know where one ends, stops reading them there (a long tag too)
        c = front_login("user1")
        tag = b"t" * 40
        c.send(tag + b" COMPRESS DEFLATE\r\n")
        assert_eq(c.readline(), tag + b" OK DEFLATE active\r\n")
        co, de = zlib.compressobj(6, zlib.DEFLATED, -15), zlib.decompressobj(-15)
        c.sock.sendall(co.compress(b"z2 NOOP\r\nz3 LOGOUT\r\n") + co.flush(zlib.Z_SYNC_FLUSH))
        c.sock.settimeout(30)
        got = b""
        while b"z3 OK" not in got:
            d = c.sock.recv(65536)
            assert d, got
            got += de.decompress(d)
        assert_in(b"z2 OK", got)
        assert_eq(got.count(b"* BYE"), 1)  # the store host's, none of the front's
        c.shutdown()

    def home_on_fake_host(user, name, addr, port):
        """user's mailHost is name, which the front's proxy_hosts puts on addr:port."""
        cl.ldapmodify(user, "mailHost", name)
        conf = open(front.conf).read().replace("proxy_hosts = ",
                                               f"proxy_hosts = {name}={addr}:{port},", 1)
        with open(front.conf, "w") as f:
            f.write(conf)
        n = front.imapd.logtext().count("config reloaded")
        front.imapd.proc.send_signal(1)  # SIGHUP: the new proxy_hosts
        wait_for(lambda: front.imapd.logtext().count("config reloaded") > n, 10, "the reload")

    def fake_store_tls(srv, name):
        """A fake store host's connection from the front, accepted on srv: the greeting, then
        STARTTLS with name's certificate; (the TLS socket, its reader)."""
        s, _ = srv.accept()
        try:
            s.settimeout(20)
            s.sendall(b"* OK fake store host\r\n")
            return fake_starttls(s, s.makefile("rb"), *cl.fake_cert[name], tag=b"P0")
        except BaseException:
            s.close()
            raise

    def test_compress_with_a_long_tag():
        # a store host (a fake one: Heron's imapd takes tags of 64 bytes at most) answers a
        # COMPRESS whose tag is far longer than the start of a line the front keeps: the
        # front still sees the OK and relays the deflated bytes (a NUL among them) unread
        srv, port = listener("127.0.0.6")
        srv.settimeout(20)
        tag = b"t" * 3000
        co = zlib.compressobj(6, zlib.DEFLATED, -15)
        deflated = co.compress(b"* 1 EXISTS\r\n") + co.flush(zlib.Z_SYNC_FLUSH)
        assert_in(b"\0", deflated)  # not IMAP, were it read as such

        def fake():
            s, f = fake_store_tls(srv, "compress.heron.test")
            with s:
                ids.append(f.readline())  # the client's ID, replayed
                f.readline()  # the front's AUTHENTICATE PLAIN
                s.sendall(b"P1 OK [CAPABILITY IMAP4rev1 COMPRESS=DEFLATE] Logged in\r\n")
                line = f.readline()
                assert_eq(line, tag + b" COMPRESS DEFLATE\r\n")
                s.sendall(tag + b" OK DEFLATE active\r\n" + deflated)
                f.read()  # until the client closes
        ids = []
        t = threading.Thread(target=fake, daemon=True)
        t.start()
        try:
            home_on_fake_host("user7", "compress.heron.test", "127.0.0.6", port)
            c = imaplib.IMAP4(front.addr, front.imap_port, timeout=20)
            c.starttls(ssl_context=tls_client_ctx(front.cert))
            # the client's ID within RFC 2971's limits is what the store host gets: a value
            # over 1024 bytes dropped, 28 of the client's pairs at most (with the front's
            # x-originating-ip and -port, 30: RFC 2971 3.3), a quote kept escaped, the
            # client's own x-originating-ip not passed on
            pairs = " ".join(f'"f{i}" "v{i}"' for i in range(35))
            typ, _ = c.xatom("ID", f'("big" "{"x" * 1100}" "x-originating-ip" "6.6.6.6" '
                             f'"q" "a\\"b" {pairs})')
            assert_eq(typ, "OK")
            assert_eq(c.login("user7", "user7")[0], "OK")
            kept = " ".join(f'"f{i}" "v{i}"' for i in range(27))
            cport = c.sock.getsockname()[1]
            assert_eq(ids, [f'P2 ID ("q" "a\\"b" {kept} "x-originating-ip" "127.0.0.1" '
                            f'"x-originating-port" "{cport}")\r\n'.encode()])
            c.send(tag + b" COMPRESS DEFLATE\r\n")
            ok = tag + b" OK DEFLATE active\r\n"
            c.sock.settimeout(30)
            raw = b""  # from the socket: the OK's line and the deflated bytes come together
            while len(raw) < len(ok) + len(deflated):
                d = c.sock.recv(65536)
                assert d, raw  # the front cut the relay off
                raw += d
            assert_eq(raw[:len(ok)], ok)
            got = zlib.decompressobj(-15).decompress(raw[len(ok):])
            assert_eq(got, b"* 1 EXISTS\r\n")
            c.shutdown()
            t.join(20)
            assert "sent what is not IMAP" not in front.imapd.logtext()
        finally:
            srv.close()

    def test_append_literal_lands_on_home_host():
        c = front_login("user2")
        body = b"From: a@b\r\nSubject: appended-2\r\n\r\n" + b"x" * 5000 + b"\r\n"
        typ, data = c.append("INBOX", None, None, body)
        assert_eq(typ, "OK")
        c.logout()
        assert_in("appended-2", h2.subjects("user2"))

    def test_idle_through_front_sees_delivery():
        c = front_login("user6")
        c.select("INBOX")
        tag = c._new_tag().decode()
        c.send(f"{tag} IDLE\r\n".encode())
        assert c.readline().startswith(b"+"), "no IDLE continuation"
        send(h1, "user6", "while-idle")  # store1 takes it, LMTP to store2
        c.sock.settimeout(30)
        line = c.readline()
        assert line.endswith(b"EXISTS\r\n"), line
        c.send(b"DONE\r\n")
        while True:
            line = c.readline()
            if line.startswith(tag.encode()):
                break
        assert_in(b"OK", line)
        c.logout()

    def test_store_host_down_others_unaffected():
        h2.imapd.stop()
        try:
            login_unavailable("user2")
            c = front_login("user3")  # store1's user
            typ, _ = c.select("INBOX")
            assert_eq(typ, "OK")
            c.logout()
        finally:
            h2.imapd.start()
        c = front_login("user2")
        c.logout()

    def test_store_host_killed_client_gets_bye():
        c = front_login("user2")  # store2's user
        assert_eq(c.select("INBOX")[0], "OK")
        # kill -9 of the workers first (by pid: a worker that outlived its master would say
        # its own BYE at the SIGTERM it gets then), then of the master and any new worker
        for pid in h2.imapd.worker_pids():
            os.kill(pid, signal.SIGKILL)
        h2.imapd.kill9()
        try:
            c.sock.settimeout(30)
            line = c.readline()  # unsolicited: the client sent nothing
            assert line.startswith(b"* BYE [UNAVAILABLE] "), line
            assert_eq(c.readline(), b"")  # then the front closes
            c.shutdown()
            wait_for(lambda: "closed by the store host" in front.imapd.logtext(), 10,
                     "the front's log of the close")
        finally:
            h2.imapd.start()
        c = front_login("user2")  # served again once the store host is back
        assert_eq(c.select("INBOX")[0], "OK")
        c.logout()  # the store host's own BYE, no second one from the front

    def test_garbage_store_host_cut_off():
        # store2's address in the front's map taken by a server answering garbage
        srv, port = listener("127.0.0.5")
        stop = threading.Event()
        after_login = threading.Event()  # garbage once the proxy login is done
        cut = threading.Event()  # a literal cut off instead

        def relay_garbage(s):
            s.settimeout(10)
            f = s.makefile("rb")
            s.sendall(b"* OK fake store host\r\n")
            s, f = fake_starttls(s, f, *cl.fake_cert["bad.heron.test"], tag=b"P0")
            with s:
                relay_garbage_tls(s, f)

        def relay_garbage_tls(s, f):
            f.readline()  # the client's ID, replayed
            f.readline()  # the front's AUTHENTICATE PLAIN
            s.sendall(b"P1 OK [CAPABILITY IMAP4rev1 IMAP4rev2] Logged in\r\n")
            tag = f.readline().split(b" ")[0]  # the client's command
            if cut.is_set():
                s.sendall(b"* 1 FETCH (BODY[] {10}\r\nabc")
                return
            s.sendall(b"* 1 FETCH (BODY[] {4}\r\n\x00\r\n\n)\r\n* 2 EXISTS\r\n"
                      b"\x00\x01 not IMAP\r\n" + tag + b" OK done\r\n")
            f.readline()  # until the front closes

        def garbage():
            srv.settimeout(0.5)
            while not stop.is_set():
                try:
                    s, _ = srv.accept()
                except OSError:
                    continue
                try:
                    if after_login.is_set():
                        relay_garbage(s)
                    else:
                        s.sendall(b"\x00\xffHELLO garbage\r\n* OK\r\n" * 3)
                        time.sleep(0.5)
                except OSError:
                    pass
                s.close()
        t = threading.Thread(target=garbage, daemon=True)
        t.start()
        try:
            home_on_fake_host("user8", "bad.heron.test", "127.0.0.5", port)
            assert_in("imapd reload: [imapd] proxy_hosts = ", front.imapd.logtext())
            time.sleep(0.5)
            login_unavailable("user8")
            # garbage after the login: the whole responses before it (a literal with a NUL
            # and line ends in it), then the front's BYE, and the close
            after_login.set()
            c = imaplib.IMAP4(front.addr, front.imap_port, timeout=20)
            c.starttls(ssl_context=tls_client_ctx(front.cert))
            assert_eq(c.login("user8", "user8")[0], "OK")
            with assert_raises(imaplib.IMAP4.abort):
                c.noop()
            assert_eq(c.untagged_responses.get("FETCH"),
                      [(b"1 (BODY[] {4}", b"\x00\r\n\n"), b")"])
            assert_eq(c.untagged_responses.get("EXISTS"), [b"2"])
            assert_in(b"[UNAVAILABLE]", c.untagged_responses.get("BYE", [b""])[0])
            c.shutdown()
            wait_for(lambda: "sent what is not IMAP" in front.imapd.logtext(), 10,
                     "the front's log of the garbage")
            # closed inside a literal: no BYE, which the client would read as its bytes
            cut.set()
            c = imaplib.IMAP4(front.addr, front.imap_port, timeout=20)
            c.starttls(ssl_context=tls_client_ctx(front.cert))
            assert_eq(c.login("user8", "user8")[0], "OK")
            c.send(b"a1 NOOP\r\n")
            c.sock.settimeout(30)
            assert_eq(c.readline(), b"* 1 FETCH (BODY[] {10}\r\n")
            assert_eq(c.file.read(), b"abc")  # to the end: no BYE after the cut
            c.shutdown()
        finally:
            stop.set()
            t.join(5)
            srv.close()

    def set_front(key, value):
        """[imapd] key = value in the front's heron.conf, applied by a SIGHUP."""
        front.set_key(key, value)
        n = front.imapd.logtext().count("config reloaded")
        front.imapd.proc.send_signal(1)
        wait_for(lambda: front.imapd.logtext().count("config reloaded") > n, 10, "the reload")

    def proxy_oks(user, host):
        """The front's log lines of user's proxy logins at host that went through."""
        return [line for line in front.imapd.logtext().splitlines()
                if f"imap proxy user={user} host={host} " in line and "result=ok" in line]

    def test_leg_is_tls_verified():
        # the front finished a TLS handshake with the store host (the version it logs is
        # the TLS session's) and the session works; with proxy_tls = none it logs tls=no
        c = front_login("user1")
        assert_eq(c.select("INBOX")[0], "OK")
        c.logout()
        ok = proxy_oks("user1", "store1.heron.test")
        assert ok and all(" tls=TLSv1." in line for line in ok), ok
        try:
            set_front("proxy_tls", "none")
            n = len(proxy_oks("user2", "store2.heron.test"))
            c = front_login("user2")
            assert_eq(c.select("INBOX")[0], "OK")
            c.logout()
            ok = proxy_oks("user2", "store2.heron.test")[n:]
            assert ok and all(" tls=no " in line for line in ok), ok
        finally:
            set_front("proxy_tls", "starttls")

    def test_wrong_ca_refused():
        # the store hosts' certificates do not chain to the front's own: NO [UNAVAILABLE]
        before1 = h1.imapd.logtext()
        try:
            set_front("proxy_ca_file", front.cert)
            for user, host in (("user1", "store1"), ("user2", "store2")):
                login_unavailable(user)
                assert_in(f"imap proxy user={user} host={host}.heron.test result=fail "
                          f"reason=\"TLS with 127.0.0.", front.imapd.logtext())
            assert_in("certificate verify failed", front.imapd.logtext())
            # the store hosts saw no login
            assert "user=user1 via=proxy result=ok" not in h1.imapd.logtext()[len(before1):]
        finally:
            set_front("proxy_ca_file", cl.ca)
        c = front_login("user1")  # the right CA again
        c.logout()

    def test_ca_file_replaced_under_its_name():
        # a CA bundle replaced under the same name (a new file renamed over it) is read
        # again at the SIGHUP (set_front sends one with the same name): the front's TLS
        # client context is not kept by the name alone (test_proxy_tls.py: not before the
        # SIGHUP either)
        path = os.path.join(os.path.dirname(cl.ca), "proxy-ca-replaced.pem")

        def put(src):
            with open(src, "rb") as f:
                data = f.read()
            with open(path + ".new", "wb") as out:
                out.write(data)
            os.rename(path + ".new", path)

        try:
            put(cl.ca)
            set_front("proxy_ca_file", path)
            front_login("user1").logout()
            put(front.cert)  # chains to nothing the store hosts have
            set_front("proxy_ca_file", path)
            login_unavailable("user1")
            put(cl.ca)
            set_front("proxy_ca_file", path)
            front_login("user1").logout()
        finally:
            set_front("proxy_ca_file", cl.ca)

    def test_certificate_for_another_name_refused():
        # a store host whose certificate chains to the CA file but names another host than
        # its mailHost: NO [UNAVAILABLE], the mismatch in the front's log
        srv, port = listener("127.0.0.6")
        srv.settimeout(20)

        def fake():
            try:
                fake_store_tls(srv, "compress.heron.test")[0].close()
            except (OSError, ssl.SSLError):
                pass  # the front gives up in the handshake
        t = threading.Thread(target=fake, daemon=True)
        t.start()
        try:
            home_on_fake_host("user6", "other.heron.test", "127.0.0.6", port)
            login_unavailable("user6")
            t.join(20)
            assert_in(f"user=user6 host=other.heron.test result=fail reason=\"TLS with "
                      f"127.0.0.6:{port} (other.heron.test) failed: certificate verify "
                      f"failed: hostname mismatch", front.imapd.logtext())
        finally:
            srv.close()
            cl.ldapmodify("user6", "mailHost", "store2.heron.test")

    def test_forged_proxy_login_refused():
        def plain(authz, user, pw):
            return base64.b64encode(f"{authz}\0{user}\0{pw}".encode()).decode()
        # from an address not in proxy_trusted (127.0.0.5), with the right secret
        s = socket.create_connection((h2.addr, h2.imap_port), timeout=10,
                                     source_address=("127.0.0.5", 0))
        f = s.makefile("rb")
        f.readline()
        s.sendall(b"a AUTHENTICATE PLAIN " +
                  plain(f"user2@{DOMAIN}", "heron-proxy", PROXY_SECRET).encode() + b"\r\n")
        line = f.readline()
        assert line.startswith(b"a NO [AUTHORIZATIONFAILED]"), line
        s.close()
        # from the trusted address, with a wrong secret
        s = socket.create_connection((h2.addr, h2.imap_port), timeout=10)
        f = s.makefile("rb")
        f.readline()
        s.sendall(b"b AUTHENTICATE PLAIN " +
                  plain(f"user2@{DOMAIN}", "heron-proxy", "guess").encode() + b"\r\n")
        line = f.readline()
        assert line.startswith(b"b NO [AUTHORIZATIONFAILED]"), line
        # and the right one from there works
        s.sendall(b"c AUTHENTICATE PLAIN " +
                  plain(f"user2@{DOMAIN}", "heron-proxy", PROXY_SECRET).encode() + b"\r\n")
        line = f.readline()
        assert line.startswith(b"c OK"), line
        s.close()

    def test_id_names_client_at_store_host():
        c = IMAPFrom("127.0.0.9", front.addr, front.imap_port)
        c.starttls(ssl_context=tls_client_ctx(front.cert))
        typ, data = c.xatom("ID", '("name" "idclient" "x-originating-ip" "6.6.6.6")')
        assert_eq(typ, "OK")
        assert_eq(c.login("user3", "user3")[0], "OK")
        port = c.sock.getsockname()[1]
        # an ID after the login is relayed: the store host's own answer, its pair not taken
        # (ID is of any state: RFC 2971 3.1; imaplib only knows it before login)
        imaplib.Commands["ID"] = ("NONAUTH", "AUTH", "SELECTED")
        typ, _ = c.xatom("ID", '("x-originating-ip" "7.7.7.7")')
        assert_eq(typ, "OK")
        assert_in(b'"name" "Heron"', c.untagged_responses.get("ID", [b""])[0])
        c.logout()
        logs = h1.imapd.logtext() + h2.imapd.logtext()
        assert_in(f"imap id from=127.0.0.1 originating=127.0.0.9 port={port} "
                  'name="idclient"', logs)
        assert_in("imap login addr=127.0.0.9 user=user3 via=proxy result=ok", logs)
        assert "6.6.6.6" not in logs and "7.7.7.7" not in logs, "a client's own pair"

    def test_direct_originating_ip_not_believed():
        # from an address not in proxy_trusted the pair is ignored
        c = IMAPFrom("127.0.0.5", h2.addr, h2.imap_port)
        typ, _ = c.xatom("ID", '("x-originating-ip" "6.6.6.7" "x-originating-port" "1")')
        assert_eq(typ, "OK")
        assert_eq(c.login("user2", "user2")[0], "OK")
        c.logout()
        log = h2.imapd.logtext()
        assert_in("imap login addr=127.0.0.5 user=user2 mech=password result=ok", log)
        assert "6.6.6.7" not in log

    def body():
        nonlocal h1, h2, front
        with cl:
            daemons.extend(cl.daemons())
            h1, h2 = cl.hosts
            front = cl.front
            return run_tests([test_login_through_front_to_each_host,
                              test_leg_is_tls_verified,
                              test_wrong_ca_refused,
                              test_ca_file_replaced_under_its_name,
                              test_authenticate_plain_and_capability,
                              test_plaintext_refused_and_wrong_password,
                              test_append_literal_lands_on_home_host,
                              test_compress_over_tls_logout_answered,
                              test_compress_relayed_not_cut,
                              test_compress_with_a_long_tag,
                              test_certificate_for_another_name_refused,
                              test_idle_through_front_sees_delivery,
                              test_store_host_down_others_unaffected,
                              test_store_host_killed_client_gets_bye,
                              test_forged_proxy_login_refused,
                              test_id_names_client_at_store_host,
                              test_direct_originating_ip_not_believed,
                              test_garbage_store_host_cut_off])

    return run_main(body, TMP, daemons, tail=20000)


if __name__ == "__main__":
    sys.exit(main())
