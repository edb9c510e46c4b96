#!/usr/bin/env python3
"""libheron_dns against a real DNS world (scripts/dns: nsd serving signed and unsigned zones,
a validating unbound in front), through dnsq: MX/A/AAAA/TXT/TLSA/CNAME answers, DNSSEC status
from our own validation (secure for the signed zone, not for the unsigned one, bogus when the
anchor does not match) or, with trust-ad, from the AD bit of the validating resolver (not from
an authoritative server that sets none), NXDOMAIN/NODATA/SERVFAIL, timeouts and retries, the cache (TTL left,
in-flight lookups joined, counters), and hostile answers: a CNAME loop, 1,000 MX records, a
64 KB TXT record, invalid names. The DNS world is stopped also when a check fails.

    test_resolver.py SOURCE_ROOT DNSQ
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import run_tests  # noqa: E402

ROOT, DNSQ = sys.argv[1], sys.argv[2]
SCRIPT = os.path.join(ROOT, "scripts", "dns")


def spec():
    big_txt = " ".join('"%s"' % ("x" * 255) for _ in range(255))
    many_mx = ["many MX %d m%d.plain.test." % (k % 50, k) for k in range(1000)]
    return {
        "plain.test": {"records": [
            "@ MX 10 mx1", "@ MX 20 mx2", "mx1 A 127.0.0.2", "mx2 A 127.0.0.3",
            "mx2 AAAA ::1", "nullmx MX 0 .", "alias CNAME hop1", "hop1 CNAME mx1",
            "loop1 CNAME loop2", "loop2 CNAME loop1", 'sts TXT "v=STSv1; id=20240101"',
            "big TXT " + big_txt] + many_mx},
        "signed.test": {"signed": True, "records": [
            "@ MX 10 mx", "mx A 127.0.0.4",
            "_25._tcp.mx TLSA 3 1 1 " + "ab" * 32]},
        "broken.test": {"servfail": True},
    }


def dnsq(env, *args, anchors=None, mode="validate", extra=()):
    cmd = [DNSQ, "-o", "dns.nameservers=" + env["DNS_RESOLVER"], "-o", "dns.dnssec=" + mode,
           "-o", "dns.trust_anchor_file=" + (anchors or env["DNS_ANCHORS"]),
           "-o", "dns.timeout=3s"] + list(extra) + ["--"] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (cmd, r.returncode, r.stdout, r.stderr)
    lines = r.stdout.splitlines()
    assert lines and lines[-1].startswith("stats "), r.stdout
    return lines[:-1], dict(kv.split("=") for kv in lines[-1].split()[1:])


def field(line, key):
    m = re.search(r"\b%s=(\S+)" % key, line)
    return m.group(1) if m else None


def one(env, qtype, name, **kw):
    lines, _ = dnsq(env, qtype, name, **kw)
    assert len(lines) == 1, lines
    return lines[0]


def check_answers(env):
    l = one(env, "MX", "plain.test")
    assert field(l, "status") == "ok" and "10:mx1.plain.test" in l and "20:mx2.plain.test" in l, l
    assert field(l, "secure") == "no", l
    l = one(env, "MX", "signed.test")
    assert field(l, "status") == "ok" and field(l, "secure") == "yes", l
    l = one(env, "TLSA", "_25._tcp.mx.signed.test")
    assert field(l, "secure") == "yes" and ("3.1.1:" + "ab" * 32) in l, l
    l = one(env, "A", "mx.signed.test")
    assert "127.0.0.4" in l and field(l, "secure") == "yes", l
    l = one(env, "AAAA", "mx2.plain.test")
    assert field(l, "status") == "ok" and " ::1" in l, l
    assert field(one(env, "AAAA", "mx1.plain.test"), "status") == "nodata"
    assert field(one(env, "MX", "nothere.plain.test"), "status") == "nxdomain"
    l = one(env, "MX", "nullmx.plain.test")
    assert field(l, "status") == "ok" and " 0:." in l, l
    l = one(env, "A", "ALIAS.Plain.Test.")
    assert field(l, "canon") == "mx1.plain.test" and "127.0.0.2" in l, l
    l = one(env, "TXT", "sts.plain.test")
    assert 'txt(20)="v=STSv1; id=20240101"' in l, l
    l = one(env, "MX", "broken.test")
    assert field(l, "status") == "temporary", l
    # off: the same answers, never secure
    l = one(env, "MX", "signed.test", mode="off")
    assert field(l, "status") == "ok" and field(l, "secure") == "no", l
    # trust-ad: the validating unbound's AD bit counts; the authoritative nsd sets none
    l = one(env, "MX", "signed.test", mode="trust-ad")
    assert field(l, "status") == "ok" and field(l, "secure") == "yes", l
    assert field(one(env, "TLSA", "_25._tcp.mx.signed.test", mode="trust-ad"), "secure") == "yes"
    assert field(one(env, "MX", "plain.test", mode="trust-ad"), "secure") == "no"
    auth = dict(env, DNS_RESOLVER=env["DNS_AUTH"])
    l = one(auth, "MX", "signed.test", mode="trust-ad")
    assert field(l, "status") == "ok" and field(l, "secure") == "no", l


def check_hostile(env):
    l = one(env, "A", "loop1.plain.test")
    assert field(l, "status") == "temporary", l
    l = one(env, "MX", "many.plain.test")
    assert field(l, "status") == "ok" and field(l, "n") == "1000", l
    l = one(env, "TXT", "big.plain.test")
    assert field(l, "status") == "ok" and "txt(65025)=" in l, l
    lines, _ = dnsq(env, "A", "a..b", "-x.test", "x" * 64 + ".test", "[127.0.0.1]")
    assert all(field(l, "status") == "invalid" for l in lines), lines


def check_dnssec_bogus(env, tmp):
    """An anchor that does not match the zone's key: its answers are bogus, not secure."""
    wrong = os.path.join(tmp, "wrong.key")
    with open(env["DNS_ANCHORS"]) as f:
        ds = f.read().split()
    ds[-1] = "0" * len(ds[-1])
    with open(wrong, "w") as f:
        f.write(" ".join(ds) + "\n")
    l = one(env, "MX", "signed.test", anchors=wrong)
    assert field(l, "status") == "dnssec", l
    # the unsigned zone is unaffected
    assert field(one(env, "MX", "plain.test", anchors=wrong), "status") == "ok"


