#!/usr/bin/env python3
"""test_managesieve_scram.py — managesieved AUTHENTICATE "SCRAM-SHA-256" and
"SCRAM-SHA-256-PLUS" (RFC 5804 with RFC 5802, RFC 7677) over STARTTLS: the SASL capability
after TLS (none before), GNU gsasl in its generic client mode bridged here onto ManageSieve
strings (sieve-connect's Perl SASL has no SCRAM), the server-final in OK (SASL "..."),
heronlib's ScramClient binding with tls-server-end-point, a tampered binding, a wrong
password, a user without a SCRAM secret, "y" while -PLUS is offered; sieve-connect still logs
in with PLAIN from the longer mechanism list.

  test_managesieve_scram.py SOURCE_ROOT MANAGESIEVED"""
import base64
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, HOST, Daemon, ScramClient, assert_eq, assert_in,  # noqa: E402
                      free_port, gsasl_mkpasswd, make_cert, run_main, run_tests, shared_conf,
                      tls_server_end_point)

ROOT, MSD = sys.argv[1:3]
TMP = tempfile.mkdtemp(prefix="heron-msieve-scram-")
MS_PORT = free_port()
CERT, KEY = make_cert(TMP)
PASSWORD = "pencil-Heron"
CONF, _, _ = shared_conf(TMP, ["alice"], keys={
    "tls": {"cert": CERT, "key": KEY},
    "sieve": {"listen": f"{HOST}:{MS_PORT}"},
    "directory": {"scram": "yes"},
})
with open(os.path.join(TMP, "users"), "a") as f:
    f.write(f"carol:{gsasl_mkpasswd(PASSWORD)}:carol@{DOMAIN}\n")
msd = Daemon(MSD, CONF, os.path.join(TMP, "managesieved.log"), MS_PORT)


class Raw:
    def __init__(self):
        self.s = socket.create_connection((HOST, MS_PORT), timeout=15)
        self.f = self.s.makefile("rb")
        self.caps = self.response()

    def send(self, data):
        self.s.sendall(data.encode())

    def line(self):
        return self.f.readline(1 << 16).decode(errors="replace").rstrip("\r\n")

    def response(self):
        lines = []
        while True:
            lines.append(self.line())
            if lines[-1].startswith(("OK", "NO", "BYE")) or not lines[-1]:
                return lines

    def starttls(self):
        self.send("STARTTLS\r\n")
        assert self.response()[-1].startswith("OK")
        ctx = ssl.create_default_context(cafile=CERT)
        ctx.check_hostname = False
        self.s = ctx.wrap_socket(self.s, server_hostname="localhost")
        self.f = self.s.makefile("rb")
        self.caps = self.response()
        return self


def tls():
    return Raw().starttls()


def unquote(line):
    assert line.startswith('"') and line.endswith('"'), line
    return line[1:-1]


def scram(r, mech, user="carol", password=PASSWORD, gs2="n,,", cbdata=b"", tamper=False):
    """A whole exchange with heronlib's client; the final line."""
    c = ScramClient(user, password, gs2, cbdata)
    r.send(f'AUTHENTICATE "{mech}" "{c.first()}"\r\n')
    line = r.line()
    if not line.startswith('"'):
        return line
    r.send('"%s"\r\n' % c.final(unquote(line), tamper))
    line = r.line()
    if line.startswith('OK (SASL "'):
        assert c.final_ok(line[len('OK (SASL "'):line.index('")')]), line
    return line


def test_capabilities():
    r = Raw()
    assert_in('"SASL" ""', r.caps)
    r.starttls()
    assert_in('"SASL" "PLAIN SCRAM-SHA-256 SCRAM-SHA-256-PLUS"', r.caps)


def test_gsasl_generic_client():
    """gsasl's own SCRAM code (generic mode: base64 lines on stdin/stdout), its messages
    carried as ManageSieve strings. --no-cb: it cannot learn this TLS session's exporter."""
    r = tls()
    g = subprocess.Popen(["gsasl", "--client", "--mechanism", "SCRAM-SHA-256", "-a", "carol",
                          "-p", PASSWORD, "--no-cb"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def client_output():
            while True:
                ln = g.stdout.readline()
                assert ln, "gsasl ended"
                if ln.startswith("Output from client:"):
                    return g.stdout.readline().strip()
        r.send('AUTHENTICATE "SCRAM-SHA-256" "%s"\r\n' % client_output())
        g.stdin.write(unquote(r.line()) + "\n")
        g.stdin.flush()
        r.send('"%s"\r\n' % client_output())
        final = r.line()
        assert final.startswith('OK (SASL "') and final.endswith('"Logged in"'), final
        # the server-final, then an empty line: generic mode cannot know that the server
        # was done, it asks once more (RET: none)
        g.stdin.write(final[len('OK (SASL "'):final.index('")')] + "\n\n")
        g.stdin.close()
        rest = g.stdout.read()
        assert_eq(g.wait(timeout=30), 0, (final, rest))
        assert_in("server trusted", rest)  # gsasl checked our v=
    finally:
        if g.poll() is None:
            g.kill()
            g.wait()
    r.send("LISTSCRIPTS\r\n")
    assert r.response()[-1].startswith("OK"), "authenticated"


def test_plus_end_point_and_refusals():
    r = tls()
    out = scram(r, "SCRAM-SHA-256-PLUS", gs2="p=tls-server-end-point,,",
                cbdata=tls_server_end_point(r.s))
    assert out.startswith('OK (SASL "'), out
    r.send("HAVESPACE \"s\" 100\r\n")
    assert r.response()[-1].startswith("OK")
    cases = [dict(mech="SCRAM-SHA-256-PLUS", gs2="p=tls-server-end-point,,", tamper=True),
             dict(mech="SCRAM-SHA-256", password="wrong"),
             dict(mech="SCRAM-SHA-256", user="alice"),   # a salted SHA only: no secret
             dict(mech="SCRAM-SHA-256", gs2="y,,")]      # "y" while -PLUS is offered
    for kw in cases:
        q = tls()
        if kw.get("tamper"):
            kw["cbdata"] = tls_server_end_point(q.s)
        assert_eq(scram(q, **kw), 'NO "Authentication failed"', kw)
    log = msd.logtext()
    assert_in('reason="channel binding refused"', log)
    assert_in('reason="SCRAM proof does not match"', log)
    assert_in('reason="file: no SCRAM secret"', log)
    assert_in("managesieve login user=carol result=ok mech=scram", log)


def test_sieve_connect_still_plain():
    sc = shutil.which("sieve-connect")
    r = subprocess.run([sc, "-s", HOST, "-p", str(MS_PORT), "-u", "alice", "--passwordfd",
                        "0", "--notlsverify", "--list"], input="alice\n",
                       capture_output=True, text=True, timeout=60, cwd=TMP)
    assert_eq(r.returncode, 0, r.stdout + r.stderr)


def body():
    msd.start()
    return run_tests([test_capabilities, test_gsasl_generic_client,
                      test_plus_end_point_and_refusals, test_sieve_connect_still_plain])


if __name__ == "__main__":
    sys.exit(run_main(body, TMP, [msd]))
