#!/usr/bin/env python3
"""test_mailctl_dir.py — `mailctl auth test` and `mailctl lookup` against the fixture's slapd:
run through with_slapd.py, which exports ldap.env.

Usage: with_slapd.py ROOT -- test_mailctl_dir.py MAILCTL ROOT"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import ldap_script, run_tests, write_conf  # noqa: E402

prog, root = sys.argv[1], sys.argv[2]
tmp = os.environ["HERON_TMP"]


def conf(name, **kv):
    keys = {"uri": os.environ["LDAP_URI"], "base": os.environ["LDAP_PEOPLE"], "timeout": "1s"}
    return write_conf(os.path.join(tmp, name), {"directory": {**keys, **kv}})


def run(cfg, *args, password=None):
    r = subprocess.run([prog, "-c", cfg, *args], input=password, capture_output=True,
                       text=True, timeout=60)
    return r.returncode, r.stdout.splitlines()


def field(line, key):
    for part in line.split(" "):
        if part.startswith(key + "="):
            return part[len(key) + 1:]
    return None


BIND = conf("bind.conf")


def test_auth_and_lookup():
    rc, out = run(BIND, "auth", "test", "-n", "3", "user7", password="user7\n")
    assert rc == 0, (rc, out)
    assert len(out) == 3, out
    assert [field(l, "result") for l in out] == ["ok"] * 3, out
    assert [field(l, "cached") for l in out] == ["no", "yes", "yes"], out
    assert field(out[0], "mode") == "bind" and field(out[0], "time").endswith("ms"), out
    assert field(out[0], "dn") == "uid=user7,ou=people,dc=heron,dc=test", out

    rc, out = run(BIND, "auth", "test", "user7", password="wrong\n")
    assert rc == 1 and out[0].startswith("result=wrong credentials"), (rc, out)
    rc, out = run(BIND, "auth", "test", "nobody", password="x\n")
    assert rc == 67 and out[0].startswith("result=no such user"), (rc, out)
    rc, out = run(BIND, "auth", "test", "user7", password="\n")
    assert rc == 1 and "refused=yes" in out[0], (rc, out)

    rc, out = run(BIND, "lookup", "alias.user9@heron.test")
    assert rc == 0 and field(out[0], "user") == "user9", (rc, out)
    assert field(out[0], "address") == "user9@heron.test", out

    lookup = conf("lookup.conf", auth_mode="lookup", bind_dn=os.environ["LDAP_ADMIN_DN"],
                  bind_password_file=os.environ["LDAP_ADMIN_PASSWORD_FILE"])
    rc, out = run(lookup, "auth", "test", "user8", password="user8\n")
    assert rc == 0 and field(out[0], "mode") == "lookup", (rc, out)


def set_password(user, value):
    ldif = (f"dn: uid={user},{os.environ['LDAP_PEOPLE']}\nchangetype: modify\n"
            f"replace: userPassword\nuserPassword: {value}\n")
    subprocess.run(["ldapmodify", "-x", "-H", os.environ["LDAP_URI"], "-D",
                    os.environ["LDAP_ADMIN_DN"], "-y", os.environ["LDAP_ADMIN_PASSWORD_FILE"]],
                   input=ldif.encode(), check=True, stdout=subprocess.DEVNULL, timeout=60)


def test_pw_hashes_slapd_checks():
    """Every scheme `mailctl pw` makes as userPassword: slapd checks it when the user binds
    ({SSHA512} and {ARGON2} through its pw-sha2 and argon2 modules), and lookup mode checks
    it locally ({SCRAM-SHA-256} too, which slapd cannot)."""
    lookup = conf("lookup2.conf", auth_mode="lookup", bind_dn=os.environ["LDAP_ADMIN_DN"],
                  bind_password_file=os.environ["LDAP_ADMIN_PASSWORD_FILE"])
    for i, scheme in enumerate(("SSHA", "SSHA512", "CRYPT", "ARGON2", "SCRAM-SHA-256")):
        user, pw = f"user{11 + i}", f"new-{scheme}"
        rc, out = run(BIND, "pw", "--scheme", scheme, password=pw + "\n")
        assert rc == 0 and out[0].startswith("{" + scheme + "}"), (rc, out)
        set_password(user, out[0])
        modes = [lookup] if scheme == "SCRAM-SHA-256" else [BIND, lookup]
        for cfg in modes:
            rc, res = run(cfg, "auth", "test", user, password=pw + "\n")
            assert rc == 0 and field(res[0], "result") == "ok", (scheme, cfg, rc, res)
            rc, res = run(cfg, "auth", "test", user, password="wrong\n")
            assert rc == 1, (scheme, cfg, rc, res)
    rc, out = run(BIND, "--json", "pw", password="x\n")  # auto for ldap: what slapd checks
    assert rc == 0 and json.loads(out[0])["scheme"] == "SSHA", out


def test_errors_and_json():
    rc, out = run(BIND, "auth", "frobnicate", "x")
    assert rc == 64, rc
    rc, out = run(conf("bad.conf", uri="http://nowhere/"), "lookup", "a@b")
    assert rc == 78, rc

    rc, out = run(BIND, "--json", "lookup", "user9@heron.test")
    assert rc == 0 and json.loads(out[0])["user"] == "user9", (rc, out)


def test_directory_down():
    # directory down: a temporary failure (75), never "wrong credentials"
    ldap_script(root, "stop", os.environ["HERON_LDAP_DIR"])
    rc, out = run(BIND, "auth", "test", "user7", password="user7\n")
    assert rc == 75 and out[0].startswith("result=temporary failure"), (rc, out)


sys.exit(run_tests([test_auth_and_lookup, test_pw_hashes_slapd_checks, test_errors_and_json,
                     test_directory_down]))