def check_cache(env):
    lines, st = dnsq(env, "MX", "plain.test", "plain.test", "signed.test", "broken.test",
                     extra=["-r", "3"])
    assert len(lines) == 12, lines
    # round 1: plain.test once to the resolver, the second joins it; rounds 2-3 from the
    # cache; broken.test (SERVFAIL) is never cached
    assert st["lookups"] == "12" and st["queries"] == "5" and st["hits"] == "7", st
    later = lines[4:]
    assert all(field(l, "cached") == ("no" if l.startswith("broken") else "yes")
               for l in later), lines
    lines, st = dnsq(env, "MX", "plain.test", extra=["-r", "2", "-o", "dns.cache_size=0"])
    assert st["queries"] == "2", st


def check_timeout(env):
    lines, st = dnsq({"DNS_RESOLVER": "127.0.0.1@9", "DNS_ANCHORS": env["DNS_ANCHORS"]},
                     "A", "x.plain.test", mode="off",
                     extra=["-o", "dns.timeout=300ms", "-o", "dns.attempts=3"])
    assert field(lines[0], "status") == "temporary", lines
    assert st["queries"] == "3", st


def main():
    tmp = tempfile.mkdtemp(prefix="heron-dns-")
    world = os.path.join(tmp, "dns")
    with open(os.path.join(tmp, "spec.json"), "w") as f:
        json.dump(spec(), f)
    subprocess.run([SCRIPT, "start", world, "--zones", os.path.join(tmp, "spec.json")],
                   check=True, timeout=120)
    try:
        env = dict(l.strip().split("=", 1) for l in open(os.path.join(world, "dns.env")))

        def test_answers():
            check_answers(env)

        def test_hostile():
            check_hostile(env)

        def test_dnssec_bogus():
            check_dnssec_bogus(env, tmp)

        def test_cache():
            check_cache(env)

        def test_timeout():
            check_timeout(env)

        return run_tests([test_answers, test_hostile, test_dnssec_bogus, test_cache,
                          test_timeout])
    finally:
        subprocess.run([SCRIPT, "stop", world], timeout=60)


if __name__ == "__main__":
    sys.exit(main())
