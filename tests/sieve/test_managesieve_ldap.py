#!/usr/bin/env python3
"""test_managesieve_ldap.py — managesieved logging users in against the real slapd of
scripts/ldap, in both [directory] auth modes (bind: as the user's DN; lookup: the service
account reads the {SSHA} hash, managesieved checks it), each on a managesieved of its own over
the same store. sieve-connect (Debian's package) logs in over STARTTLS with AUTHENTICATE
PLAIN, uploads and activates a script; a wrong password and an unknown user are refused; mail
sent with smtplib to the user's directory address is then filed by that script (mtad and imapd
on the same slapd), read back with imaplib. [sieve] allow_plaintext_auth is off (the default),
so a login that works went through STARTTLS. The two modes are told apart by a user whose
userPassword has no {SCHEME}: slapd's bind takes it as cleartext, the lookup mode's own check
refuses it. A third managesieved (two workers) shows the login cache is the daemon's (#23):
with slapd stopped, a login one worker cached is answered by both. A fourth (two workers,
auth_cache_ttl 2h) takes a SIGHUP's auth_cache_ttl (#23): a password changed with ldapmodify
is answered from the cache as before; after the SIGHUP to 1s the cache is emptied (the new
password logs in) and a second change wins without a restart once the 1 s have passed
(polled, bounded: with 2h it never would).

  test_managesieve_ldap.py SOURCE_ROOT MANAGESIEVED MTAD IMAPD"""
import imaplib
import os
import re
import shutil
import signal
import smtplib
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (HOST, Daemon, Slapd, free_port, make_cert, run_main,  # noqa: E402
                      run_tests, shared_conf, wait_for)

ROOT, MSD, MTAD, IMAPD = sys.argv[1:5]
SIEVE_CONNECT = shutil.which("sieve-connect")
TMP = tempfile.mkdtemp(prefix="heron-msieve-ldap-")
slapd = Slapd(ROOT, os.path.join(TMP, "ldap"), users=5)
MSD_PORTS = {"bind": free_port(), "lookup": free_port(), "shared": free_port(),
             "hup": free_port()}
msd = {}
mtad = imapd = None
DAEMONS = []  # filled by setup(), stopped by run_main
IMAP_PORT = SMTP_PORT = None


def setup():
    """Once slapd runs (its ldap.env names the URI and the service account): a conf per
    auth mode (the same store), mtad and imapd on the bind one."""
    global mtad, imapd, IMAP_PORT, SMTP_PORT
    cert, key = make_cert(TMP)
    confs = {}
    for mode in ("bind", "lookup", "shared", "hup"):
        sieve = {"listen": f"{HOST}:{MSD_PORTS[mode]}"}
        directory = slapd.directory(auth_mode=mode if mode in ("bind", "lookup") else "bind")
        if mode in ("shared", "hup"):
            sieve["workers"] = "2"
            directory["auth_cache_ttl"] = "1h" if mode == "shared" else "2h"
        conf, smtp_port, imap_port = shared_conf(TMP, [], keys={
            "tls": {"cert": cert, "key": key}, "sieve": sieve, "directory": directory})
        path = os.path.join(TMP, f"{mode}.conf")
        os.replace(conf, path)
        confs[mode] = (path, smtp_port, imap_port)
        msd[mode] = Daemon(MSD, path, os.path.join(TMP, f"managesieved-{mode}.log"),
                           MSD_PORTS[mode])
    path, SMTP_PORT, IMAP_PORT = confs["bind"]
    mtad = Daemon(MTAD, path, os.path.join(TMP, "mtad.log"), SMTP_PORT)
    imapd = Daemon(IMAPD, path, os.path.join(TMP, "imapd.log"), IMAP_PORT)
    DAEMONS.extend([msd["bind"], msd["lookup"], msd["shared"], msd["hup"], mtad, imapd])


def sc(mode, user, password, *args):
    """sieve-connect to the managesieved of mode, the password on a descriptor."""
    r = subprocess.run([SIEVE_CONNECT, "-s", HOST, "-p", str(MSD_PORTS[mode]), "-u", user,
                        "--passwordfd", "0", "--notlsverify", *args], input=password + "\n",
                       capture_output=True, text=True, timeout=90, cwd=TMP)
    return r.returncode, r.stdout + r.stderr


def filed(user, mailbox, subject):
    c = imaplib.IMAP4(HOST, IMAP_PORT, timeout=20)
    c.login(user, user)
    typ, data = c.select(f'"{mailbox}"', readonly=True)
    found = typ == "OK" and int(data[0]) > 0 and \
        bool(c.search(None, "SUBJECT", f'"{subject}"')[1][0].split())
    c.logout()
    return found


