#!/usr/bin/env python3
"""test_dane.py — outbound TLS policy of mtad against a private DNS world (scripts/dns: a
signed and an unsigned zone, nsd + a validating unbound; mtad validates DNSSEC itself from the
world's trust anchor) and in-test SMTP servers with STARTTLS on 127.0.0.x: DANE-EE (SHA-256
and SHA-512 of the key, the full certificate) and DANE-TA (SHA-256 of the issuing CA, the
exchanger's name in the certificate) deliver over verified TLS and log tls=dane with the
protocol and cipher; a TLSA record that matches nothing, or an exchanger without STARTTLS,
defers the mail (never plaintext) or moves to the next exchanger; TLSA records in an
unsigned zone are ignored (tls=may); transport_map tls=verify refuses a certificate that does
not verify and tls=none sends in plaintext.

  test_dane.py SOURCE_ROOT MTAD STORE_PEEK"""
import hashlib
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (close_peers, send_subject, DnsWorld, Mtad, RelayTarget, free_port, make_cert, run_main,  # noqa: E402
                      run_tests, wait_for, write_users)

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-dane-")
PORT = free_port()
SENDER = "sender@src.plain.test"


def openssl(*args, inp=None):
    r = subprocess.run(["openssl"] + list(args), input=inp, capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout


def spki_der(cert):
    pub = openssl("x509", "-in", cert, "-pubkey", "-noout")
    return openssl("pkey", "-pubin", "-outform", "DER", inp=pub)


def cert_der(cert):
    return openssl("x509", "-in", cert, "-outform", "DER")


def ca_and_leaf(name):
    """A CA and a leaf for name signed by it: (chain file leaf+CA, key, CA file)."""
    ca, cakey = os.path.join(TMP, "ca.pem"), os.path.join(TMP, "ca.key")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", cakey, "-out", ca, "-days", "2", "-subj", "/CN=Heron test CA")
    key, csr, leaf = (os.path.join(TMP, "ta." + x) for x in ("key", "csr", "pem"))
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=" + name)
    ext = os.path.join(TMP, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:%s\n" % name)
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", cakey, "-CAcreateserial",
            "-out", leaf, "-days", "2", "-extfile", ext)
    chain = os.path.join(TMP, "ta-chain.pem")
    with open(chain, "w") as f:
        f.write(open(leaf).read() + open(ca).read())
    return chain, key, ca


CERT, KEY = make_cert(TMP, "mx")
CHAIN, TAKEY, CA = ca_and_leaf("mxta.signed.test")
SHA256 = hashlib.sha256(spki_der(CERT)).hexdigest()
SHA512 = hashlib.sha512(spki_der(CERT)).hexdigest()
FULL = cert_der(CERT).hex()
TA256 = hashlib.sha256(cert_der(CA)).hexdigest()
WRONG = "00" * 32


def spec():
    t = "_%d._tcp." % PORT
    return {
        "signed.test": {"signed": True, "records": [
            "mxok A 127.0.0.2", t + "mxok TLSA 3 1 1 " + SHA256,
            "mx512 A 127.0.0.2", t + "mx512 TLSA 3 1 2 " + SHA512,
            "mxfull A 127.0.0.2", t + "mxfull TLSA 3 0 0 " + FULL,
            "mxbad A 127.0.0.3", t + "mxbad TLSA 3 1 1 " + WRONG,
            "mxplain A 127.0.0.4", t + "mxplain TLSA 3 1 1 " + SHA256,
            "mxta A 127.0.0.5", t + "mxta TLSA 2 0 1 " + TA256,
            "ok MX 10 mxok", "sha512 MX 10 mx512", "full MX 10 mxfull", "ta MX 10 mxta",
            "bad MX 10 mxbad", "notls MX 10 mxplain",
            "badthenok MX 10 mxbad", "badthenok MX 20 mxok"]},
        "plain.test": {"records": [
            "srcmx A 127.0.0.8", "src MX 10 srcmx",
            "mxu A 127.0.0.3", t + "mxu TLSA 3 1 1 " + WRONG, "unsigned MX 10 mxu"]},
    }


world = None
targets = {}
write_users(os.path.join(TMP, "users"), ["user1"])
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"trusted_networks": "127.0.0.0/8", "relay_port": str(PORT),
             "transport_map": ("verify.test=[127.0.0.3]:%d tls=verify,"
                               "none.test=[127.0.0.2]:%d tls=none" % (PORT, PORT))},
            tls=False)


