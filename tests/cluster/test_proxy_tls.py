#!/usr/bin/env python3
"""test_proxy_tls.py — the TLS leg between a front and the store hosts (#25;
tests/cluster/heroncluster.py: two store hosts on 127.0.0.2/.3 with imapd and managesieved, a
front on 127.0.0.4 proxying both over STARTTLS, one real slapd).

Session resumption: the front keeps the last TLS session of each store host and offers it on
the next proxied login; the store host takes it (the front's log line says
tls_session=resumed, its heron_proxy_tls_handshakes_total{handshake="resumed"} grows, and
`openssl s_client -sess_out`, then `-sess_in`, resumes against the store host's STARTTLS on
its own). A SIGHUP
of the front (its CA file read again) drops the sessions: the next login makes a full
handshake. A store host restarted with a new key makes a full handshake too, its new
certificate verified; restarted with a certificate the front's CA file does not hold, the
login is refused though the front still has a session of that host.
The CA file is read at a worker's start and at SIGHUP, not per login: a CA file replaced
under its name changes nothing until the SIGHUP.

  test_proxy_tls.py SOURCE_ROOT MTAD IMAPD STORE_PEEK MANAGESIEVED"""
import base64
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heroncluster import FRONT_ADDR, Cluster, host_cert, run_cluster, sighup  # noqa: E402
from heronlib import (assert_eq, assert_in, free_port, tls_client_ctx,  # noqa: E402
                      write_conf)

ROOT, MTAD, IMAPD, PEEK, MSD = sys.argv[1:6]
TMP = tempfile.mkdtemp(prefix="heron-cluster-proxytls-")
IMAPD_METRICS, SIEVE_METRICS = free_port(), free_port()


class Sieve:
    """Just enough ManageSieve (RFC 5804) for a login through the front."""

    def __init__(self, addr, port, cert):
        self.sock = socket.create_connection((addr, port), timeout=20)
        self.f = self.sock.makefile("rb")
        self.response()
        assert self.cmd("STARTTLS").startswith("OK")
        self.sock = tls_client_ctx(cert).wrap_socket(self.sock, server_hostname=FRONT_ADDR)
        self.f = self.sock.makefile("rb")
        self.response()

    def response(self):
        for _ in range(100):
            line = self.f.readline()
            assert line, "connection closed"
            line = line.rstrip(b"\r\n").decode()
            if line.split(" ", 1)[0] in ("OK", "NO", "BYE"):
                return line
        raise AssertionError("no end of the response")

    def cmd(self, text):
        self.sock.sendall(text.encode() + b"\r\n")
        return self.response()

    def plain(self, user, password):
        b64 = base64.b64encode(f"\0{user}\0{password}".encode()).decode()
        return self.cmd(f'AUTHENTICATE "PLAIN" "{b64}"')

    def close(self):
        self.cmd("LOGOUT")
        self.sock.close()


