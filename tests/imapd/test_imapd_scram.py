"""imapd AUTHENTICATE SCRAM-SHA-256 and SCRAM-SHA-256-PLUS (RFC 5802, RFC 7677) with an
independent client, GNU gsasl: plain SCRAM, -PLUS over STARTTLS and over implicit TLS with
the binding gsasl offers on TLS 1.3 (tls-exporter), its TLS 1.2 offer (tls-unique, which
Heron does not take), the "y" downgrade refused, a wrong password. The secret is made by
`gsasl --mkpasswd` (not by Heron). tls-server-end-point, a tampered binding, SASL-IR and bad
messages go through heronlib's ScramClient (written from RFC 5802), since gsasl offers no
end-point binding and cannot be made to lie.

Usage: test_imapd_scram.py IMAPD_BINARY DELIVER_BINARY"""
import base64
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import DOMAIN, Imapd, ImapRaw, after_test, assert_eq, assert_in  # noqa: E402
from heronlib import ScramClient, assert_not_in, file_directory, gsasl_mkpasswd  # noqa: E402
from heronlib import run_suite, sha256_hash, tls_server_end_point  # noqa: E402

D = None
PASSWORD = "pencil-Heron"
CTX = None


def gsasl(*args, password=PASSWORD, user="carol", port=None):
    """gsasl --imap against D; (exit code, what it printed)."""
    cmd = ["gsasl", "--imap", "--connect=127.0.0.1:%d" % (port or D.port), "-a", user,
           "-p", password, "--x509-ca-file=" + D.cert, "--verbose"] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout + r.stderr


def test_capability():
    r = ImapRaw(D.port)
    after_test(r.close)
    assert_in(" AUTH=PLAIN AUTH=SCRAM-SHA-256]", r.greeting)
    assert_not_in("SCRAM-SHA-256-PLUS", r.greeting)  # -PLUS only with TLS
    s = ImapRaw(D.tls_port, tls_ctx=CTX)
    after_test(s.close)
    assert_in(" AUTH=SCRAM-SHA-256 AUTH=SCRAM-SHA-256-PLUS]", s.greeting)
    assert_eq(r.cmd("a", "AUTHENTICATE SCRAM-SHA-256-PLUS"),
              ["a NO SCRAM-SHA-256-PLUS needs TLS"])


def test_gsasl_plain_scram():
    rc, out = gsasl("-m", "SCRAM-SHA-256", "--no-starttls")
    assert_eq(rc, 0, out)
    assert_in(". OK [CAPABILITY ", out)
    assert_in("server trusted", out)  # gsasl checked our v= (the ServerKey's signature)
    assert_in("imap login addr=127.0.0.1 user=carol mech=scram result=ok", D.logtext())


def test_gsasl_plus_tls_exporter():
    """TLS 1.3 over STARTTLS: gsasl binds with tls-exporter (gsasl has no implicit TLS)."""
    rc, out = gsasl("-m", "SCRAM-SHA-256-PLUS", "--starttls")
    assert_eq(rc, 0, out)
    assert_in(". OK [CAPABILITY ", out)


def test_gsasl_plus_tls12_unique_refused():
    """On TLS 1.2 gsasl offers tls-unique: not one Heron takes (RFC 9266 moved on)."""
    rc, out = gsasl("-m", "SCRAM-SHA-256-PLUS", "--starttls", "--priority=NORMAL:-VERS-TLS1.3")
    assert rc != 0, out
    assert_in(". NO [AUTHENTICATIONFAILED] Authentication failed", out)
    assert_in('mech=scram result=fail reason="channel binding refused"', D.logtext())


def test_gsasl_downgrade_refused():
    """Over TLS gsasl can bind; asked for plain SCRAM-SHA-256 it says "y" (it thinks the server
    cannot): with -PLUS advertised, that is a downgrade and fails."""
    rc, out = gsasl("-m", "SCRAM-SHA-256", "--starttls")
    assert rc != 0, out
    rc, out = gsasl("-m", "SCRAM-SHA-256", "--starttls", "--no-cb")
    assert_eq(rc, 0, out)  # "n": the client does not bind; no downgrade


def test_gsasl_wrong_password():
    rc, out = gsasl("-m", "SCRAM-SHA-256-PLUS", "--starttls", password="wrong")
    assert rc != 0, out
    assert_in(". NO [AUTHENTICATIONFAILED] Authentication failed", out)
    log = D.logtext()
    assert re.search(r"user=carol mech=scram result=wrong credentials cached=no failures=\d+ "
                     r"delay_ms=\d+ .*reason=\"SCRAM proof does not match\"", log), log[-3000:]


# ---- heronlib's client, for what gsasl cannot do ----

def b64(b):
    return base64.b64encode(b).decode()


def scram(r, mech, user="carol", gs2="n,,", cbdata=b"", tag="a", tamper=False, ir=False):
    """A whole exchange over ImapRaw r; the tagged reply's line."""
    c = ScramClient(user, PASSWORD, gs2, cbdata)
    if ir:
        r.send("%s AUTHENTICATE %s %s\r\n" % (tag, mech, c.first()))
    else:
        r.send("%s AUTHENTICATE %s\r\n" % (tag, mech))
        assert_eq(r.line(), "+ ")
        r.send(c.first() + "\r\n")
    line = r.line()
    if not line.startswith("+ "):
        return line
    r.send(c.final(line[2:], tamper) + "\r\n")
    line = r.line()
    if not line.startswith("+ "):
        return line
    assert c.final_ok(line[2:]), line  # the server knew the ServerKey
    r.send("\r\n")
    return r.until_tag(tag)[-1]


