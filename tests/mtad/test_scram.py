#!/usr/bin/env python3
"""test_scram.py — AUTH SCRAM-SHA-256 and SCRAM-SHA-256-PLUS in mtad (RFC 4954 with RFC 5802,
RFC 7677): offered after TLS on the submission ports (587 STARTTLS, 465 implicit) when the
directory holds SCRAM secrets; GNU gsasl --smtp logs in with -PLUS (tls-exporter on TLS 1.3),
its tls-unique offer on TLS 1.2 and its "y" downgrade are refused, a wrong password fails
and is counted by the login throttle; heronlib's ScramClient over smtplib on 465 binds with
tls-server-end-point, a tampered binding fails, and an authenticated session may send as its
own address. The secret is made by `gsasl --mkpasswd`.

  test_scram.py SOURCE_ROOT MTAD STORE_PEEK"""
import os
import re
import smtplib
import ssl
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Mtad, ScramClient, assert_eq, assert_in,  # noqa: E402
                      assert_not_in, gsasl_mkpasswd, run_main, run_tests, ssha,
                      tls_server_end_point)

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-scram-")
PASSWORD = "pencil-Heron"
USERS = os.path.join(TMP, "users")
with open(USERS, "w") as f:
    f.write(f"carol:{gsasl_mkpasswd(PASSWORD)}:carol@{DOMAIN}\n")
    f.write(f"alice:{ssha(PASSWORD)}:alice@{DOMAIN}\n")
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": USERS, "scram": "yes"})
CERT = os.path.join(TMP, "cert.pem")


def ctx():
    c = ssl.create_default_context(cafile=CERT)
    c.check_hostname = False
    return c


def gsasl(*args, password=PASSWORD):
    cmd = ["gsasl", "--smtp", "--connect=127.0.0.1:%d" % mtad.sub_port, "-a", "carol", "-p",
           password, "--x509-ca-file=" + CERT, "--verbose", "--starttls"] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout + r.stderr


def test_ehlo():
    with smtplib.SMTP("127.0.0.1", mtad.sub_port, timeout=20) as s:
        s.ehlo("client.test")
        assert_not_in("auth", s.esmtp_features)  # auth_require_tls: not before TLS
        s.starttls(context=ctx())
        s.ehlo("client.test")
        assert_eq(s.esmtp_features["auth"].strip(),
                  "PLAIN LOGIN SCRAM-SHA-256 SCRAM-SHA-256-PLUS")
    with smtplib.SMTP_SSL("127.0.0.1", mtad.subs_port, context=ctx(), timeout=20) as s:
        s.ehlo("client.test")
        assert_eq(s.esmtp_features["auth"].strip(),
                  "PLAIN LOGIN SCRAM-SHA-256 SCRAM-SHA-256-PLUS")


def test_gsasl_plus():
    rc, out = gsasl("-m", "SCRAM-SHA-256-PLUS")
    assert_eq(rc, 0, out)
    assert_in("235 2.7.0 Authentication successful", out)
    assert_in("server trusted", out)  # gsasl checked our v=


def test_gsasl_refusals():
    # TLS 1.2: gsasl binds with tls-unique, which Heron does not take
    rc, out = gsasl("-m", "SCRAM-SHA-256-PLUS", "--priority=NORMAL:-VERS-TLS1.3")
    assert rc != 0, out
    assert_in("535 5.7.8", out)
    assert re.search(r'smtp auth addr=127\.0\.0\.1:\d+ mech=scram result=fail '
                     r'reason="channel binding refused"', mtad.logtext()), mtad.logtext()[-3000:]
    # plain SCRAM over TLS: gsasl says "y" while -PLUS is advertised: a downgrade
    rc, out = gsasl("-m", "SCRAM-SHA-256")
    assert rc != 0, out
    rc, out = gsasl("-m", "SCRAM-SHA-256", "--no-cb")
    assert_eq(rc, 0, out)
    # a wrong password: refused, counted by the throttle
    rc, out = gsasl("-m", "SCRAM-SHA-256-PLUS", password="wrong")
    assert rc != 0, out
    assert_in("535 5.7.8 Authentication credentials invalid", out)
    assert re.search(r"smtp auth addr=127\.0\.0\.1:\d+ user=carol result=fail failures=\d+ "
                     r"delay_ms=\d+ .*reason=\"SCRAM proof does not match\"",
                     mtad.logtext()), mtad.logtext()[-3000:]


def exchange(s, mech, gs2, cbdata, tamper=False, user="carol"):
    """SCRAM over an smtplib session; the last (code, text)."""
    c = ScramClient(user, PASSWORD, gs2, cbdata)
    code, text = s.docmd("AUTH", "%s %s" % (mech, c.first()))
    if code != 334:
        return code, text
    code, text = s.docmd(c.final(text.decode(), tamper))
    if code != 334:
        return code, text
    assert c.final_ok(text.decode()), text
    return s.docmd("")


def test_end_point_and_sending():
    with smtplib.SMTP_SSL("127.0.0.1", mtad.subs_port, context=ctx(), timeout=20) as s:
        s.ehlo("client.test")
        code, text = exchange(s, "SCRAM-SHA-256-PLUS", "p=tls-server-end-point,,",
                              tls_server_end_point(s.sock))
        assert_eq(code, 235, text)
        # authenticated: carol may send as her own address
        s.sendmail(f"carol@{DOMAIN}", [f"alice@{DOMAIN}"],
                   b"From: carol@heron.test\r\nSubject: scram\r\n\r\nhi\r\n")


def test_tampered_and_no_secret():
    with smtplib.SMTP_SSL("127.0.0.1", mtad.subs_port, context=ctx(), timeout=20) as s:
        s.ehlo("client.test")
        code, text = exchange(s, "SCRAM-SHA-256-PLUS", "p=tls-server-end-point,,",
                              tls_server_end_point(s.sock), tamper=True)
        assert_eq(code, 535, text)
        # alice's hash is a salted SHA: no SCRAM secret, the same exchange refused
        code, text = exchange(s, "SCRAM-SHA-256", "n,,", b"", user="alice")
        assert_eq(code, 535, text)
        # "y" with -PLUS advertised
        code, text = exchange(s, "SCRAM-SHA-256", "y,,", b"")
        assert_eq(code, 535, text)
        # a bad message, a cancel; the session still logs in afterwards
        code, text = s.docmd("AUTH", "SCRAM-SHA-256 biws=")
        assert_eq(code, 501, text)
        code, text = s.docmd("AUTH", "SCRAM-SHA-256")
        assert_eq(code, 334, text)
        code, text = s.docmd("*")
        assert_eq(code, 501, text)
        code, text = exchange(s, "SCRAM-SHA-256-PLUS", "p=tls-server-end-point,,",
                              tls_server_end_point(s.sock))
        assert_eq(code, 235, text)
    log = mtad.logtext()
    assert_in('reason="channel binding refused"', log)
    assert_in('reason="file: no SCRAM secret"', log)


def body():
    mtad.start()
    return run_tests([test_ehlo, test_gsasl_plus, test_gsasl_refusals,
                      test_end_point_and_sending, test_tampered_and_no_secret])


if __name__ == "__main__":
    sys.exit(run_main(body, TMP, [mtad]))