def login_upload_filter(mode, user):
    rc, text = sc(mode, user, "wrong", "--list")
    assert rc != 0, text
    rc, text = sc(mode, "nosuchuser", user, "--list")
    assert rc != 0, text
    path = os.path.join(TMP, f"{mode}.sieve")
    with open(path, "w") as f:
        f.write('require ["fileinto", "mailbox"];\n'
                f'if header :contains "subject" "{mode} report" '
                f'{{ fileinto :create "Reports-{mode}"; }}\n')
    rc, text = sc(mode, user, user, "--localsieve", path, "--remotesieve", mode, "--upload")
    assert rc == 0, text
    rc, text = sc(mode, user, user, "--remotesieve", mode, "--activate")
    assert rc == 0, text
    rc, text = sc(mode, user, user, "--list")
    assert rc == 0 and mode in text, text
    log = msd[mode].logtext()
    assert f"managesieve login user={user} result=ok" in log, log[-3000:]
    assert f"managesieve login user={user} result=fail" in log, log[-3000:]
    with smtplib.SMTP(HOST, SMTP_PORT, timeout=30) as s:
        s.sendmail("sender@example.org", [f"{user}@heron.test"],
                   f"From: sender@example.org\r\nTo: {user}@heron.test\r\n"
                   f"Subject: the {mode} report\r\n\r\nnumbers\r\n")
    wait_for(lambda: filed(user, f"Reports-{mode}", f"the {mode} report"), timeout=60,
             what=f"the {mode} report filed by the script uploaded in {mode} mode")


def test_bind_mode():
    login_upload_filter("bind", "user1")


def test_lookup_mode():
    login_upload_filter("lookup", "user2")


def test_modes_differ():
    # a userPassword without a {SCHEME}: slapd checks it as cleartext on a bind, managesieved's
    # own check in lookup mode takes only the hashes it knows
    slapd.set_password("user3", "user3")
    rc, text = sc("bind", "user3", "user3", "--list")
    assert rc == 0, text
    rc, text = sc("lookup", "user3", "user3", "--list")
    assert rc != 0, text
    assert "managesieve login user=user3 result=fail" in msd["lookup"].logtext()


def test_sighup_ttl():
    user, d = "user5", msd["hup"]
    assert sc("hup", user, user, "--list")[0] == 0  # asks slapd, cached for 2h
    slapd.set_password(user, "second5")
    for _ in range(3):
        rc, text = sc("hup", user, user, "--list")
        assert rc == 0, "the cached login was not kept: " + text

    with open(d.conf) as f:
        text = f.read()
    assert "auth_cache_ttl = 2h" in text, text
    with open(d.conf, "w") as f:
        f.write(text.replace("auth_cache_ttl = 2h", "auth_cache_ttl = 1s", 1))
    mark = re.compile(r"managesieved worker \d+ config reloaded")
    n = len(mark.findall(d.logtext()))
    d.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: len(mark.findall(d.logtext())) >= n + 2, 30, "every worker reloaded")
    assert ("managesieved reload: [directory] auth_cache_ttl changed (the directory reloads "
            "what it can)") in d.logtext(), d.logtext()[-3000:]
    # the reload emptied the cache: the directory answers
    rc, text = sc("hup", user, "second5", "--list")
    assert rc == 0, text
    # kept 1 s from now on: a change wins without another SIGHUP
    slapd.set_password(user, "third5")
    wait_for(lambda: sc("hup", user, "second5", "--list")[0] != 0, 90,
             "the old password refused (the 2h TTL kept?)")
    rc, text = sc("hup", user, "third5", "--list")
    assert rc == 0, text


def test_workers_share_the_login_cache():
    # last: it stops slapd
    user = "user4"
    line = re.compile(r"\[(\d+)\].* managesieve login user=" + user + r" result=ok")

    def pids():
        return [m.group(1) for m in map(line.search, msd["shared"].logtext().splitlines())
                if m is not None]
    rc, text = sc("shared", user, user, "--list")  # asks slapd, cached
    assert rc == 0, text
    assert len(pids()) == 1, msd["shared"].logtext()[-3000:]
    slapd.stop(check=True)
    # with the directory down only a cache answers; until both workers have
    for _ in range(10):
        runs = [subprocess.Popen([SIEVE_CONNECT, "-s", HOST, "-p", str(MSD_PORTS["shared"]),
                                  "-u", user, "--passwordfd", "0", "--notlsverify", "--list"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, cwd=TMP)
                for _ in range(4)]
        for r in runs:
            out, _ = r.communicate(user + "\n", timeout=90)
            assert r.returncode == 0, out
        if len(set(pids())) >= 2:
            break
    assert len(set(pids())) == 2, f"every login went to one worker: {pids()}"


def main():
    if SIEVE_CONNECT is None:
        print("sieve-connect is not installed (scripts/bootstrap installs it)")
        return 1

    def body():
        slapd.start()
        setup()
        for d in DAEMONS:
            d.start()
        return run_tests([test_bind_mode, test_lookup_mode, test_modes_differ,
                          test_sighup_ttl, test_workers_share_the_login_cache])
    return run_main(body, TMP, DAEMONS, cleanup=[slapd.stop], tail=8000)


if __name__ == "__main__":
    sys.exit(main())