def test_tls_server_end_point():
    r = ImapRaw(D.tls_port, tls_ctx=CTX)
    after_test(r.close)
    out = scram(r, "SCRAM-SHA-256-PLUS", gs2="p=tls-server-end-point,,",
                cbdata=tls_server_end_point(r.s))
    assert out.startswith("a OK [CAPABILITY "), out
    assert r.cmd("b", "SELECT INBOX")[-1].startswith("b OK")


def test_tampered_binding_refused():
    r = ImapRaw(D.tls_port, tls_ctx=CTX)
    after_test(r.close)
    assert_eq(scram(r, "SCRAM-SHA-256-PLUS", gs2="p=tls-server-end-point,,",
                    cbdata=tls_server_end_point(r.s), tamper=True),
              "a NO [AUTHENTICATIONFAILED] Authentication failed")
    assert_in('reason="channel binding refused"', D.logtext())


def test_y_flag_over_tls_refused():
    r = ImapRaw(D.tls_port, tls_ctx=CTX)
    after_test(r.close)
    assert_eq(scram(r, "SCRAM-SHA-256", gs2="y,,"),
              "a NO [AUTHENTICATIONFAILED] Authentication failed")
    # without TLS (no -PLUS advertised) "y" is what an honest client says: it logs in
    p = ImapRaw(D.port)
    after_test(p.close)
    assert scram(p, "SCRAM-SHA-256", gs2="y,,").startswith("a OK")


def test_sasl_ir_and_users_without_secret():
    r = ImapRaw(D.port)
    after_test(r.close)
    assert scram(r, "SCRAM-SHA-256", ir=True).startswith("a OK")
    # alice has a {SHA256} hash only, nobody does not exist: the same exchange, refused at the
    # proof (the server-first looks alike)
    for user in ("alice", "nobody"):
        q = ImapRaw(D.port)
        after_test(q.close)
        assert_eq(scram(q, "SCRAM-SHA-256", user=user),
                  "a NO [AUTHENTICATIONFAILED] Authentication failed")
    log = D.logtext()
    assert_in('user=alice mech=scram result=wrong credentials', log)
    assert_in('reason="file: no SCRAM secret"', log)
    assert_in('reason="file: no such user"', log)


def test_bad_messages():
    r = ImapRaw(D.port)
    after_test(r.close)
    cases = [
        ("biws=", "a BAD Invalid base64"),                       # not base64
        (b64(b"n,,m=x,n=carol,r=abc"), "a NO [AUTHENTICATIONFAILED] Authentication failed"),
        (b64(b"n,,r=abc,n=carol"), "a NO [AUTHENTICATIONFAILED] Authentication failed"),
        (b64(b"n,a=alice,n=carol,r=abc"),
         "a NO [AUTHORIZATIONFAILED] Cannot act as another user"),
        ("*", "a BAD Authentication cancelled"),
        ("", "a NO [AUTHENTICATIONFAILED] Authentication failed"),
    ]
    for msg, want in cases:
        r.send("a AUTHENTICATE SCRAM-SHA-256\r\n")
        assert_eq(r.line(), "+ ")
        r.send(msg + "\r\n")
        assert_eq(r.line(), want)
    # a client-final that is not one: a failure the throttle counts
    r.send("b AUTHENTICATE SCRAM-SHA-256 %s\r\n" % b64(b"n,,n=carol,r=abc"))
    assert r.line().startswith("+ ")
    r.send(b64(b"c=biws,r=abc,p=AAAA") + "\r\n")
    assert_eq(r.until_tag("b")[-1], "b NO [AUTHENTICATIONFAILED] Authentication failed")
    # the session still works
    assert scram(r, "SCRAM-SHA-256", tag="c").startswith("c OK")


TESTS = [test_capability, test_gsasl_plain_scram, test_gsasl_plus_tls_exporter,
         test_gsasl_plus_tls12_unique_refused, test_gsasl_downgrade_refused,
         test_gsasl_wrong_password, test_tls_server_end_point, test_tampered_binding_refused,
         test_y_flag_over_tls_refused, test_sasl_ir_and_users_without_secret, test_bad_messages]


def main():
    global D, CTX
    tmp = tempfile.mkdtemp(prefix="heron-scram-")
    users = os.path.join(tmp, "users")
    with open(users, "w") as f:
        f.write(f"carol:{gsasl_mkpasswd(PASSWORD)}:carol@{DOMAIN}\n")
        f.write(f"alice:{sha256_hash(PASSWORD)}:alice@{DOMAIN}\n")
    D = Imapd(sys.argv[1], deliver=sys.argv[2], tls=True, directory=dict(file_directory(users), scram="yes"))
    CTX = ssl.create_default_context(cafile=D.cert)
    return run_suite(D, TESTS, D.dir, cleanup=[lambda: shutil.rmtree(tmp, ignore_errors=True)])


if __name__ == "__main__":
    sys.exit(main())
