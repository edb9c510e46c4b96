#!/usr/bin/env python3
"""test_scram_slapd.py — SCRAM-SHA-256 and SCRAM-SHA-256-PLUS (RFC 5802, 7677) against the
real slapd of scripts/ldap, in [directory] auth_mode = lookup with scram = yes, through all
three daemons: imapd (implicit TLS), mtad (submissions) and managesieved (STARTTLS). The
directory's users hold {SCRAM-SHA-256} secrets: user1's and the refusal users' made by GNU
gsasl --mkpasswd, user2's by `mailctl pw` from a non-ASCII password that SASLprep changes
(RFC 4013: a no-break space, a soft hyphen, ROMAN NUMERAL NINE); user3 keeps slapd's {SSHA}.

The client is written here from the RFCs (heronlib.ScramClient over hashlib/hmac, SASLprep
from Python's stringprep tables with Unicode 3.2's NFKC, tls-exporter read from the test's own
TLS session through OpenSSL's SSL_export_keying_material, RFC 9266; tls-server-end-point
from the certificate, RFC 5929). For each daemon: plain SCRAM, -PLUS with tls-exporter (TLS
1.3) and with tls-server-end-point, user2 with the prepared password; refused: a wrong
password, a tampered binding, the end-point data sent as tls-exporter's (a binding mismatch),
user3 without a secret (then PLAIN logs user3 in); user2's PLAIN with the unprepared password
(Heron prepares it before checking the secret). GNU gsasl also logs in to imapd with -PLUS.

  test_scram_slapd.py SOURCE_ROOT MTAD IMAPD MANAGESIEVED MAILCTL"""
import base64
import ctypes
import os
import re
import smtplib
import socket
import ssl
import stringprep
import subprocess
import sys
import tempfile
import unicodedata

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (HOST, Daemon, ImapRaw, ScramClient, Slapd, after_test,  # noqa: E402
                      assert_eq, assert_in, free_port, gsasl_mkpasswd, make_cert, run_main,
                      run_tests, shared_conf, tls_server_end_point)

ROOT, MTAD, IMAPD, MSD, MAILCTL = sys.argv[1:6]
TMP = tempfile.mkdtemp(prefix="heron-scram-slapd-")
slapd = Slapd(ROOT, os.path.join(TMP, "ldap"), users=6)
PW1 = "pencil-Heron"
PW2 = "Pa\u00df\u00a0w\u00f6rd\u00ad\u2168"  # SASLprep: "Paß wördIX"
FAIL_USER = {"imapd": "user4", "mtad": "user5", "sieve": "user6"}  # refusals, one per daemon
IMAPS, SUBS, SIEVE = free_port(), free_port(), free_port()
CERT = KEY = None
DAEMONS = []


# ---- the client's side: SASLprep and the channel binding data ----

def saslprep(s):
    """RFC 4013 for the strings used here: B.1 mapped to nothing, C.1.2 spaces to SPACE,
    NFKC of Unicode 3.2; prohibited characters refused."""
    s = "".join(" " if stringprep.in_table_c12(c) else c for c in s
                if not stringprep.in_table_b1(c))
    s = unicodedata.ucd_3_2_0.normalize("NFKC", s)
    assert not any(stringprep.in_table_c21_c22(c) or stringprep.in_table_a1(c) for c in s), s
    return s


_libssl = ctypes.CDLL("libssl.so.3")  # the library Python's ssl module runs on
_libssl.SSL_version.argtypes = [ctypes.c_void_p]
_libssl.SSL_export_keying_material.argtypes = [
    ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
    ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]


def tls_exporter(sock):
    """RFC 9266 tls-exporter data of a TLS 1.3 socket: 32 bytes of the exporter with label
    "EXPORTER-Channel-Binding" and no context. Python has no call for it: the SSL * is read
    from CPython's _ssl object (after its head and its socket pointer) and checked by asking
    OpenSSL its version before use."""
    ptr = ctypes.c_void_p.from_address(id(sock._sslobj) + 3 * ctypes.sizeof(ctypes.c_void_p))
    assert_eq(_libssl.SSL_version(ptr.value), 0x0304)  # TLS1_3_VERSION
    out = ctypes.create_string_buffer(32)
    label = b"EXPORTER-Channel-Binding"
    assert_eq(_libssl.SSL_export_keying_material(ptr.value, out, 32, label, len(label), None,
                                                 0, 0), 1)
    return out.raw


def binding(sock, kind, wrong=False):
    """(gs2 header, channel data) for kind "n", "exporter" or "end-point"; wrong: the other
    type's data under this type's name."""
    if kind == "n":
        return "n,,", b""
    name = {"exporter": "tls-exporter", "end-point": "tls-server-end-point"}[kind]
    data = tls_exporter(sock) if (kind == "exporter") != wrong else tls_server_end_point(sock)
    return f"p={name},,", data


