#!/usr/bin/env python3
"""Least privilege of the real daemons started as root: without a [*] user they refuse to
start unless allow_root = yes; with a user (nobody here; the package's is heron) the master
and every worker run as that user once the listeners are bound, with no capability and
NoNewPrivs set, and still serve (a message in over SMTP, read over IMAP). Needs root: the
test is skipped (77) otherwise.

  test_privileges.py SOURCE_ROOT MTAD IMAPD"""
import imaplib
import os
import pwd
import smtplib
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import (DOMAIN, HOST, Daemon, run_main, run_tests, shared_conf,  # noqa: E402
                      skip, wait_for, wait_workers_ready)

ROOT, MTAD, IMAPD = sys.argv[1:4]
if os.geteuid() != 0:
    skip("needs root")
NOBODY = pwd.getpwnam("nobody")
TMP = tempfile.mkdtemp(prefix="heron-priv-")
os.chmod(TMP, 0o755)


def status(pid):
    """The fields of /proc/PID/status as a dict."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def conf_for(name, mtad_keys, imapd_keys):
    d = os.path.join(TMP, name)
    os.makedirs(d)
    os.chmod(d, 0o755)
    conf, smtp, imap = shared_conf(d, ["user1"], workers=2, keys={"mtad": mtad_keys,
                                                                  "imapd": imapd_keys})
    os.chmod(os.path.join(d, "users"), 0o644)
    os.chmod(conf, 0o644)
    return d, conf, smtp, imap


def refused(exe, conf, says):
    p = subprocess.run([exe, "-c", conf, "-f"], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0, (exe, p.returncode, p.stderr[-2000:])
    assert says in p.stderr, p.stderr[-2000:]


def test_root_without_user_refused():
    _d, conf, _smtp, _imap = conf_for("refuse", {"user": "", "allow_root": "no"},
                                   {"user": "", "allow_root": "no"})
    for exe in (MTAD, IMAPD):
        refused(exe, conf, "refusing to run as root")


def test_default_user_heron():
    # the default user is the package's heron: run as it when it exists, else say so
    _d, conf, _smtp, _imap = conf_for("heron", {"user": "heron", "allow_root": "no"},
                                   {"user": "heron", "allow_root": "no"})
    try:
        pwd.getpwnam("heron")
        print("a heron user exists here: the default user is checked by the next test's way")
        return
    except KeyError:
        pass
    for exe in (MTAD, IMAPD):
        refused(exe, conf, "user heron")


def test_runs_as_user_without_privileges():
    d, conf, smtp, imap = conf_for("nobody", {"user": "nobody", "allow_root": "no"},
                                   {"user": "nobody", "allow_root": "no"})
    os.makedirs(os.path.join(d, "store"))
    os.chown(os.path.join(d, "store"), NOBODY.pw_uid, NOBODY.pw_gid)
    mtad = Daemon(MTAD, conf, os.path.join(d, "mtad.log"), smtp)
    imapd = Daemon(IMAPD, conf, os.path.join(d, "imapd.log"), imap)
    try:
        mtad.start()
        imapd.start()
        wait_workers_ready(mtad, "mtad", 2)
        wait_workers_ready(imapd, "imapd", 2)
        for daemon in (mtad, imapd):
            pids = [daemon.proc.pid] + daemon.worker_pids()
            assert len(pids) == 3, pids
            for pid in pids:
                st = status(pid)
                uids = st["Uid"].split()
                assert all(int(u) == NOBODY.pw_uid for u in uids), (daemon.name, pid, st["Uid"])
                assert all(int(g) == NOBODY.pw_gid for g in st["Gid"].split()), st["Gid"]
                assert int(st["CapEff"], 16) == 0 and int(st["CapPrm"], 16) == 0, st
                assert st.get("NoNewPrivs") == "1", (pid, st.get("NoNewPrivs"))
        with smtplib.SMTP(HOST, smtp, timeout=20) as c:
            c.sendmail("a@example.org", [f"user1@{DOMAIN}"], "Subject: as nobody\r\n\r\nhi\r\n")
        m = imaplib.IMAP4(HOST, imap, timeout=20)
        m.login("user1", "user1")
        m.select("INBOX")
        wait_for(lambda: m.noop() and m.search(None, "SUBJECT", "nobody")[1][0], 20,
                 "the message in INBOX")
        m.logout()
        assert "running as nobody" in mtad.logtext()
    finally:
        mtad.stop()
        imapd.stop()


def main():
    return run_main(lambda: run_tests([test_root_without_user_refused, test_default_user_heron,
                                       test_runs_as_user_without_privileges]), TMP, [])


if __name__ == "__main__":
    sys.exit(main())
