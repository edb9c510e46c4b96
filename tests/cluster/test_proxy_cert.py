#!/usr/bin/env python3
"""test_proxy_cert.py — the proxy credential by TLS client certificate (#25;
tests/cluster/heroncluster.py: two store hosts on 127.0.0.2/.3 with imapd and managesieved,
a front on 127.0.0.4, one real slapd). The store hosts trust a CA for the fronts
([imapd] and [sieve] proxy_client_ca_file); a front given a certificate it signed
(proxy_cert_file, proxy_key_file) logs in at the store host with AUTHENTICATE EXTERNAL, the
user as the authorization identity, and no secret (the store host's log says
credential=certificate). Refused at the store host: a certificate of another CA, none, the
mechanism without TLS, from an address not in proxy_trusted, with an empty authorization
identity. Without a certificate the front's shared secret still works; a store host with
proxy_require_tls = yes refuses the secret in clear (the front with proxy_tls = none) and
takes it over TLS.

  test_proxy_cert.py SOURCE_ROOT MTAD IMAPD STORE_PEEK MANAGESIEVED"""
import base64
import imaplib
import os
import re
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heroncluster import FRONT_ADDR, Cluster, IMAPFrom, run_cluster, sighup  # noqa: E402
from heronlib import (DOMAIN, assert_eq, assert_in, assert_raises,  # noqa: E402
                      tls_client_ctx, write_conf)

ROOT, MTAD, IMAPD, PEEK, MSD = sys.argv[1:6]
TMP = tempfile.mkdtemp(prefix="heron-cluster-proxycert-")
UNTRUSTED = "127.0.0.5"  # not the fronts' address (proxy_trusted is 127.0.0.1/32)
USER1 = f"user1@{DOMAIN}".encode()  # an authorization identity: the user's address


def openssl(*args):
    subprocess.run(["openssl", *args], capture_output=True, check=True)


def make_ca(name):
    """A CA (its certificate and key under TMP/name.*)."""
    cert, key = os.path.join(TMP, name + ".pem"), os.path.join(TMP, name + ".key")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", cert, "-days", "2", "-subj", f"/CN={name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    return cert, key


def make_client_cert(name, ca):
    """A TLS client certificate for name signed by ca: (cert, key)."""
    cert, key = os.path.join(TMP, name + ".pem"), os.path.join(TMP, name + ".key")
    csr, ext = os.path.join(TMP, name + ".csr"), os.path.join(TMP, name + ".ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
                "extendedKeyUsage=clientAuth\n")
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", f"/CN={name}")
    openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
            "-out", cert, "-days", "2", "-extfile", ext)
    return cert, key


FRONTS_CA = make_ca("fronts-ca")
OTHER_CA = make_ca("other-ca")
FRONT_CERT = make_client_cert("front1", FRONTS_CA)
ROGUE_CERT = make_client_cert("rogue", OTHER_CA)