def setup():
    global world
    world = DnsWorld(ROOT, TMP, spec())
    targets["ok"] = RelayTarget(port=PORT, host="127.0.0.2", tls=(CERT, KEY))
    targets["bad"] = RelayTarget(port=PORT, host="127.0.0.3", tls=(CERT, KEY))
    targets["plain"] = RelayTarget(port=PORT, host="127.0.0.4")
    targets["ta"] = RelayTarget(port=PORT, host="127.0.0.5", tls=(CHAIN, TAKEY))
    targets["src"] = RelayTarget(port=PORT, host="127.0.0.8")
    mtad.sections["dns"] = world.conf()
    mtad.write_conf()
    mtad.start()


def cleanup():
    close_peers(targets.values(), world)


def send(rcpt, subject):
    send_subject(mtad.port, SENDER, rcpt, subject)


def got(name, subject):
    return targets[name].with_subject(subject)


def line_for(rcpt, status):
    m = re.search(r"to=<%s>[^\n]*status=%s[^\n]*" % (re.escape(rcpt), status), mtad.logtext())
    return m.group(0) if m else None


def test_dane_delivers():
    for rcpt, name in [("u@ok.signed.test", "ok"), ("u@sha512.signed.test", "ok"),
                       ("u@full.signed.test", "ok"), ("u@ta.signed.test", "ta"),
                       ("u@badthenok.signed.test", "ok")]:
        send(rcpt, rcpt)
        wait_for(lambda: got(name, rcpt), 60, f"{rcpt} delivered")
        line = line_for(rcpt, "sent")
        assert line and re.search(r"tls=dane TLSv1\.[23] \S+", line), (rcpt, line)
    assert targets["ok"].tls_messages >= 4 and targets["ta"].tls_messages == 1
    assert "Verified (DANE) TLS connection established" in mtad.logtext()


def test_dane_never_plaintext():
    for rcpt, why in [("u@bad.signed.test", "4.7.5"), ("u@notls.signed.test", "4.7.4")]:
        send(rcpt, rcpt)
        wait_for(lambda: line_for(rcpt, "deferred"), 60, f"{rcpt} deferred")
        assert why in line_for(rcpt, "deferred"), line_for(rcpt, "deferred")
    assert not got("bad", "u@bad.signed.test") and not got("plain", "u@notls.signed.test")


def test_unsigned_tlsa_ignored():
    send("u@unsigned.plain.test", "unsigned")
    wait_for(lambda: got("bad", "unsigned"), 60, "the unsigned zone's mail delivered")
    line = line_for("u@unsigned.plain.test", "sent")
    assert line and "tls=may TLSv1." in line, line


def test_transport_overrides():
    send("u@verify.test", "verify")
    wait_for(lambda: line_for("u@verify.test", "deferred"), 60, "tls=verify deferred")
    assert "4.7.5" in line_for("u@verify.test", "deferred")
    assert not got("bad", "verify")
    send("u@none.test", "none")
    wait_for(lambda: got("ok", "none"), 60, "tls=none delivered")
    assert "tls=none" in line_for("u@none.test", "sent")


def body():
    setup()
    return run_tests([test_dane_delivers, test_dane_never_plaintext, test_unsigned_tlsa_ignored,
                      test_transport_overrides])


if __name__ == "__main__":
    sys.exit(run_main(body, TMP, [mtad], cleanup=[cleanup]))