def ctx():
    c = ssl.create_default_context(cafile=CERT)
    c.check_hostname = False
    c.minimum_version = ssl.TLSVersion.TLSv1_3
    return c


# ---- one exchange per protocol: the outcome as (ok, the last line) ----

def imap_login(mech, user, password, kind, tamper=False, wrong=False):
    r = ImapRaw(IMAPS, tls_ctx=ctx())
    after_test(r.close)
    if mech == "PLAIN":
        ok = r.cmd("a", "AUTHENTICATE PLAIN " + plain(user, password))[-1]
        return ok.startswith("a OK"), ok
    c = ScramClient(user, password, *binding(r.s, kind, wrong))
    r.send("a AUTHENTICATE %s %s\r\n" % (mech, c.first()))
    line = r.line()
    if not line.startswith("+ "):
        return False, line
    r.send(c.final(line[2:], tamper) + "\r\n")
    line = r.line()
    if not line.startswith("+ "):
        return False, line
    assert c.final_ok(line[2:]), line  # the server knew the ServerKey
    r.send("\r\n")
    line = r.until_tag("a")[-1]
    return line.startswith("a OK"), line


def smtp_login(mech, user, password, kind, tamper=False, wrong=False):
    s = smtplib.SMTP_SSL(HOST, SUBS, context=ctx(), timeout=60)
    after_test(s.close)
    s.ehlo("client.test")
    if mech == "PLAIN":
        code, text = s.docmd("AUTH", "PLAIN " + plain(user, password))
        return code == 235, f"{code} {text}"
    c = ScramClient(user, password, *binding(s.sock, kind, wrong))
    code, text = s.docmd("AUTH", "%s %s" % (mech, c.first()))
    if code == 334:
        code, text = s.docmd(c.final(text.decode(), tamper))
        if code == 334:
            assert c.final_ok(text.decode()), text
            code, text = s.docmd("")
    return code == 235, f"{code} {text}"


class Sieve:
    """A line-level ManageSieve client over STARTTLS."""

    def __init__(self):
        self.s = socket.create_connection((HOST, SIEVE), timeout=60)
        self.f = self.s.makefile("rb")
        self.response()
        self.send("STARTTLS\r\n")
        assert self.response()[-1].startswith("OK")
        self.s = ctx().wrap_socket(self.s, server_hostname="localhost")
        self.f = self.s.makefile("rb")
        self.response()

    def send(self, text):
        self.s.sendall(text.encode())

    def line(self):
        return self.f.readline(1 << 16).decode(errors="replace").rstrip("\r\n")

    def response(self):
        lines = [self.line()]
        while not lines[-1].startswith(("OK", "NO", "BYE")) and lines[-1]:
            lines.append(self.line())
        return lines

    def close(self):
        self.s.close()


def sieve_login(mech, user, password, kind, tamper=False, wrong=False):
    r = Sieve()
    after_test(r.close)
    if mech == "PLAIN":
        r.send('AUTHENTICATE "PLAIN" "%s"\r\n' % plain(user, password))
        line = r.line()
        return line.startswith("OK"), line
    c = ScramClient(user, password, *binding(r.s, kind, wrong))
    r.send('AUTHENTICATE "%s" "%s"\r\n' % (mech, c.first()))
    line = r.line()  # a challenge (a string) or the outcome
    if not line.startswith('"'):
        return False, line
    r.send('"%s"\r\n' % c.final(line.strip('"'), tamper))
    line = r.line()
    if line.startswith("OK (SASL "):  # server-final comes with the OK (RFC 5804 2.1)
        assert c.final_ok(line.split('"')[1]), line
        return True, line
    return False, line


def plain(user, password):
    return base64.b64encode(f"\0{user}\0{password}".encode()).decode()


LOGIN = {"imapd": imap_login, "mtad": smtp_login, "sieve": sieve_login}
# a refusal is a protocol answer, not a dropped connection
REFUSED = {"imapd": "a NO [AUTHENTICATIONFAILED] ", "mtad": "535 ",
           "sieve": 'NO "Authentication failed"'}
DAEMON = {}


# ---- the tests, each for the three daemons ----

def each(fn):
    for name, login in LOGIN.items():
        fn(name, login)


def test_scram_and_plus():
    def run(name, login):
        for mech, kind in (("SCRAM-SHA-256", "n"), ("SCRAM-SHA-256-PLUS", "exporter"),
                           ("SCRAM-SHA-256-PLUS", "end-point")):
            ok, line = login(mech, "user1", PW1, kind)
            assert ok, f"{name} {mech} {kind}: {line}"
        assert re.search(r"user=user1 .*(mech=scram|reason=\"scram\")",
                         DAEMON[name].logtext()), DAEMON[name].logtext()[-3000:]
    each(run)


