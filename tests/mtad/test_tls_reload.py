#!/usr/bin/env python3
"""test_tls_reload.py — a certificate renewed under the same file names (as certbot does) is
served by mtad after SIGHUP, on STARTTLS (port 25 role) and implicit TLS (465 role), in every
worker, while a session that was already in TLS before the signal goes on undisturbed; a
renewed file that does not load leaves the certificate in force.

  test_tls_reload.py SOURCE_ROOT MTAD STORE_PEEK"""
import os
import shutil
import signal
import smtplib
import socket
import ssl
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, HOST, Mtad, make_cert, run_suite, tls_client_ctx,  # noqa: E402
                      wait_for, write_users)

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-tlsreload-")
WORKERS = 2
write_users(os.path.join(TMP, "users"), ["user1"])
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"workers": str(WORKERS)}, tls=True)
CERT, KEY = os.path.join(TMP, "cert.pem"), os.path.join(TMP, "key.pem")
OLD_CA = os.path.join(TMP, "old-ca.pem")
shutil.copy(CERT, OLD_CA)


def peer_cn(sock):
    return dict(x[0] for x in sock.getpeercert()["subject"])["commonName"]


def starttls_cn(cafile):
    """The CN of the certificate a new STARTTLS session verifies against cafile."""
    with smtplib.SMTP(HOST, mtad.port, timeout=15) as c:
        c.ehlo("client.test")
        c.starttls(context=tls_client_ctx(cafile))
        return peer_cn(c.sock)


def implicit(cafile):
    """A new implicit-TLS session (ready for commands) verified against cafile."""
    c = smtplib.SMTP_SSL(HOST, mtad.subs_port, timeout=15, context=tls_client_ctx(cafile))
    c.ehlo("client.test")
    return c


def hup(what):
    before = len(mtad.logtext())
    mtad.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: mtad.logtext()[before:].count(what) >= WORKERS, 20,
             f"{what!r} from every worker")
    return mtad.logtext()[before:]


def renew(name):
    """Writes a new certificate and key over cert.pem and key.pem (same names), the way an
    ACME client renews; returns the new certificate's own copy (the CA to trust)."""
    d = os.path.join(TMP, name)
    os.mkdir(d)
    cert, key = make_cert(d, name)
    shutil.copy(key, KEY + ".tmp")
    os.replace(KEY + ".tmp", KEY)
    shutil.copy(cert, CERT + ".tmp")
    os.replace(CERT + ".tmp", CERT)
    return cert


def test_renewed_certificate_served():
    assert starttls_cn(OLD_CA) == "localhost"
    held = implicit(OLD_CA)  # in TLS before the signal: must survive it
    assert held.noop()[0] == 250
    new_ca = renew("renewed")
    log = hup("TLS certificate reloaded")
    assert "[tls]" not in log or "restarted" not in log, log
    for _ in range(3 * WORKERS):  # new sessions land on every worker
        assert starttls_cn(new_ca) == "renewed"
        c = implicit(new_ca)
        assert peer_cn(c.sock) == "renewed"
        c.quit()
    try:
        starttls_cn(OLD_CA)
        raise AssertionError("the old certificate is still served")
    except ssl.SSLError:
        pass
    # the session of before goes on: a whole transaction over it
    assert held.noop()[0] == 250
    held.login("user1", "user1")
    held.mail(f"user1@{DOMAIN}")
    assert held.rcpt(f"user1@{DOMAIN}")[0] == 250
    assert held.data(b"Subject: held\r\n\r\nacross a reload\r\n")[0] == 250
    held.quit()


def test_broken_renewal_keeps_the_certificate():
    with open(CERT, "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    hup("reload failed, the old certificate stays")
    cafile = os.path.join(TMP, "renewed", "renewed.pem")
    for _ in range(2 * WORKERS):
        assert starttls_cn(cafile) == "renewed"
    with socket.create_connection((HOST, mtad.port), timeout=10) as s:
        assert s.recv(512).startswith(b"220")


def main():
    return run_suite(mtad, [test_renewed_certificate_served,
                            test_broken_renewal_keeps_the_certificate], TMP)


if __name__ == "__main__":
    sys.exit(main())
