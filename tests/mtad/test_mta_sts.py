#!/usr/bin/env python3
"""test_mta_sts.py — MTA-STS (RFC 8461) in mtad against a private DNS world (scripts/dns) and
an HTTPS policy server on loopback, with exchangers whose certificates a test CA signed: an
enforced policy delivers over verified TLS (tls=sts) and is fetched once for several
messages (cached for max_age); an exchanger whose certificate does not verify, or an MX the
policy does not name, makes the mail wait (never plaintext, never an unlisted MX); a policy
in testing mode delivers and logs what would have failed; a domain without the TXT record is
delivered opportunistically.

  test_mta_sts.py SOURCE_ROOT MTAD STORE_PEEK"""
import http.server
import os
import re
import ssl
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DnsWorld, Mtad, RelayTarget, close_peers, free_port,  # noqa: E402
                      make_cert, run_main, run_tests, send_subject, wait_for, write_users)

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-sts-")
PORT, HTTPS_PORT = free_port(), free_port()
SENDER = "sender@src.plain.test"
DOMAINS = ["sts", "badcert", "nomatch", "testing"]


def openssl(*args):
    r = subprocess.run(["openssl"] + list(args), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def ca_signed(name, sans):
    """A certificate for sans from the test CA: (chain file, key)."""
    key, csr, crt = (os.path.join(TMP, name + x) for x in (".key", ".csr", ".crt"))
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=" + sans[0])
    ext = os.path.join(TMP, name + ".ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=" + ",".join("DNS:" + s for s in sans) + "\n")
    openssl("x509", "-req", "-in", csr, "-CA", CA, "-CAkey", CAKEY, "-CAcreateserial",
            "-out", crt, "-days", "2", "-extfile", ext)
    return crt, key


CA, CAKEY = os.path.join(TMP, "ca.pem"), os.path.join(TMP, "ca.key")
openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", CAKEY, "-out", CA, "-days", "2", "-subj", "/CN=Heron STS test CA")
MX_CERT = ca_signed("mx", ["mx.sts.plain.test", "other.plain.test"])
WEB_CERT = ca_signed("web", ["mta-sts.%s.plain.test" % d for d in DOMAINS])
SELF_CERT = make_cert(TMP, "self")

POLICIES = {
    "sts": "version: STSv1\r\nmode: enforce\r\nmx: mx.sts.plain.test\r\nmax_age: 86400\r\n",
    "badcert": "version: STSv1\nmode: enforce\nmx: *.badcert.plain.test\nmax_age: 600\n",
    "nomatch": "version: STSv1\nmode: enforce\nmx: mx.nomatch.plain.test\nmax_age: 600\n",
    "testing": "version: STSv1\nmode: testing\nmx: mx.testing.plain.test\nmax_age: 600\n",
}
fetches = {}


class PolicyHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        dom = self.headers.get("Host", "").split(".")[1]
        fetches[dom] = fetches.get(dom, 0) + 1
        body = POLICIES.get(dom, "").encode()
        if self.path != "/.well-known/mta-sts.txt" or not body:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def spec():
    recs = ["srcmx A 127.0.0.8", "src MX 10 srcmx", "other A 127.0.0.2",
            "mx.sts A 127.0.0.2", "sts MX 10 mx.sts",
            "mx.badcert A 127.0.0.3", "badcert MX 10 mx.badcert",
            "nomatch MX 10 other",
            "mx.testing A 127.0.0.3", "testing MX 10 mx.testing",
            "plainmx A 127.0.0.2", "nopolicy MX 10 plainmx"]
    for d in DOMAINS:
        recs += ['_mta-sts.%s TXT "v=STSv1; id=20240101T010101;"' % d,
                 "mta-sts.%s A 127.0.0.20" % d]
    return {"plain.test": {"records": recs}}


world = None
web = None
targets = {}
write_users(os.path.join(TMP, "users"), ["user1"])
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"trusted_networks": "127.0.0.0/8", "relay_port": str(PORT),
             "mta_sts_port": str(HTTPS_PORT)}, tls=False)


def setup():
    global world, web
    world = DnsWorld(ROOT, TMP, spec())
    targets["good"] = RelayTarget(port=PORT, host="127.0.0.2", tls=MX_CERT)
    targets["self"] = RelayTarget(port=PORT, host="127.0.0.3", tls=SELF_CERT)
    targets["src"] = RelayTarget(port=PORT, host="127.0.0.8")
    web = http.server.ThreadingHTTPServer(("127.0.0.20", HTTPS_PORT), PolicyHandler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*WEB_CERT)
    web.socket = ctx.wrap_socket(web.socket, server_side=True)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    mtad.sections["dns"] = world.conf(dnssec="off")
    mtad.sections["tls"] = {"ca": CA}
    mtad.write_conf()
    mtad.start()


def cleanup():
    if web is not None:
        web.shutdown()
        web.server_close()
    close_peers(targets.values(), world)


def line_for(rcpt, status):
    m = re.search(r"to=<%s>[^\n]*status=%s[^\n]*" % (re.escape(rcpt), status), mtad.logtext())
    return m.group(0) if m else None


def test_enforce_delivers_verified_and_caches():
    for i in range(3):
        send_subject(mtad.port, SENDER, "u%d@sts.plain.test" % i, "sts%d" % i)
    wait_for(lambda: len(targets["good"].with_subject("sts")) == 3, 60, "sts mail delivered")
    line = line_for("u0@sts.plain.test", "sent")
    assert line and "tls=sts TLSv1." in line, line
    # each worker (2) fetches once at most, then its cache serves
    first = fetches.get("sts")
    assert 1 <= first <= 2, fetches
    for i in range(3, 9):
        send_subject(mtad.port, SENDER, "u%d@sts.plain.test" % i, "sts%d" % i)
    wait_for(lambda: len(targets["good"].with_subject("sts")) == 9, 60, "more sts mail")
    assert fetches.get("sts") <= 2, fetches


def test_enforce_never_downgrades():
    send_subject(mtad.port, SENDER, "u@badcert.plain.test", "badcert")
    send_subject(mtad.port, SENDER, "u@nomatch.plain.test", "nomatch")
    wait_for(lambda: line_for("u@badcert.plain.test", "deferred"), 60, "badcert deferred")
    wait_for(lambda: line_for("u@nomatch.plain.test", "deferred"), 60, "nomatch deferred")
    assert "4.7.5" in line_for("u@badcert.plain.test", "deferred")
    assert "matches its MTA-STS policy" in line_for("u@nomatch.plain.test", "deferred")
    assert not targets["self"].with_subject("badcert")
    assert not targets["good"].with_subject("nomatch")


def test_testing_mode_delivers_and_logs():
    send_subject(mtad.port, SENDER, "u@testing.plain.test", "testing")
    wait_for(lambda: targets["self"].with_subject("testing"), 60, "testing mode delivered")
    assert "tls=may" in line_for("u@testing.plain.test", "sent")
    assert re.search(r"mta-sts testing: the certificate does not verify", mtad.logtext())


def test_no_policy_opportunistic():
    send_subject(mtad.port, SENDER, "u@nopolicy.plain.test", "nopolicy")
    wait_for(lambda: targets["good"].with_subject("nopolicy"), 60, "no-policy mail delivered")
    assert "tls=may" in line_for("u@nopolicy.plain.test", "sent")


def body():
    setup()
    return run_tests([test_enforce_delivers_verified_and_caches, test_enforce_never_downgrades,
                      test_testing_mode_delivers_and_logs, test_no_policy_opportunistic])


if __name__ == "__main__":
    sys.exit(run_main(body, TMP, [mtad], cleanup=[cleanup]))
