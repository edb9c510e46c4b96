#!/usr/bin/env python3
"""test_ldap_fixture.py — scripts/ldap: start with 100 users, ldapsearch finds them, a simple
bind as user7/user7 works (and a wrong password does not), aliases resolve, restart keeps the
data, --ldif loads a given file, the files holding secrets are 0600, stop leaves no slapd behind; as root, also run as nobody. Replication:
a --provider with users spread over --hosts and a --consumer-of it: the consumer holds the tree,
refers writes to the provider, gets a mailHost change made on the provider, keeps answering
binds while the provider is down and catches up with a change made while it was away.

Usage: test_ldap_fixture.py SOURCE_ROOT"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import alive, ldap_script, read_env, run_tests  # noqa: E402

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")


def fixture(*args):
    ldap_script(ROOT, *args)


def env_of(d):
    return read_env(os.path.join(d, "ldap.env"))


def ldap(tool, env, *args, bind=None):
    cmd = [tool, "-x", "-H", env["LDAP_URI"], "-o", "nettimeout=5"]
    if bind:
        cmd += ["-D", bind[0], "-w", bind[1]]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=30)


def dns(env, flt, base=None):
    r = ldap("ldapsearch", env, "-LLL", "-b", base or env["LDAP_PEOPLE"], flt, "1.1")
    assert r.returncode == 0, r.stderr
    return [l[4:] for l in r.stdout.splitlines() if l.startswith("dn: ")]


def gone(pid):
    return not alive(pid)


def private(path):
    """path exists and neither its group nor others may read, write or run it."""
    mode = os.stat(path).st_mode & 0o777
    assert mode & 0o077 == 0, f"{path}: mode {mode:o}, secrets readable by others"


def check_generated(d):
    # a readable slapd.conf from an older run is overwritten private, not kept readable
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "slapd.conf"), "w") as f:
        f.write("# older\n")
    os.chmod(os.path.join(d, "slapd.conf"), 0o644)
    fixture("start", d, "--users", "100")
    env = env_of(d)
    pid = int(env["LDAP_PID"])
    try:
        # the admin password (ldap.env, admin.pw, slapd.conf's rootpw) and the users' hashes
        # (the database; users.ldif is removed after the load) are the owner's only
        for name in ("ldap.env", "admin.pw", "slapd.conf", "data"):
            private(os.path.join(d, name))
        for name in os.listdir(os.path.join(d, "data")):
            private(os.path.join(d, "data", name))
        assert not os.path.exists(os.path.join(d, "users.ldif"))
        for k in ("LDAP_URI", "LDAP_BASE", "LDAP_ADMIN_DN", "LDAP_ADMIN_PASSWORD"):
            assert env.get(k), k
        assert env["LDAP_BASE"] == "dc=heron,dc=test"
        assert len(dns(env, "(objectClass=inetOrgPerson)")) == 100
        assert dns(env, "(mail=user42@heron.test)") == \
            ["uid=user42,ou=people,dc=heron,dc=test"]
        assert dns(env, "(mailAlternateAddress=alias.user42@heron.test)") == \
            ["uid=user42,ou=people,dc=heron,dc=test"]
        assert dns(env, "(uid=user101)") == []
        user7 = "uid=user7,ou=people,dc=heron,dc=test"
        r = ldap("ldapwhoami", env, bind=(user7, "user7"))
        assert r.returncode == 0 and user7 in r.stdout, r.stderr
        r = ldap("ldapwhoami", env, bind=(user7, "user8"))
        assert r.returncode == 49, (r.returncode, r.stderr)  # invalidCredentials
        # the password hash is stored salted, readable by the admin only
        r = ldap("ldapsearch", env, "-LLL", "-b", user7, "-s", "base", "userPassword",
                 bind=(env["LDAP_ADMIN_DN"], env["LDAP_ADMIN_PASSWORD"]))
        assert "userPassword:: " in r.stdout, r.stdout
        r = ldap("ldapsearch", env, "-LLL", "-b", user7, "-s", "base", "userPassword")
        assert "userPassword" not in r.stdout
        # restart keeps the port and the data, with a new pid
        fixture("restart", d)
        env2 = env_of(d)
        assert env2["LDAP_URI"] == env["LDAP_URI"]
        assert gone(pid)
        pid = int(env2["LDAP_PID"])
        assert len(dns(env2, "(uid=user*)")) == 100
    finally:
        fixture("stop", d)
    assert gone(pid), f"slapd {pid} still running after stop"
    assert not os.path.exists(os.path.join(d, "slapd.pid"))
    fixture("stop", d)  # stopping a stopped server is fine


def check_ldif(d):
    ldif = os.path.join(d, "given.ldif")
    os.makedirs(d, exist_ok=True)
    with open(ldif, "w") as f:
        f.write("dn: uid=carol,ou=people,dc=heron,dc=test\nobjectClass: inetOrgPerson\n"
                "uid: carol\ncn: Carol\nsn: C\nmail: carol@heron.test\n"
                "userPassword: carolpw\n\n")
    fixture("start", d, "--ldif", ldif)
    env = env_of(d)
    try:
        assert dns(env, "(objectClass=inetOrgPerson)") == \
            ["uid=carol,ou=people,dc=heron,dc=test"]
    finally:
        fixture("stop", d)
    assert gone(int(env["LDAP_PID"]))


def modify_host(env, uid, host):
    ldif = (f"dn: uid={uid},{env['LDAP_PEOPLE']}\nchangetype: modify\nreplace: mailHost\n"
            f"mailHost: {host}\n")
    return subprocess.run(["ldapmodify", "-x", "-H", env["LDAP_URI"], "-o", "nettimeout=5",
                           "-D", env["LDAP_ADMIN_DN"], "-w", env["LDAP_ADMIN_PASSWORD"]],
                          input=ldif, capture_output=True, text=True, timeout=30)


def mailhost(env, uid):
    r = ldap("ldapsearch", env, "-LLL", "-b", env["LDAP_PEOPLE"], f"(uid={uid})", "mailHost")
    assert r.returncode == 0, r.stderr
    return [l.split(": ", 1)[1] for l in r.stdout.splitlines() if l.startswith("mailHost: ")]


def check_replication(tmp):
    prov, cons = os.path.join(tmp, "prov"), os.path.join(tmp, "cons")
    fixture("start", prov, "--users", "20", "--provider", "--hosts", "s1.test,s2.test")
    penv = env_of(prov)
    try:
        assert penv["LDAP_ROLE"] == "provider"
        fixture("start", cons, "--consumer-of", penv["LDAP_URI"])
        cenv = env_of(cons)
        assert cenv["LDAP_ROLE"] == "consumer" and cenv["LDAP_PROVIDER"] == penv["LDAP_URI"]
        assert cenv["LDAP_URI"] != penv["LDAP_URI"]
        # the first refresh brought every entry, mailHost round robin
        assert len(dns(cenv, "(objectClass=inetOrgPerson)")) == 20
        assert mailhost(cenv, "user1") == ["s1.test"] and mailhost(cenv, "user2") == ["s2.test"]
        # writes go to the provider: the consumer refers them there
        r = modify_host(cenv, "user2", "s1.test")
        assert r.returncode == 10 and penv["LDAP_URI"] in r.stderr, (r.returncode, r.stderr)
        assert modify_host(penv, "user2", "s1.test").returncode == 0
        fixture("wait-sync", cons)
        assert mailhost(cenv, "user2") == ["s1.test"]
        # the provider goes away: logins on the consumer go on
        fixture("stop", prov)
        user3 = f"uid=user3,{cenv['LDAP_PEOPLE']}"
        r = ldap("ldapwhoami", cenv, bind=(user3, "user3"))
        assert r.returncode == 0 and user3 in r.stdout, r.stderr
        # it returns with a change made meanwhile (slapd up, consumer not told): caught up
        fixture("restart", prov)
        assert modify_host(penv, "user3", "s9.test").returncode == 0
        fixture("wait-sync", cons, "--timeout", "60")
        assert mailhost(cenv, "user3") == ["s9.test"]
    finally:
        fixture("stop", cons)
        fixture("stop", prov)


def check_unprivileged(tmp):
    """As root, the fixture also runs as an ordinary user (nobody) in a directory it owns."""
    d = os.path.join(tmp, "user")
    # a copy of the script and schema nobody can read, wherever the checkout lives
    for sub, name in (("scripts", "ldap"), ("etc", "heron.schema")):
        os.makedirs(os.path.join(d, "tree", sub))
        shutil.copy(os.path.join(ROOT, sub, name), os.path.join(d, "tree", sub, name))
    os.chown(d, 65534, 65534)
    for dirpath, dirnames, filenames in os.walk(d):
        os.chmod(dirpath, 0o755)
        for fn in filenames:
            os.chmod(os.path.join(dirpath, fn), 0o755)
    as_nobody = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                 "/usr/bin/python3", os.path.join(d, "tree", "scripts", "ldap")]
    subprocess.run(as_nobody + ["start", os.path.join(d, "s"), "--users", "10"], check=True,
                   stdin=subprocess.DEVNULL, timeout=120)
    env = env_of(os.path.join(d, "s"))
    pid = int(env["LDAP_PID"])
    try:
        assert os.stat(f"/proc/{pid}").st_uid == 65534
        assert len(dns(env, "(uid=user*)")) == 10
    finally:
        subprocess.run(as_nobody + ["stop", os.path.join(d, "s")], check=True, timeout=60)
    assert gone(pid)


def main():
    tmp = tempfile.mkdtemp(prefix="heron-ldapfix-")
    os.chmod(tmp, 0o755)

    def test_generated():
        check_generated(os.path.join(tmp, "gen"))

    def test_ldif():
        check_ldif(os.path.join(tmp, "ldif"))

    def test_replication():
        check_replication(tmp)

    def test_unprivileged():
        if os.geteuid() == 0:
            check_unprivileged(tmp)

    try:
        return run_tests([test_generated, test_ldif, test_replication, test_unprivileged])
    finally:
        if os.path.isdir(os.path.join(tmp, "user", "s")):
            fixture("stop", os.path.join(tmp, "user", "s"))
        for sub in ("gen", "ldif", "cons", "prov"):
            if os.path.isdir(os.path.join(tmp, sub)):
                fixture("stop", os.path.join(tmp, sub))
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
