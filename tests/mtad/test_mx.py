#!/usr/bin/env python3
"""test_mx.py — mtad routes remote mail through DNS (RFC 5321 5.1) in a private DNS world
(scripts/dns: nsd + a validating unbound), to in-test SMTP servers on 127.0.0.x that play the
remote exchangers: preference order, random among equal preferences, the domain itself when
it has no MX, an MX named through a CNAME, IPv6 then IPv4, the next exchanger when one
refuses the connection, greets 421 or answers MAIL with 451; a null MX (5.1.10), NXDOMAIN
(5.1.2), an MX naming an address literal (5.4.4), 1,000 MX records whose hosts do not exist
(5.4.4), an MX pointing back at mtad or at localhost (5.4.6) bounce with the right code; a SERVFAIL zone
defers (4.4.3) and is delivered once the zone is fixed; transport_map and relay_host still
come first. Every message ends at the right server or in a bounce to its sender, none is
lost, and the tries are named in the queue entry and the bounce.

  test_mx.py SOURCE_ROOT MTAD STORE_PEEK"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (close_peers, send_subject, DOMAIN, DnsWorld, Mtad, RelayTarget, free_port, run_main,  # noqa: E402
                      run_tests, wait_for, write_users)

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-mx-")
PORT = free_port()  # every remote exchanger listens on this port, on its own address
SENDER = "sender@src.plain.test"


def spec(broken_fixed=False):
    many = ["many MX %d m%d.plain.test." % (k % 7, k) for k in range(1000)]
    return {
        "plain.test": {"records": [
            "a A 127.0.0.2", "b A 127.0.0.3", "t421 A 127.0.0.4", "m451 A 127.0.0.5",
            "c A 127.0.0.6", "dual AAAA ::1", "dual A 127.0.0.7", "srcmx A 127.0.0.8",
            "refuse A 127.0.0.9", "self A 127.0.0.1", "alias CNAME a",
            "src MX 10 srcmx",
            "pref MX 20 b", "pref MX 10 a",
            "down MX 10 refuse", "down MX 20 b",
            "busy MX 10 t421", "busy MX 20 b",
            "mailtemp MX 10 m451", "mailtemp MX 20 b",
            "implicit A 127.0.0.2",
            "equal MX 10 a", "equal MX 10 c",
            "cname MX 10 alias",
            "v6 MX 10 dual",
            "nullmx MX 0 .",
            "literal MX 10 127.0.0.2.",
            "loop MX 10 self", "localmx MX 10 localhost.",
            "backup MX 10 refuse", "backup MX 20 self",
            "refuse2 A 127.0.0.11", "alldown MX 10 refuse", "alldown MX 20 refuse2",
        ] + many},
        "broken.test": {"records": ["@ MX 10 b.plain.test."]} if broken_fixed
        else {"servfail": True},
    }


world = None
targets = {}
write_users(os.path.join(TMP, "users"), ["user1"])
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"trusted_networks": "127.0.0.0/8", "relay_port": str(PORT),
             "transport_map": "mapped.test=[127.0.0.10]:%d" % PORT}, tls=False)


def setup():
    global world
    world = DnsWorld(ROOT, TMP, spec())
    for name, addr, kw in [("a", "127.0.0.2", {}), ("b", "127.0.0.3", {}),
                           ("t421", "127.0.0.4", {"greeting": "421 4.3.2 busy, go away"}),
                           ("m451", "127.0.0.5", {"mail_reply": "451 4.3.0 not now"}),
                           ("c", "127.0.0.6", {}), ("dual", "127.0.0.7", {}),
                           ("src", "127.0.0.8", {}), ("relay", "127.0.0.10", {})]:
        targets[name] = RelayTarget(port=PORT, host=addr, **kw)
    mtad.sections["dns"] = world.conf()
    mtad.write_conf()
    mtad.start()


def cleanup():
    close_peers(targets.values(), world)


def send(rcpt, subject):
    send_subject(mtad.port, SENDER, rcpt, subject)


def got(name, subject):
    return targets[name].with_subject(subject)


def bounce_for(rcpt):
    """The DSN the sender's exchanger got for rcpt (None yet)."""
    for _mail, _rcpts, data in targets["src"].messages:
        if b"delivery-status" in data and ("Final-Recipient: rfc822; " + rcpt).encode() in data:
            return data.decode(errors="replace")
    return None