def main():
    cl = Cluster(ROOT, MTAD, IMAPD, PEEK, TMP, users=8, front=True, msd=MSD,
                 front_sections={"metrics": {
                     "enabled": "yes", "imapd_listen": f"{FRONT_ADDR}:{IMAPD_METRICS}",
                     "managesieved_listen": f"{FRONT_ADDR}:{SIEVE_METRICS}"},
                     # no pool (test_proxy_pool.py's): each login dials, its handshake counted
                     "imapd": {"proxy_pool_max": "0"}})
    h1 = front = None

    def oks(log, proto, user):
        """The front's result=ok lines of user's proxy logins (proto: imap, managesieve)."""
        return [line for line in log.logtext().splitlines()
                if f"{proto} proxy user={user} " in line and "result=ok" in line]

    def last_ok(log, proto, user, n):
        """The one result=ok line of user's since the first n."""
        got = oks(log, proto, user)[n:]
        assert_eq(len(got), 1)
        return got[0]

    def login_says(user, handshake):
        """user logs in through the front's imapd; its proxy line says tls_session=handshake."""
        n = len(oks(front.imapd, "imap", user))
        front.login(user)
        assert_in(f" tls_session={handshake} ", last_ok(front.imapd, "imap", user, n))

    def handshakes(kind):
        url = f"http://{FRONT_ADDR}:{IMAPD_METRICS}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        series = f'heron_proxy_tls_handshakes_total{{handshake="{kind}"}} '
        for line in text.splitlines():
            if line.startswith(series):
                return float(line.split()[-1])
        return 0.0

    def restart_store1(cert, key):
        """Store host 1's imapd again, with cert and key."""
        h1.sections["tls"] = {"cert": cert, "key": key}
        write_conf(h1.conf, h1.sections)
        h1.imapd.stop()
        h1.imapd.start()

    def set_ca(value):
        front.set_all("proxy_ca_file", value)

    def test_imap_session_resumed():
        sighup(front.imapd)  # the sessions of the tests before dropped
        full, resumed = handshakes("full"), handshakes("resumed")
        login_says("user1", "full")
        login_says("user1", "resumed")
        login_says("user3", "resumed")  # the same store host: its session
        login_says("user2", "full")  # the other one's: its own
        login_says("user2", "resumed")
        assert_eq(handshakes("full"), full + 2)
        assert_eq(handshakes("resumed"), resumed + 3)

    def test_sieve_session_resumed():
        for expect in ("full", "resumed"):
            n = len(oks(front.msd, "managesieve", "user2"))
            s = Sieve(front.addr, front.sieve_port, front.cert)
            assert s.plain("user2", "user2").startswith("OK")
            s.close()
            line = last_ok(front.msd, "managesieve", "user2", n)
            assert_in(f" tls_session={expect} ", line)

    def test_store_host_resumes_for_openssl():
        # a second witness, the front left out: openssl s_client keeps the session of a first
        # connection to the store host's STARTTLS (until the store host's BYE, so that its
        # ticket is read) and a second connection resumes it
        sess = os.path.join(TMP, "s_client.session")

        def s_client(*more):
            p = subprocess.run(["openssl", "s_client", "-connect", f"{h1.addr}:{h1.imap_port}",
                                "-starttls", "imap", "-CAfile", cl.ca, "-verify_return_error",
                                "-verify_hostname", h1.name, "-ign_eof", *more],
                               input=b"a1 LOGOUT\r\n", capture_output=True, timeout=60)
            out = p.stdout.decode(errors="replace")
            assert_in("Verify return code: 0 (ok)", out)
            assert_in("a1 OK", out)
            return out

        assert_in("New, TLSv1.3", s_client("-sess_out", sess))
        assert_in("Reused, TLSv1.3", s_client("-sess_in", sess))

    def test_sighup_drops_sessions():
        login_says("user1", "resumed")  # one kept from before
        sighup(front.imapd)
        login_says("user1", "full")
        login_says("user1", "resumed")

    def test_store_restarted_with_new_key():
        # a second certificate for store1 in the front's CA file; store1 restarted with it
        # (a new key, new ticket keys): the front's session is not taken, the full handshake
        # verifies the new certificate
        for d in ("new-key", "untrusted"):
            os.makedirs(os.path.join(TMP, d), exist_ok=True)
        cert2, key2 = host_cert(os.path.join(TMP, "new-key"), h1.name, h1.addr)
        ca2 = os.path.join(TMP, "proxy-ca-2.pem")
        with open(ca2, "w") as out:
            for f in (cl.ca, cert2):
                out.write(open(f).read())
        # a certificate for the right name that chains to nothing the front has
        cert3, key3 = host_cert(os.path.join(TMP, "untrusted"), h1.name, h1.addr)
        try:
            set_ca(ca2)
            sighup(front.imapd)
            login_says("user1", "full")
            login_says("user1", "resumed")
            restart_store1(cert2, key2)
            login_says("user1", "full")
            login_says("user1", "resumed")
            restart_store1(cert3, key3)  # the front keeps a session of store1's
            log = len(front.imapd.logtext())
            front.login_unavailable("user1")
            assert_in("certificate verify failed", front.imapd.logtext()[log:])
        finally:
            restart_store1(h1.cert, os.path.splitext(h1.cert)[0] + ".key")
            set_ca(cl.ca)
            sighup(front.imapd)
        login_says("user1", "full")

    def test_ca_file_read_at_sighup_only():
        # a CA file replaced under its name: the logins go on with the one read before (it is
        # not looked at per login); the SIGHUP reads the new one, which fails the logins, and
        # the right one again after the next
        path = os.path.join(TMP, "proxy-ca-replaced.pem")

        def put(src):
            shutil.copyfile(src, path + ".new")
            os.rename(path + ".new", path)

        try:
            put(cl.ca)
            set_ca(path)
            sighup(front.imapd)
            login_says("user2", "full")
            put(front.cert)  # chains to nothing the store hosts have
            login_says("user2", "resumed")
            sighup(front.imapd)
            front.login_unavailable("user2")
            put(cl.ca)
            front.login_unavailable("user2")
            sighup(front.imapd)
            login_says("user2", "full")
        finally:
            set_ca(cl.ca)
            sighup(front.imapd)

    def on_start(cl):
        nonlocal h1, front
        h1, front = cl.hosts[0], cl.front

    return run_cluster(cl, TMP, [test_imap_session_resumed,
                                 test_sieve_session_resumed,
                                 test_store_host_resumes_for_openssl,
                                 test_sighup_drops_sessions,
                                 test_store_restarted_with_new_key,
                                 test_ca_file_read_at_sighup_only], on_start)


if __name__ == "__main__":
    sys.exit(main())
