#!/usr/bin/env python3
"""test_metrics_ldap.py — the directory figures of imapd's metrics endpoint with logins going
to the real slapd of scripts/ldap (#21): a user's first login is an auth-cache miss and at
least one LDAP round trip (heron_directory_round_trip_seconds' count); the same login again is
a cache hit with no new round trip; a wrong password is not answered as a hit. With two
workers (#23), the login cache is the daemon's: a user's first login is the only miss, and
logins served by the other worker are hits; after a password change (ldappasswd) the new
password logs in at once (a miss: the cache's digest does not match) and from then on the old
one is refused by every worker (the entry holds the new password's digest). A SIGHUP that
changes auth_cache_ttl reaches the shared cache: with 2h at start and 3s after the SIGHUP, a
password changed with ldapmodify (no login with the new one) stops working once 3 s have
passed since the entry was cached, on every worker (ldapauth/README.md's bound).

Usage: test_metrics_ldap.py IMAPD SOURCE_ROOT"""
import os
import re
import signal
import imaplib
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (HOST, Imapd, Slapd, free_port, run_main, run_tests,  # noqa: E402
                      wait_workers_ready)

D = None
D2 = None  # two workers
D3 = None  # two workers, auth_cache_ttl changed by a SIGHUP
SLAPD = None
METRICS = free_port()
METRICS2 = free_port()
HIT = 'heron_directory_cache_total{result="hit"}'
MISS = 'heron_directory_cache_total{result="miss"}'
RTT = "heron_directory_round_trip_seconds_count"


def scrape(port=METRICS):
    """{series: value} of imapd's endpoint."""
    with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, v = line.rsplit(" ", 1)
            out[series] = float(v)
    return out


def figures(port=METRICS):
    s = scrape(port)
    return s.get(HIT, 0.0), s.get(MISS, 0.0), s.get(RTT, 0.0)


def settled(want, timeout=30, port=METRICS):
    """The figures once they satisfy want (the workers publish them after the request)."""
    end = time.time() + timeout
    f = figures(port)
    while not want(*f) and time.time() < end:
        time.sleep(0.2)
        f = figures(port)
    return f


def login(user, password, d=None):
    c = (d or D).connect()
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


LOGIN_LINE = re.compile(r"imapd\[(\d+)\] info: \S+ imap login .*user=(\S+) "
                        r"(?:mech=\S+ )?result=(.+?) cached=(\S+)")


def logins(user, d=None):
    """(worker pid, result, cached) of every login of user in d's log (D2's), in order."""
    return [(m.group(1), m.group(3), m.group(4)) for m in map(LOGIN_LINE.search,
                                                             (d or D2).logtext().splitlines())
            if m is not None and m.group(2) == user]