def test_preference_and_fallbacks():
    cases = [("u@pref.plain.test", "a"), ("u@down.plain.test", "b"),
             ("u@busy.plain.test", "b"), ("u@mailtemp.plain.test", "b"),
             ("u@implicit.plain.test", "a"), ("u@cname.plain.test", "a"),
             ("u@v6.plain.test", "dual"), ("u@mapped.test", "relay")]
    for i, (rcpt, _) in enumerate(cases):
        send(rcpt, f"case{i}")
    for i, (rcpt, name) in enumerate(cases):
        wait_for(lambda: got(name, f"case{i}"), 60, f"{rcpt} delivered to {name}")
    for i, (rcpt, name) in enumerate(cases):
        for other in targets:
            if other != name:
                assert not got(other, f"case{i}"), (rcpt, other)
    # the exchangers tried first saw the connection (and were passed over)
    assert targets["t421"].connections >= 1 and targets["m451"].connections >= 1
    log = mtad.logtext()
    assert re.search(r"to=<u@down\.plain\.test>, relay=b\.plain\.test\[127\.0\.0\.3\]:%d.*"
                     r"status=sent" % PORT, log), log[-3000:]


def test_equal_preferences_spread():
    for i in range(16):
        send(f"u{i}@equal.plain.test", f"equal{i}")
    wait_for(lambda: sum(len(got(n, "equal")) for n in ("a", "c")) >= 16, 60,
             "every equal-preference message delivered")
    na, nc = len(got("a", "equal")), len(got("c", "equal"))
    assert na > 0 and nc > 0, (na, nc)


def test_bounces():
    cases = [("u@nullmx.plain.test", "5.1.10"), ("u@nx.plain.test", "5.1.2"),
             ("u@literal.plain.test", "5.4.4"), ("u@many.plain.test", "5.4.4"),
             ("u@loop.plain.test", "5.4.6"), ("u@localmx.plain.test", "5.4.6")]
    for i, (rcpt, _) in enumerate(cases):
        send(rcpt, f"bounce{i}")
    for rcpt, code in cases:
        wait_for(lambda: bounce_for(rcpt), 90, f"a bounce for {rcpt}")
        dsn = bounce_for(rcpt)
        assert "Status: " + code in dsn, (rcpt, dsn)


def test_backup_mx_of_ourselves():
    """We are the backup exchanger: only the better one is tried; it refuses, so the mail
    waits (it never loops to ourselves, and never bounces as a loop)."""
    send("u@backup.plain.test", "backup")
    wait_for(lambda: re.search(r"to=<u@backup\.plain\.test>.*status=deferred", mtad.logtext()),
             60, "the backup case deferred")
    assert not re.search(r"to=<u@backup\.plain\.test>.*loops back", mtad.logtext())


def test_servfail_defers_then_delivers():
    send("u@broken.test", "servfail")
    wait_for(lambda: re.search(r"to=<u@broken\.test>.*dsn=4\.4\.3, status=deferred",
                               mtad.logtext()), 60, "the SERVFAIL domain deferred")
    assert not got("b", "servfail")
    world.update(spec(broken_fixed=True))
    wait_for(lambda: got("b", "servfail"), 120, "delivered once the zone is fixed")


def test_tries_named():
    """A message whose every exchanger fails names each try (host, address, reason) in its
    log line and in its queue entry (mailctl queue show)."""
    send("u@alldown.plain.test", "alldown")
    pat = (r"to=<u@alldown\.plain\.test>.*status=deferred.*tries: refuse\.plain\.test"
           r"\[127\.0\.0\.9\]:\d+: 4\.4\.1 [^;]*refused; refuse2\.plain\.test"
           r"\[127\.0\.0\.11\]")
    wait_for(lambda: re.search(pat, mtad.logtext()), 60, "both tries named")
    qid = re.search(r"(\w+): to=<u@alldown\.plain\.test>.*status=deferred",
                    mtad.logtext()).group(1)
    mailctl = os.path.join(os.path.dirname(os.path.dirname(MTAD)), "mailctl", "mailctl")
    r = subprocess.run([mailctl, "-c", mtad.conf, "queue", "show", qid], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "refuse.plain.test[127.0.0.9]" in r.stdout and \
        "refuse2.plain.test[127.0.0.11]" in r.stdout, r.stdout


def body():
    setup()
    return run_tests([test_preference_and_fallbacks, test_equal_preferences_spread,
                      test_bounces, test_backup_mx_of_ourselves,
                      test_servfail_defers_then_delivers, test_tries_named])


if __name__ == "__main__":
    sys.exit(run_main(body, TMP, [mtad], cleanup=[cleanup]))