def main():
    store_keys = {"proxy_client_ca_file": FRONTS_CA[0]}
    cl = Cluster(ROOT, MTAD, IMAPD, PEEK, TMP, users=8, front=True, msd=MSD,
                 extra={"imapd": dict(store_keys), "sieve": dict(store_keys)},
                 front_sections={"imapd": {"proxy_cert_file": "", "proxy_key_file": ""},
                                 "sieve": {"proxy_cert_file": "", "proxy_key_file": ""}})
    h1 = h2 = front = None

    def front_cert(pair):
        """The front's client certificate (None: none), both daemons reloaded."""
        front.set_all("proxy_cert_file", pair[0] if pair else "")
        front.set_all("proxy_key_file", pair[1] if pair else "")
        for d in front.daemons():
            sighup(d)

    def store_key(h, key, value):
        """[imapd] and [sieve] key = value on store host h, its daemons reloaded."""
        for sec in ("imapd", "sieve"):
            h.sections[sec][key] = value
        write_conf(h.conf, h.sections)
        for d in (h.imapd, h.msd):
            sighup(d)

    def store_line(h, user, since):
        """The store host's log line of user's proxy login after offset since (user: its
        login or address)."""
        at = re.compile(rf" imap login addr=\S+ user={re.escape(user)}(@\S+)? via=proxy ")
        lines = [line for line in h.imapd.logtext()[since:].splitlines() if at.search(line)]
        assert_eq(len(lines), 1)
        return lines[0]

    def direct(h, cert=None, tls=True, source="127.0.0.1"):
        """A client of h's imapd from source (a front's address unless told), in TLS with the
        client certificate cert (a pair, or None) unless tls is False."""
        c = IMAPFrom(source, h.addr, h.imap_port)
        if tls:
            ctx = tls_client_ctx(cl.ca)
            if cert:
                ctx.load_cert_chain(*cert)
            c.starttls(ssl_context=ctx)
        return c

    def external_refused(c, authz, reason, h):
        since = len(h.imapd.logtext())
        with assert_raises(imaplib.IMAP4.error) as ex:
            c.authenticate("EXTERNAL", lambda _: authz)
        c.logout()
        if reason is not None:
            assert_in(f'reason="{reason}', store_line(h, authz.decode().split("@")[0], since))
        return str(ex.exception)

    def test_front_logs_in_by_certificate():
        front_cert(FRONT_CERT)
        since = len(h1.imapd.logtext())
        front.login("user1")
        line = store_line(h1, "user1", since)
        assert_in("result=ok", line)
        assert_in("credential=certificate", line)

    def test_sieve_front_logs_in_by_certificate():
        # the front's managesieved: the same EXTERNAL login at the store host's managesieved
        front_cert(FRONT_CERT)
        since = len(h2.msd.logtext())
        s = socket.create_connection((front.addr, front.sieve_port), timeout=20)
        f = s.makefile("rb")

        def response():
            for _ in range(100):
                line = f.readline().rstrip(b"\r\n").decode()
                assert line, "closed"
                if line.split(" ", 1)[0] in ("OK", "NO", "BYE"):
                    return line
            raise AssertionError("no end of the response")

        response()
        s.sendall(b"STARTTLS\r\n")
        assert response().startswith("OK")
        s = tls_client_ctx(front.cert).wrap_socket(s, server_hostname=FRONT_ADDR)
        f = s.makefile("rb")
        response()
        b64 = base64.b64encode(b"\0user2\0user2").decode()
        s.sendall(f'AUTHENTICATE "PLAIN" "{b64}"\r\n'.encode())
        assert response().startswith("OK")
        s.sendall(b"LOGOUT\r\n")
        s.close()
        assert_in(f"user=user2@{DOMAIN} via=proxy credential=certificate",
                  h2.msd.logtext()[since:])

    def test_certificate_of_another_ca_refused():
        front_cert(ROGUE_CERT)
        since = len(h1.imapd.logtext())
        front.login_unavailable("user1")
        line = store_line(h1, "user1", since)
        assert_in('reason="client certificate not verified', line)

    def test_external_checked_by_the_store_host():
        # clients of the store host itself, from the fronts' address unless said
        c = direct(h1, FRONT_CERT)
        assert_in(b"AUTH=EXTERNAL", c.capability()[1][0])
        typ, _ = c.authenticate("EXTERNAL", lambda _: f"user3@{DOMAIN}".encode())
        assert_eq(typ, "OK")
        assert_eq(c.select("INBOX")[0], "OK")
        c.logout()
        external_refused(direct(h1), USER1, "no client certificate", h1)
        external_refused(direct(h1, ROGUE_CERT), USER1, "client certificate not verified", h1)
        external_refused(direct(h1, tls=False), USER1, "EXTERNAL without TLS", h1)
        c = direct(h1, FRONT_CERT, source=UNTRUSTED)
        assert b"AUTH=EXTERNAL" not in c.capability()[1][0]
        external_refused(c, USER1, "not from a proxy_trusted address", h1)
        empty = external_refused(direct(h1, FRONT_CERT), b"", None, h1)
        assert_in("AUTHENTICATIONFAILED", empty)

    def test_shared_secret_still_works():
        front_cert(None)
        since = len(h1.imapd.logtext())
        front.login("user1")
        assert_in("credential=secret", store_line(h1, "user1", since))

    def test_require_tls_refuses_the_secret_in_clear():
        front_cert(None)
        store_key(h1, "proxy_require_tls", "yes")
        try:
            front.set_all("proxy_tls", "none")
            sighup(front.imapd)
            since = len(h1.imapd.logtext())
            front.login_unavailable("user1")
            assert_in('reason="the shared secret in clear',
                      store_line(h1, "user1", since))
            front.set_all("proxy_tls", "starttls")
            sighup(front.imapd)
            since = len(h1.imapd.logtext())
            front.login("user1")  # the secret over TLS
            assert_in("result=ok", store_line(h1, "user1", since))
        finally:
            front.set_all("proxy_tls", "starttls")
            sighup(front.imapd)
            store_key(h1, "proxy_require_tls", "no")

    def test_client_unauthenticate_then_external():
        # the front's certificate belongs to its connection: a user who sends UNAUTHENTICATE
        # through the front, then EXTERNAL naming another user, must not become that user
        front_cert(FRONT_CERT)
        c = IMAPFrom("127.0.0.9", front.addr, front.imap_port)
        c.starttls(ssl_context=tls_client_ctx(front.cert))
        assert_eq(c.login("user1", "user1")[0], "OK")
        since = len(h1.imapd.logtext())

        c.command(b"u UNAUTHENTICATE")
        got = c.command(b"v AUTHENTICATE EXTERNAL " +
                      base64.b64encode(f"user3@{DOMAIN}".encode()))
        assert got.startswith(b"v NO"), got
        assert "user=user3 via=proxy result=ok" not in h1.imapd.logtext()[since:]
        c.logout()

    def on_start(cl):
        nonlocal h1, h2, front
        h1, h2, front = cl.hosts[0], cl.hosts[1], cl.front

    return run_cluster(cl, TMP, [test_front_logs_in_by_certificate,
                                 test_sieve_front_logs_in_by_certificate,
                                 test_certificate_of_another_ca_refused,
                                 test_external_checked_by_the_store_host,
                                 test_shared_secret_still_works,
                                 test_require_tls_refuses_the_secret_in_clear,
                                 test_client_unauthenticate_then_external], on_start)


if __name__ == "__main__":
    sys.exit(main())
