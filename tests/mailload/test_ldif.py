#!/usr/bin/env python3
"""`mailload ldif --hosts H1,H2,...` spreads the users over the store hosts as docs/mailload.1
says: every entry gets the inetLocalMailRecipient class and one mailHost, user1 on H1, user2 on
H2 and so on round robin (more hosts than users: the first ones only); without --hosts no
entry has either; a list with an empty name is refused (exit 2, nothing written). Each
userPassword is {SSHA} of the user's password (or --password) with an 8-byte salt.

  test_ldif.py MAILLOAD
"""
import base64
import collections
import hashlib
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import run_tests  # noqa: E402

BASE = "ou=people,dc=heron,dc=test"


def ldif(mailload, *args, rc=0):
    r = subprocess.run([mailload, "ldif", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == rc, (args, r.returncode, r.stderr)
    return r.stdout, r.stderr


def entries(text):
    """[(dn, {attribute: [values]})] in the order written"""
    out = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        attrs = collections.defaultdict(list)
        for line in block.split("\n"):
            assert line and not line.startswith(" "), f"unexpected line {line!r} in {block!r}"
            name, sep, value = line.partition(": ")
            assert sep, f"no 'name: value' in {line!r}"
            attrs[name].append(value)
        dns = attrs.pop("dn")
        assert len(dns) == 1, block
        out.append((dns[0], attrs))
    return out


def users_of(text, n):
    es = entries(text)
    assert [dn for dn, _ in es] == [f"uid=user{k},{BASE}" for k in range(1, n + 1)], es
    return [a for _, a in es]


def ssha_ok(value, password):
    assert value.startswith("{SSHA}"), value
    raw = base64.b64decode(value[len("{SSHA}"):])
    assert len(raw) == 20 + 8, len(raw)
    return hashlib.sha1(password.encode() + raw[20:]).digest() == raw[:20]


def main():
    mailload = sys.argv[1]

    def test_round_robin():
        hosts = ["store1.heron.test", "store2.heron.test", "store3.heron.test"]
        out, _ = ldif(mailload, "--users", "7", "--base", BASE, "--hosts", ",".join(hosts))
        us = users_of(out, 7)
        for k, a in enumerate(us, 1):
            assert a["mailHost"] == [hosts[(k - 1) % 3]], (k, a)
            assert sorted(a["objectClass"]) == ["inetLocalMailRecipient", "inetOrgPerson"], a
            assert a["uid"] == [f"user{k}"] and a["mail"] == [f"user{k}@heron.test"], a
        per = collections.Counter(a["mailHost"][0] for a in us)
        assert per == {hosts[0]: 3, hosts[1]: 2, hosts[2]: 2}, per

    def test_even_spread():
        # N users over H hosts: each host gets N/H of them, in the order of the list
        hosts = [f"h{i}.example.net" for i in range(1, 5)]
        out, _ = ldif(mailload, "--users", "40", "--base", BASE, "--hosts", ",".join(hosts))
        us = users_of(out, 40)
        per = collections.Counter(a["mailHost"][0] for a in us)
        assert per == {h: 10 for h in hosts}, per
        assert [a["mailHost"][0] for a in us[:4]] == hosts

    def test_one_host_and_more_hosts_than_users():
        out, _ = ldif(mailload, "--users", "3", "--base", BASE, "--hosts", "only.heron.test")
        assert all(a["mailHost"] == ["only.heron.test"] for a in users_of(out, 3))
        out, _ = ldif(mailload, "--users", "2", "--base", BASE, "--hosts", "a,b,c,d,e")
        assert [a["mailHost"] for a in users_of(out, 2)] == [["a"], ["b"]]

    def test_without_hosts():
        out, _ = ldif(mailload, "--users", "3", "--base", BASE)
        for a in users_of(out, 3):
            assert "mailHost" not in a and a["objectClass"] == ["inetOrgPerson"], a

    def test_ou_entry_has_no_host():
        out, _ = ldif(mailload, "--users", "2", "--base", BASE, "--ou", "--hosts", "a,b")
        es = entries(out)
        assert es[0][0] == BASE and es[0][1]["objectClass"] == ["organizationalUnit"], es[0]
        assert "mailHost" not in es[0][1], es[0]
        assert [a["mailHost"] for _, a in es[1:]] == [["a"], ["b"]], es

    def test_passwords():
        out, _ = ldif(mailload, "--users", "3", "--base", BASE, "--hosts", "a,b")
        for k, a in enumerate(users_of(out, 3), 1):
            assert ssha_ok(a["userPassword"][0], f"user{k}"), a
            assert not ssha_ok(a["userPassword"][0], f"user{k + 1}"), a
        out, _ = ldif(mailload, "--users", "2", "--base", BASE, "--password", "pw 9")
        us = users_of(out, 2)
        assert all(ssha_ok(a["userPassword"][0], "pw 9") for a in us), us
        assert us[0]["userPassword"] != us[1]["userPassword"], us  # salted

    def test_bad_hosts():
        for bad in ["", ",", "a,,b", "a,", ",a"]:
            out, err = ldif(mailload, "--users", "2", "--hosts", bad, rc=2)
            assert out == "" and "--hosts" in err, (bad, out, err)

    return run_tests([test_round_robin, test_even_spread,
                      test_one_host_and_more_hosts_than_users, test_without_hosts,
                      test_ou_entry_has_no_host, test_passwords, test_bad_hosts])


if __name__ == "__main__":
    sys.exit(main())