def test_two_workers_share_the_cache():
    user = "user2"
    hit0, miss0, _ = figures(METRICS2)
    assert login(user, user, D2) == "OK"
    settled(lambda h, m, r: m >= miss0 + 1, port=METRICS2)
    first = logins(user)
    assert [x[1:] for x in first] == [("ok", "no")], first
    # sessions open at once spread over the workers: until the other one has served some
    for _ in range(10):
        conns = [D2.connect() for _ in range(8)]
        for c in conns:
            assert c.login(user, user)[0] == "OK"
        for c in conns:
            c.logout()
        if len({pid for pid, _, _ in logins(user)}) >= 2:
            break
    seen = logins(user)
    pids = {pid for pid, _, _ in seen}
    assert len(pids) == 2, f"every login went to one worker: {seen}"
    assert all(c == "yes" for _, _, c in seen[1:]), seen
    other = [x for x in seen[1:] if x[0] != first[0][0]]
    assert other, seen  # a hit on the worker that never asked the directory
    hit1, miss1, _ = settled(lambda h, m, r: h >= hit0 + len(seen) - 1, port=METRICS2)
    assert (hit1, miss1) == (hit0 + len(seen) - 1, miss0 + 1), (hit0, miss0, hit1, miss1,
                                                               len(seen))

    # the password changes in the directory
    env = SLAPD.env
    r = subprocess.run(["ldappasswd", "-x", "-H", SLAPD.uri, "-D", env["LDAP_ADMIN_DN"],
                        "-y", env["LDAP_ADMIN_PASSWORD_FILE"], "-s", "changed",
                        f"uid={user},{env['LDAP_PEOPLE']}"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    n = len(logins(user))
    assert login(user, "changed", D2) == "OK"  # at once: the cached digest does not match
    assert logins(user)[n:] == [(logins(user)[n][0], "ok", "no")], logins(user)[n:]
    # the old password is refused now in either worker: the one cache entry was replaced
    n = len(logins(user))
    for _ in range(8):
        assert login(user, user, D2) == "NO"
    assert login(user, "changed", D2) == "OK"
    later = logins(user)[n:]
    assert all(res != "ok" for _, res, _ in later[:-1]), later
    assert later[-1][1:] == ("ok", "yes"), later


def hup_workers(d, workers):
    """SIGHUP to d's master; returns once each worker has logged its reload."""
    mark = re.compile(r"imapd worker \d+ config reloaded")
    n = len(mark.findall(d.logtext()))
    d.proc.send_signal(signal.SIGHUP)
    end = time.time() + 30
    while len(mark.findall(d.logtext())) < n + workers:
        assert time.time() < end, "no reload after SIGHUP:\n" + d.logtext()[-3000:]
        time.sleep(0.1)


def test_sighup_ttl_and_password_change():
    user, ttl = "user4", 3.0
    with open(D3.conf) as f:
        text = f.read()
    assert "auth_cache_ttl = 2h" in text, text
    with open(D3.conf, "w") as f:
        f.write(text.replace("auth_cache_ttl = 2h", f"auth_cache_ttl = {int(ttl)}s", 1))
    hup_workers(D3, 2)
    assert login(user, user, D3) == "OK"
    cached_by = time.monotonic()  # the entry was written before the OK: it expires before
    assert logins(user, D3)[-1][1:] == ("ok", "no"), logins(user, D3)
    assert login(user, user, D3) == "OK"
    assert logins(user, D3)[-1][1:] == ("ok", "yes"), logins(user, D3)

    env = SLAPD.env
    ldif = (f"dn: uid={user},{env['LDAP_PEOPLE']}\nchangetype: modify\n"
            "replace: userPassword\nuserPassword: changed4\n")
    r = subprocess.run(["ldapmodify", "-x", "-H", SLAPD.uri, "-D", env["LDAP_ADMIN_DN"],
                        "-y", env["LDAP_ADMIN_PASSWORD_FILE"]], input=ldif,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    # the old password may still be answered from the cache until the TTL (documented); past
    # it, on either worker (2h, the TTL before the SIGHUP, would still take it)
    time.sleep(max(0.0, cached_by + ttl + 0.5 - time.monotonic()))
    n = len(logins(user, D3))
    for _ in range(3):  # few: each failure delays the next answer (authguard)
        conns = [D3.connect() for _ in range(2)]  # two at once: both workers are asked
        for c in conns:
            try:
                assert c.login(user, user)[0] != "OK", "the old password logged in"
            except imaplib.IMAP4.error:
                pass
        for c in conns:
            try:
                c.logout()
            except Exception:
                pass
    later = logins(user, D3)[n:]
    assert len(later) == 6 and all(res != "ok" for _, res, _ in later), later
    assert login(user, "changed4", D3) == "OK"
    assert logins(user, D3)[-1][1:] == ("ok", "no"), logins(user, D3)


def main():
    global D
    imapd, root = sys.argv[1], sys.argv[2]
    ldir = tempfile.mkdtemp(prefix="heron-metrics-ldap-")
    slapd = Slapd(root, ldir, users=4)
    daemons = []

    def body():
        global D, D2, D3, SLAPD
        SLAPD = slapd
        slapd.start()
        directory = {"backend": "ldap", "uri": slapd.uri, "base": slapd.env["LDAP_PEOPLE"],
                     "auth_mode": "bind"}
        D = Imapd(imapd, directory=directory,
                  extra=f"\n[metrics]\nenabled = yes\nimapd_listen = {HOST}:{METRICS}\n")
        daemons.append(D)
        D.start()
        D2 = Imapd(imapd, directory=directory, workers=2,
                   extra=f"\n[metrics]\nenabled = yes\nimapd_listen = {HOST}:{METRICS2}\n")
        daemons.append(D2)
        D2.start()
        wait_workers_ready(D2, "imapd", 2)
        D3 = Imapd(imapd, directory=dict(directory, auth_cache_ttl="2h"), workers=2)
        daemons.append(D3)
        D3.start()
        wait_workers_ready(D3, "imapd", 2)
        return run_tests([test_cache_and_round_trips_move, test_two_workers_share_the_cache,
                          test_sighup_ttl_and_password_change])

    def remove_imapd_dir():
        for d in daemons:
            shutil.rmtree(d.dir, ignore_errors=True)

    return run_main(body, ldir, daemons, cleanup=[slapd.stop, remove_imapd_dir], tail=20000)


if __name__ == "__main__":
    sys.exit(main())