def test_non_ascii_password():
    prepared = saslprep(PW2)
    assert_eq(prepared, "Pa\u00df w\u00f6rdIX")

    def run(name, login):
        ok, line = login("SCRAM-SHA-256-PLUS", "user2", prepared, "exporter")
        assert ok, f"{name}: {line}"
        ok, line = login("SCRAM-SHA-256", "user2", prepared, "n")
        assert ok, f"{name}: {line}"
        # PLAIN with the password as typed: Heron prepares it before the secret is checked
        ok, line = login("PLAIN", "user2", PW2, "n")
        assert ok, f"{name} PLAIN: {line}"
    each(run)


def test_refusals():
    def run(name, login):
        user = FAIL_USER[name]
        for what, args in (("wrong password", ("wrong", "exporter")),
                           ("tampered binding", (PW1, "exporter", True)),
                           ("end-point data as tls-exporter's", (PW1, "exporter", False, True))):
            ok, line = login("SCRAM-SHA-256-PLUS", user, *args)
            assert not ok and line.startswith(REFUSED[name]), f"{name} {what}: {line}"
        log = DAEMON[name].logtext()
        assert_in('reason="SCRAM proof does not match"', log)
        assert_in('reason="channel binding refused"', log)
    each(run)


def test_user_without_secret():
    def run(name, login):
        ok, line = login("SCRAM-SHA-256", "user3", "user3", "n")
        assert not ok and line.startswith(REFUSED[name]), f"{name}: {line}"
        assert_in("no SCRAM secret", DAEMON[name].logtext())
        ok, line = login("PLAIN", "user3", "user3", "n")
        assert ok, f"{name} PLAIN: {line}"
    each(run)


def test_gsasl_imapd():
    """An independent SASL client too: GNU gsasl, -PLUS over STARTTLS (tls-exporter; gsasl has no implicit TLS)."""
    r = subprocess.run(["gsasl", "--imap", "--connect=%s:%d" % (HOST, DAEMON["imapd"].port),
                        "-a", "user1", "-p", PW1, "--x509-ca-file=" + CERT, "--verbose",
                        "-m", "SCRAM-SHA-256-PLUS", "--starttls"], capture_output=True, text=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    out = r.stdout + r.stderr
    assert_eq(r.returncode, 0, out)
    assert_in("server trusted", out)  # gsasl checked our v=


# ---- set-up ----

def set_password(user, value):
    e = slapd.env
    ldif = (f"dn: uid={user},{e['LDAP_PEOPLE']}\nchangetype: modify\nreplace: userPassword\n"
            f"userPassword: {value}\n")
    subprocess.run(["ldapmodify", "-x", "-H", e["LDAP_URI"], "-D", e["LDAP_ADMIN_DN"],
                    "-w", e["LDAP_ADMIN_PASSWORD"]], input=ldif.encode(), check=True,
                   stdout=subprocess.DEVNULL)


def setup():
    global CERT, KEY
    CERT, KEY = make_cert(TMP)
    set_password("user1", gsasl_mkpasswd(PW1))
    for user in FAIL_USER.values():
        set_password(user, gsasl_mkpasswd(PW1))
    r = subprocess.run([MAILCTL, "-c", os.path.join(TMP, "mailctl.conf"), "pw", "--scheme",
                        "SCRAM-SHA-256"], input=(PW2 + "\n").encode(), capture_output=True,
                       check=True, timeout=60)
    set_password("user2", r.stdout.decode().strip())
    conf, smtp_port, imap_port = shared_conf(TMP, [], keys={
        "tls": {"cert": CERT, "key": KEY},
        "directory": slapd.directory(auth_mode="lookup", scram="yes"),
        "mtad": {"submissions": f"{HOST}:{SUBS}"},
        "imapd": {"listen_tls": f"{HOST}:{IMAPS}"},
        "sieve": {"listen": f"{HOST}:{SIEVE}"}})
    DAEMON["mtad"] = Daemon(MTAD, conf, os.path.join(TMP, "mtad.log"), smtp_port)
    DAEMON["imapd"] = Daemon(IMAPD, conf, os.path.join(TMP, "imapd.log"), imap_port)
    DAEMON["sieve"] = Daemon(MSD, conf, os.path.join(TMP, "managesieved.log"), SIEVE)
    DAEMONS.extend(DAEMON.values())


def main():
    with open(os.path.join(TMP, "mailctl.conf"), "w") as f:  # mailctl pw reads no store
        f.write(f"[store]\npath = {TMP}/store\n")

    def body():
        slapd.start()
        setup()
        for d in DAEMONS:
            d.start()
        return run_tests([test_scram_and_plus, test_non_ascii_password, test_refusals,
                          test_user_without_secret, test_gsasl_imapd])
    return run_main(body, TMP, DAEMONS, cleanup=[slapd.stop], tail=8000)


if __name__ == "__main__":
    sys.exit(main())
