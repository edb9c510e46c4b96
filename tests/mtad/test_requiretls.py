#!/usr/bin/env python3
"""test_requiretls.py — REQUIRETLS (RFC 8689) in mtad: offered in EHLO only under TLS, MAIL
FROM ... REQUIRETLS refused without TLS (530 5.7.10) and taken with it; relayed through a
private DNS world (scripts/dns, signed zone, DANE) only over verified TLS to an exchanger
that offers REQUIRETLS, with REQUIRETLS on its MAIL command; bounced with 5.7.30 when the
exchanger does not offer it or when the path is not authenticated (an unsigned MX), the
bounce returning headers only; the same messages without REQUIRETLS go as usual.

  test_requiretls.py SOURCE_ROOT MTAD STORE_PEEK"""
import hashlib
import os
import re
import smtplib
import ssl
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DnsWorld, Mtad, RelayTarget, close_peers, free_port,  # noqa: E402
                      make_cert, run_main, run_tests, wait_for, write_users)

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-rtls-")
PORT = free_port()
SENDER = "sender@src.plain.test"
CERT, KEY = make_cert(TMP, "mx")


def spki_sha256(cert):
    pub = subprocess.run(["openssl", "x509", "-in", cert, "-pubkey", "-noout"],
                         capture_output=True, check=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "DER"], input=pub,
                         capture_output=True, check=True).stdout
    return hashlib.sha256(der).hexdigest()


def spec():
    t = "_%d._tcp." % PORT
    h = spki_sha256(CERT)
    return {
        "signed.test": {"signed": True, "records": [
            "mxr A 127.0.0.2", t + "mxr TLSA 3 1 1 " + h, "yes MX 10 mxr",
            "mxn A 127.0.0.3", t + "mxn TLSA 3 1 1 " + h, "no MX 10 mxn"]},
        "plain.test": {"records": [
            "srcmx A 127.0.0.8", "src MX 10 srcmx", "mxu A 127.0.0.2", "unsigned MX 10 mxu"]},
    }


world = None
targets = {}
write_users(os.path.join(TMP, "users"), ["user1"])
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"trusted_networks": "127.0.0.0/8", "relay_port": str(PORT)})


def setup():
    global world
    world = DnsWorld(ROOT, TMP, spec())
    targets["r"] = RelayTarget(port=PORT, host="127.0.0.2", tls=(CERT, KEY), requiretls=True)
    targets["n"] = RelayTarget(port=PORT, host="127.0.0.3", tls=(CERT, KEY))
    targets["src"] = RelayTarget(port=PORT, host="127.0.0.8")
    mtad.sections["dns"] = world.conf()
    mtad.write_conf()
    mtad.start()


def cleanup():
    close_peers(targets.values(), world)


def tls_session():
    c = smtplib.SMTP("127.0.0.1", mtad.port, timeout=30)
    c.ehlo()
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    c.starttls(context=ctx)
    c.ehlo()
    return c


def send(rcpt, subject, requiretls=True):
    with tls_session() as c:
        c.sendmail(SENDER, [rcpt], f"Subject: {subject}\r\n\r\nsecret body {subject}\r\n",
                   mail_options=["REQUIRETLS"] if requiretls else [])


def bounce_for(rcpt):
    for _m, _r, data in targets["src"].messages:
        if ("Final-Recipient: rfc822; " + rcpt).encode() in data:
            return data.decode(errors="replace")
    return None


def test_submission_side():
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=30) as c:
        c.ehlo()
        assert not c.has_extn("requiretls")
        code, msg = c.docmd("MAIL FROM:<%s> REQUIRETLS" % SENDER)
        assert code == 530 and b"5.7.10" in msg, (code, msg)
    with tls_session() as c:
        assert c.has_extn("requiretls")
        assert c.docmd("MAIL FROM:<%s> REQUIRETLS" % SENDER)[0] == 250
        assert c.docmd("RSET")[0] == 250
        assert c.docmd("MAIL FROM:<%s> REQUIRETLS=yes" % SENDER)[0] == 501


def test_relayed_with_requiretls():
    send("u@yes.signed.test", "yes")
    wait_for(lambda: targets["r"].with_subject("yes"), 60, "REQUIRETLS mail delivered")
    assert any(l.endswith(" REQUIRETLS") for l in targets["r"].mail_lines), \
        targets["r"].mail_lines
    assert targets["r"].tls_messages >= 1
    assert re.search(r"to=<u@yes\.signed\.test>.*tls=dane .*status=sent", mtad.logtext())


def test_bounced_without_a_path():
    send("u@no.signed.test", "nooffer")
    send("u@unsigned.plain.test", "unsignedpath")
    for rcpt in ("u@no.signed.test", "u@unsigned.plain.test"):
        wait_for(lambda: bounce_for(rcpt), 60, f"a bounce for {rcpt}")
        dsn = bounce_for(rcpt)
        assert "Status: 5.7.30" in dsn, dsn
        assert "secret body" not in dsn  # headers only
    assert not targets["n"].with_subject("nooffer")
    assert not targets["r"].with_subject("unsignedpath")


def test_without_requiretls_as_usual():
    send("u@unsigned.plain.test", "plainok", requiretls=False)
    wait_for(lambda: targets["r"].with_subject("plainok"), 60, "ordinary mail delivered")


def body():
    setup()
    return run_tests([test_submission_side, test_relayed_with_requiretls,
                      test_bounced_without_a_path, test_without_requiretls_as_usual])


if __name__ == "__main__":
    sys.exit(run_main(body, TMP, [mtad], cleanup=[cleanup]))
