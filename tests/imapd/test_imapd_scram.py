"""imapd AUTHENTICATE SCRAM-SHA-256 and SCRAM-SHA-256-PLUS (RFC 5802, RFC 7677) with an
independent client, GNU gsasl: plain SCRAM, -PLUS over STARTTLS and over implicit TLS with
the binding gsasl offers on TLS 1.3 (tls-exporter), its TLS 1.2 offer (tls-unique, which
Heron does not take), the "y" downgrade refused, a wrong password. The secret is made by
`gsasl --mkpasswd` (not by Heron). tls-server-end-point, a tampered binding, SASL-IR and bad
messages go through a small client written here (hashlib/hmac), since gsasl offers no
end-point binding and cannot be made to lie.

Usage: test_imapd_scram.py IMAPD_BINARY DELIVER_BINARY"""
import base64
import hashlib
import hmac
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import DOMAIN, Imapd, ImapRaw, after_test, assert_eq, assert_in  # noqa: E402
from heronlib import assert_not_in, file_directory, run_suite, sha256_hash  # noqa: E402

D = None
PASSWORD = "pencil-Heron"
CTX = None


def mkpasswd(password):
    r = subprocess.run(["gsasl", "--mkpasswd", "--mechanism", "SCRAM-SHA-256", "--password",
                        password, "--iteration-count", "4096"],
                       capture_output=True, text=True, timeout=30, check=True)
    assert r.stdout.startswith("{SCRAM-SHA-256}4096,"), r.stdout
    return r.stdout.strip()


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


# ---- a client written here, for what gsasl cannot do ----

def b64(b):
    return base64.b64encode(b).decode()


class Scram:
    """The client side of RFC 5802 over an ImapRaw connection."""

    def __init__(self, raw, user, password, gs2="n,,", cbdata=b""):
        self.r, self.user, self.password, self.gs2, self.cbdata = raw, user, password, gs2, cbdata
        self.cnonce = b64(os.urandom(18))

    def first(self):
        return "n=%s,r=%s" % (self.user, self.cnonce)

    def final(self, sfirst, tamper=False):
        attrs = dict(kv.split("=", 1) for kv in sfirst.split(","))
        assert attrs["r"].startswith(self.cnonce)
        salt, it = base64.b64decode(attrs["s"]), int(attrs["i"])
        sp = hashlib.pbkdf2_hmac("sha256", self.password.encode(), salt, it)
        ck = hmac.new(sp, b"Client Key", "sha256").digest()
        stored = hashlib.sha256(ck).digest()
        cb = self.gs2.encode() + self.cbdata
        if tamper:
            cb = cb[:-1] + bytes([cb[-1] ^ 1])
        wp = "c=%s,r=%s" % (b64(cb), attrs["r"])
        am = "%s,%s,%s" % (self.first(), sfirst, wp)
        sig = hmac.new(stored, am.encode(), "sha256").digest()
        proof = bytes(a ^ b for a, b in zip(ck, sig))
        sk = hmac.new(sp, b"Server Key", "sha256").digest()
        self.want_v = "v=" + b64(hmac.new(sk, am.encode(), "sha256").digest())
        return "%s,p=%s" % (wp, b64(proof))

    def run(self, mech, tag="a", tamper=False, ir=False):
        """The whole exchange; the tagged reply's line."""
        first = b64((self.gs2 + self.first()).encode())
        if ir:
            self.r.send("%s AUTHENTICATE %s %s\r\n" % (tag, mech, first))
        else:
            self.r.send("%s AUTHENTICATE %s\r\n" % (tag, mech))
            assert_eq(self.r.line(), "+ ")
            self.r.send(first + "\r\n")
        line = self.r.line()
        if not line.startswith("+ "):
            return line
        self.r.send(b64(self.final(base64.b64decode(line[2:]).decode(), tamper).encode())
                    + "\r\n")
        line = self.r.line()
        if not line.startswith("+ "):
            return line
        assert_eq(base64.b64decode(line[2:]).decode(), self.want_v)  # the server knew the key
        self.r.send("\r\n")
        return self.r.until_tag(tag)[-1]


def end_point(sock):
    """tls-server-end-point (RFC 5929 4.1): the certificate's hash; ours is ECDSA-SHA256."""
    return hashlib.sha256(sock.getpeercert(binary_form=True)).digest()


def test_tls_server_end_point():
    r = ImapRaw(D.tls_port, tls_ctx=CTX)
    after_test(r.close)
    s = Scram(r, "carol", PASSWORD, "p=tls-server-end-point,,", end_point(r.s))
    assert s.run("SCRAM-SHA-256-PLUS").startswith("a OK [CAPABILITY "), "end-point"
    assert r.cmd("b", "SELECT INBOX")[-1].startswith("b OK")


def test_tampered_binding_refused():
    for gs2 in ("p=tls-server-end-point,,",):
        r = ImapRaw(D.tls_port, tls_ctx=CTX)
        after_test(r.close)
        s = Scram(r, "carol", PASSWORD, gs2, end_point(r.s))
        assert_eq(s.run("SCRAM-SHA-256-PLUS", tamper=True),
                  "a NO [AUTHENTICATIONFAILED] Authentication failed")
    assert_in('reason="channel binding refused"', D.logtext())


def test_y_flag_over_tls_refused():
    r = ImapRaw(D.tls_port, tls_ctx=CTX)
    after_test(r.close)
    assert_eq(Scram(r, "carol", PASSWORD, "y,,").run("SCRAM-SHA-256"),
              "a NO [AUTHENTICATIONFAILED] Authentication failed")
    # without TLS (no -PLUS advertised) "y" is what an honest client says: it logs in
    p = ImapRaw(D.port)
    after_test(p.close)
    assert Scram(p, "carol", PASSWORD, "y,,").run("SCRAM-SHA-256").startswith("a OK")


def test_sasl_ir_and_users_without_secret():
    r = ImapRaw(D.port)
    after_test(r.close)
    assert Scram(r, "carol", PASSWORD).run("SCRAM-SHA-256", ir=True).startswith("a OK")
    # alice has a {SHA256} hash only, nobody does not exist: the same exchange, refused at the
    # proof (the server-first looks alike)
    for user in ("alice", "nobody"):
        q = ImapRaw(D.port)
        after_test(q.close)
        assert_eq(Scram(q, user, PASSWORD).run("SCRAM-SHA-256"),
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
    assert Scram(r, "carol", PASSWORD).run("SCRAM-SHA-256", tag="c").startswith("c OK")


TESTS = [test_capability, test_gsasl_plain_scram, test_gsasl_plus_tls_exporter,
         test_gsasl_plus_tls12_unique_refused, test_gsasl_downgrade_refused,
         test_gsasl_wrong_password, test_tls_server_end_point, test_tampered_binding_refused,
         test_y_flag_over_tls_refused, test_sasl_ir_and_users_without_secret, test_bad_messages]


def main():
    global D, CTX
    tmp = tempfile.mkdtemp(prefix="heron-scram-")
    users = os.path.join(tmp, "users")
    with open(users, "w") as f:
        f.write(f"carol:{mkpasswd(PASSWORD)}:carol@{DOMAIN}\n")
        f.write(f"alice:{sha256_hash(PASSWORD)}:alice@{DOMAIN}\n")
    D = Imapd(sys.argv[1], deliver=sys.argv[2], tls=True, directory=file_directory(users))
    CTX = ssl.create_default_context(cafile=D.cert)
    return run_suite(D, TESTS, D.dir, cleanup=[lambda: shutil.rmtree(tmp, ignore_errors=True)])


if __name__ == "__main__":
    sys.exit(main())
