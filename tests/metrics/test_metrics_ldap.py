#!/usr/bin/env python3
"""test_metrics_ldap.py — the directory figures of imapd's metrics endpoint with logins going
to the real slapd of scripts/ldap (#21): a user's first login is an auth-cache miss and at
least one LDAP round trip (heron_directory_round_trip_seconds' count); the same login again is
a cache hit with no new round trip; a wrong password is not answered as a hit.

Usage: test_metrics_ldap.py IMAPD SOURCE_ROOT"""
import os
import shutil
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import HOST, Imapd, Slapd, free_port, run_main, run_tests  # noqa: E402

D = None
METRICS = free_port()
HIT = 'heron_directory_cache_total{result="hit"}'
MISS = 'heron_directory_cache_total{result="miss"}'
RTT = "heron_directory_round_trip_seconds_count"


def scrape():
    """{series: value} of imapd's endpoint."""
    with urllib.request.urlopen(f"http://{HOST}:{METRICS}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, v = line.rsplit(" ", 1)
            out[series] = float(v)
    return out


def figures():
    s = scrape()
    return s.get(HIT, 0.0), s.get(MISS, 0.0), s.get(RTT, 0.0)


def settled(want, timeout=30):
    """The figures once they satisfy want (the workers publish them after the request)."""
    end = time.time() + timeout
    f = figures()
    while not want(*f) and time.time() < end:
        time.sleep(0.2)
        f = figures()
    return f


def login(user, password):
    c = D.connect()
    try:
        return c.login(user, password)[0]
    except Exception:
        return "NO"
    finally:
        try:
            c.logout()
        except Exception:
            pass


def test_cache_and_round_trips_move():
    hit0, miss0, rtt0 = figures()
    assert login("user3", "user3") == "OK"
    hit1, miss1, rtt1 = settled(lambda h, m, r: m >= miss0 + 1 and r > rtt0)
    assert (hit1, miss1) == (hit0, miss0 + 1), (hit0, miss0, hit1, miss1)
    assert rtt1 > rtt0, f"no LDAP round trip counted for the first login: {rtt0} -> {rtt1}"

    assert login("user3", "user3") == "OK"
    hit2, miss2, rtt2 = settled(lambda h, m, r: h >= hit1 + 1)
    assert (hit2, miss2) == (hit1 + 1, miss1), (hit1, miss1, hit2, miss2)
    time.sleep(1)  # let a stray round trip of the second login show, if there were one
    assert figures()[2] == rtt1, f"the cached login went to slapd: {rtt1} -> {figures()[2]}"

    # a wrong password for the cached user is not a hit: it goes to slapd and is refused
    assert login("user3", "wrong") == "NO"
    hit3, _, rtt3 = settled(lambda h, m, r: r > rtt1)
    assert hit3 == hit2, (hit2, hit3)
    assert rtt3 > rtt1


def main():
    global D
    imapd, root = sys.argv[1], sys.argv[2]
    ldir = tempfile.mkdtemp(prefix="heron-metrics-ldap-")
    slapd = Slapd(root, ldir, users=4)
    daemons = []

    def body():
        global D
        slapd.start()
        directory = {"backend": "ldap", "uri": slapd.uri, "base": slapd.env["LDAP_PEOPLE"],
                     "auth_mode": "bind"}
        D = Imapd(imapd, directory=directory,
                  extra=f"\n[metrics]\nenabled = yes\nimapd_listen = {HOST}:{METRICS}\n")
        daemons.append(D)
        D.start()
        return run_tests([test_cache_and_round_trips_move])

    def remove_imapd_dir():
        for d in daemons:
            shutil.rmtree(d.dir, ignore_errors=True)

    return run_main(body, ldir, daemons, cleanup=[slapd.stop, remove_imapd_dir], tail=20000)


if __name__ == "__main__":
    sys.exit(main())
