"""test_deb.py — the Debian packages, built from the tree as an admin or a distribution would,
then installed, run under a real systemd and purged in a throwaway root.

1. `dpkg-buildpackage -us -uc -b` on a copy of the tree makes heron_*.deb (the servers and
   mailctl) and heron-bench_*.deb (mailload and sink); lintian finds no error or warning;
   `dpkg -c` shows every file where it belongs, each program with its man page, and
   heron.conf and the logrotate entry are conffiles.
2. The throwaway root is the machine's own system seen through an overlay (writes go to a
   tmpfs and vanish): `dpkg -i` creates the heron user and its directories with their owners
   and modes, installs the units disabled, `systemd-analyze verify` accepts them, logrotate
   reads its entry, the installed mtad accepts the installed heron.conf; `dpkg --purge`
   removes the user, the directories, the configuration and the units.
3. Installed again and booted with systemd (systemd-nspawn, its own network namespace with
   only a loopback): the units (mtad, imapd, managesieved) start as Type=notify, bind ports
   25, 143 and 4190 as the heron user
   with CAP_NET_BIND_SERVICE alone, take a message over SMTP that IMAP then reads, reload
   (SIGHUP) keeping their main process, reopen the log when logrotate rotates it, and stop
   cleanly. Purged with mail in the store, the store and its user are kept.

Needs root (mounts, chroot); exits 77 (skipped) otherwise. A machine where systemd-nspawn
cannot boot a container skips step 3 and says so.

    test_deb.py SOURCE_ROOT
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import run_main, run_tests, skip, ssha  # noqa: E402

SRC = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="heron-deb-")
OUT = os.path.join(TMP, "out")
ROOT = os.path.join(TMP, "ov", "merged")
DEBS = {}

HERON_FILES = {
    "./usr/sbin/mtad": "-rwxr-xr-x", "./usr/sbin/imapd": "-rwxr-xr-x",
    "./usr/sbin/mailctl": "-rwxr-xr-x", "./usr/sbin/managesieved": "-rwxr-xr-x",
    "./usr/sbin/heron-sendmail": "-rwxr-xr-x",
    "./etc/heron/heron.conf": "-rw-r--r--",
    "./etc/logrotate.d/heron": "-rw-r--r--",
    "./lib/systemd/system/heron-mtad.service": "-rw-r--r--",
    "./lib/systemd/system/heron-imapd.service": "-rw-r--r--",
    "./lib/systemd/system/heron-managesieve.service": "-rw-r--r--",
    "./usr/lib/sysusers.d/heron.conf": "-rw-r--r--",
    "./usr/lib/tmpfiles.d/heron.conf": "-rw-r--r--",
    "./usr/share/heron/ldap/heron.schema": "-rw-r--r--",
    "./usr/share/man/man5/heron.conf.5.gz": "-rw-r--r--",
    "./usr/share/doc/heron/deploy.md.gz": "-rw-r--r--",
}
UNITS = ("heron-mtad", "heron-imapd", "heron-managesieve")
BENCH_FILES = {
    "./usr/bin/mailload": "-rwxr-xr-x", "./usr/sbin/sink": "-rwxr-xr-x",
    "./usr/share/doc/heron-bench/workload.md.gz": "-rw-r--r--",
    "./usr/share/doc/heron-bench/mailload-report.md.gz": "-rw-r--r--",
}


def sh(args, timeout=600, check=True, **kw):
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"{args!r} exited {r.returncode}:\n{r.stdout[-3000:]}\n"
                             f"{r.stderr[-3000:]}")
    return r


def chroot(cmd, check=True, timeout=300):
    return sh(["chroot", ROOT, "/bin/sh", "-c", cmd], timeout=timeout, check=check)


# ---- 1. build and inspect ----

def copy_tree(dest):
    """The source tree as a clean checkout has it (no build directories)."""
    if os.path.isdir(os.path.join(SRC, ".git")) or os.path.isfile(os.path.join(SRC, ".git")):
        files = sh(["git", "-C", SRC, "ls-files", "-co", "--exclude-standard", "-z"]).stdout
        for rel in filter(None, files.split("\0")):
            if not os.path.lexists(os.path.join(SRC, rel)):
                continue  # deleted in the work tree, not yet in the index
            os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
            shutil.copy2(os.path.join(SRC, rel), os.path.join(dest, rel), follow_symlinks=False)
    else:
        shutil.copytree(SRC, dest, symlinks=True, ignore=lambda d, names: [
            n for n in names if os.path.exists(os.path.join(d, n, "meson-private"))])


def test_build_depends():
    """Every library the build looks for is a Build-Depends of debian/control: the pkg-config
    name of each dependency() in the meson.build files, mapped to the Debian package that
    ships its .pc file."""
    with open(os.path.join(SRC, "debian", "control")) as f:
        control = f.read()
    head = control.split("\n\n")[0]
    declared = set(re.findall(r"^\s*(?:Build-Depends:)?\s*([a-z0-9][a-z0-9+.-]+)[ ,(<\n]",
                              head.split("Build-Depends:", 1)[1].split("\nStandards")[0] + "\n",
                              re.M))
    names = set()
    for dirpath, dirs, files in os.walk(SRC):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build", "obj-"))
                   and d != "debian"]
        if "meson.build" in files:
            with open(os.path.join(dirpath, "meson.build")) as f:
                names |= set(re.findall(r"dependency\('([^']+)'", f.read()))
    names -= {"threads", "cmocka"}  # the compiler's own; cmocka: <!nocheck>, checked below
    assert "libcmocka-dev" in control
    for name in sorted(names):
        pc = sh(["pkg-config", "--variable=pcfiledir", name]).stdout.strip()
        owner = sh(["dpkg", "-S", os.path.join(pc, name + ".pc")]).stdout.split(":")[0]
        assert owner in declared, f"meson's dependency('{name}') is {owner}: not in " \
            f"debian/control's Build-Depends {sorted(declared)}"


def test_build():
    if os.environ.get("HERON_TEST_DEBS"):  # packages built before: test those
        os.makedirs(OUT)
        for name in os.listdir(os.environ["HERON_TEST_DEBS"]):
            if re.search(r"\.(deb|changes|buildinfo)$", name):
                shutil.copy(os.path.join(os.environ["HERON_TEST_DEBS"], name), OUT)
        return find_debs()
    src = os.path.join(OUT, "heron")
    copy_tree(src)
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck noautodbgsym parallel=2")
    t = time.monotonic()
    r = sh(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, env=env, timeout=1500,
           check=False)
    if r.returncode != 0:  # the lines that say why (dh_missing: a file no package takes)
        why = [l for l in (r.stdout + r.stderr).splitlines()
               if re.search(r"error|warning|dh_missing|not installed", l, re.I)]
        raise AssertionError("dpkg-buildpackage failed:\n" + "\n".join(why[-40:]))
    print(f"dpkg-buildpackage: {time.monotonic() - t:.0f} s")
    find_debs()


def find_debs():
    for name in os.listdir(OUT):
        m = re.match(r"(heron|heron-bench)_[^_]+_[^_]+\.deb$", name)
        if m:
            DEBS[m.group(1)] = os.path.join(OUT, name)
    assert set(DEBS) == {"heron", "heron-bench"}, os.listdir(OUT)


def contents(deb):
    """{path: mode} of a .deb (dpkg -c)."""
    out = {}
    for line in sh(["dpkg", "-c", deb]).stdout.splitlines():
        f = line.split()
        out[f[5]] = f[0]
    return out


def test_lintian():
    changes = [n for n in os.listdir(OUT) if n.endswith(".changes")]
    assert len(changes) == 1, changes
    r = sh(["lintian", "--fail-on", "error,warning", os.path.join(OUT, changes[0])],
           check=False)
    tags = [l for l in r.stdout.splitlines() if re.match(r"[EW]: ", l)]
    assert r.returncode == 0 and not tags, r.stdout + r.stderr


def test_contents():
    for pkg, want in (("heron", HERON_FILES), ("heron-bench", BENCH_FILES)):
        have = contents(DEBS[pkg])
        for path, mode in want.items():
            assert have.get(path) == mode, (pkg, path, have.get(path), mode)
        for path in have:  # every program comes with its man page, in the same package
            m = re.match(r"\./usr/s?bin/([^/]+)$", path)
            if m:
                sec = 1 if "/bin/" in path and "/sbin/" not in path else 8
                page = f"./usr/share/man/man{sec}/{m.group(1)}.{sec}.gz"
                assert page in have, (pkg, path, page)
    d = os.path.join(TMP, "ctl")
    sh(["dpkg-deb", "-e", DEBS["heron"], d])
    with open(os.path.join(d, "conffiles")) as f:
        assert f.read().split() == ["/etc/heron/heron.conf", "/etc/logrotate.d/heron"]
    control = sh(["dpkg-deb", "-f", DEBS["heron"], "Depends"]).stdout
    assert "adduser" in control and "liblmdb0" in control, control
    assert "heron" not in sh(["dpkg-deb", "-f", DEBS["heron-bench"], "Depends"]).stdout


# ---- 2. install and purge in a throwaway root ----

def overlay_up():
    base = os.path.join(TMP, "ov")
    os.makedirs(base)
    sh(["mount", "-t", "tmpfs", "-o", "size=2g", "tmpfs", base])
    for d in ("upper", "work", "merged"):
        os.mkdir(os.path.join(base, d))
    sh(["mount", "-t", "overlay", "overlay", "-o",
        f"lowerdir=/,upperdir={base}/upper,workdir={base}/work", ROOT])


def binds_up():
    sh(["mount", "-t", "proc", "proc", os.path.join(ROOT, "proc")])
    sh(["mount", "--bind", "/dev", os.path.join(ROOT, "dev")])


def binds_down():
    for d in ("proc", "dev"):
        subprocess.run(["umount", os.path.join(ROOT, d)], capture_output=True)


def overlay_down():
    binds_down()
    base = os.path.join(TMP, "ov")
    for p in (ROOT, base):
        if os.path.ismount(p):
            subprocess.run(["umount", "-l", p], capture_output=True)


def install_debs():
    os.makedirs(os.path.join(ROOT, "tmp", "debs"), exist_ok=True)
    for deb in DEBS.values():
        shutil.copy(deb, os.path.join(ROOT, "tmp", "debs"))
    chroot("dpkg -i /tmp/debs/*.deb")


def owner_mode(path):
    return chroot(f"stat -c '%U:%G %a' {path}").stdout.strip()


def test_install_and_purge():
    overlay_up()
    binds_up()
    # a system without the user (the machine's own, if any, is hidden in the overlay)
    chroot("printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d; "
           "chmod 755 /usr/sbin/policy-rc.d; "
           "if getent passwd heron >/dev/null; then userdel heron; fi; "
           "if getent group heron >/dev/null; then groupdel heron; fi")
    # another MTA's /usr/sbin/sendmail (a real file: Postfix's, on a machine that has run the
    # peers' benchmark) is left alone; otherwise heron-sendmail becomes the system's sendmail
    other = chroot("test -f /usr/sbin/sendmail && ! test -L /usr/sbin/sendmail && "
                   "sha256sum /usr/sbin/sendmail", check=False).stdout
    install_debs()
    pw = chroot("getent passwd heron").stdout.strip().split(":")
    assert int(pw[2]) < 1000 and pw[5] == "/var/lib/heron" and pw[6] == "/usr/sbin/nologin", pw
    assert owner_mode("/var/lib/heron") == "heron:heron 750"
    assert owner_mode("/var/lib/heron/store") == "heron:heron 750"
    assert owner_mode("/var/log/heron") == "heron:adm 750"
    assert owner_mode("/run/heron") == "heron:heron 755"
    assert owner_mode("/var/spool/heron/maildrop") == "heron:heron 1733"
    for unit in UNITS:
        r = sh(["systemctl", f"--root={ROOT}", "is-enabled", unit + ".service"], check=False)
        assert r.stdout.strip() == "disabled", (unit, r.stdout, r.stderr)
    r = chroot("systemd-analyze verify --man=no " +
               " ".join(f"/lib/systemd/system/{u}.service" for u in UNITS) + " 2>&1",
               check=False)
    assert r.returncode == 0 and r.stdout.strip() == "", r.stdout
    chroot("logrotate -d /etc/logrotate.d/heron")
    if other:
        assert chroot("sha256sum /usr/sbin/sendmail").stdout == other, "sendmail replaced"
    else:
        assert chroot("readlink -f /usr/sbin/sendmail").stdout.strip() == \
            "/usr/sbin/heron-sendmail"
        # mailq is the alternative's slave: -bp, which asks mtad's control socket (not
        # running here: 69, EX_UNAVAILABLE)
        assert chroot("readlink -f /usr/bin/mailq").stdout.strip() == \
            "/usr/sbin/heron-sendmail"
        r = chroot("mailq", check=False)
        assert r.returncode == 69 and "not running" in r.stderr, r
    r = chroot("/usr/sbin/heron-sendmail -bp", check=False)
    assert r.returncode == 69 and "not running" in r.stderr, r
    r = chroot("mtad -t && imapd -t && managesieved -t && mailctl -t && sink -t", check=False)
    assert r.returncode == 0 and "path = /var/lib/heron/store" in r.stdout, r.stderr
    chroot("dpkg --purge heron heron-bench")
    assert chroot("getent passwd heron; getent group heron", check=False).stdout == ""
    for p in ("/var/lib/heron", "/var/log/heron", "/run/heron", "/etc/heron", "/var/spool/heron",
              "/lib/systemd/system/heron-mtad.service", "/etc/logrotate.d/heron",
              "/lib/systemd/system/heron-managesieve.service", "/usr/sbin/managesieved",
              "/usr/sbin/mtad", "/usr/bin/mailload", "/usr/sbin/heron-sendmail") + \
            (() if other else ("/usr/sbin/sendmail", "/usr/bin/mailq")):
        assert not os.path.lexists(ROOT + p), f"{p} left after purge"
    if other:
        assert chroot("sha256sum /usr/sbin/sendmail").stdout == other, "sendmail after purge"


# ---- 3. boot with systemd ----

CHECK = r'''
import imaplib, json, os, smtplib, socket, subprocess, time
UNITS = ("heron-mtad", "heron-imapd", "heron-managesieve")
res = {}
def run(*a):
    r = subprocess.run(a, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr
def show(unit):
    out = run("systemctl", "show", "-p", "MainPID,ActiveState,SubState,NRestarts,Result,"
              "ExecMainStatus,StatusText", unit)[1]
    return dict(l.split("=", 1) for l in out.splitlines() if "=" in l)
def send(subject):
    with smtplib.SMTP("127.0.0.1", 25, timeout=20) as c:
        c.sendmail("x@example.org", ["alice@heron.test"], b"Subject: " + subject +
                   b"\r\n\r\nunder systemd\r\n")
try:
    res["pre"] = run("sh", "-c", "ss -ltnp")[1]
    res["start"] = run("systemctl", "start", *UNITS)
    res["before"] = {u: show(u) for u in UNITS}
    res["users"] = run("ps", "-o", "user=,comm=", "-C", "mtad,imapd,managesieved")[1]
    pid = res["before"]["heron-mtad"]["MainPID"]
    res["capeff"] = [l for l in open(f"/proc/{pid}/status")
                     if l.startswith(("Cap", "Seccomp:", "NoNewPrivs:"))]
    send(b"first")
    i = imaplib.IMAP4("127.0.0.1", 143)
    i.login("alice", "alicepw")
    i.select("INBOX")
    for _ in range(50):
        found = i.search(None, "ALL")[1][0].split()
        if found:
            break
        time.sleep(0.2)
    res["fetched"] = i.fetch(found[0], "(BODY[HEADER.FIELDS (SUBJECT)])")[1][0][1].decode()
    i.logout()
    with socket.create_connection(("127.0.0.1", 4190), timeout=20) as m:
        res["sieve_greeting"] = m.recv(4096).decode(errors="replace")
    res["reload"] = run("systemctl", "reload", *UNITS)
    time.sleep(1)
    res["after_reload"] = {u: show(u) for u in UNITS}
    res["logrotate"] = run("logrotate", "-f", "/etc/logrotate.d/heron")
    time.sleep(1)
    send(b"second")
    time.sleep(1)
    res["logs"] = sorted(os.listdir("/var/log/heron"))
    res["new_log"] = open("/var/log/heron/heron.log").read()
    res["all_logs"] = run("sh", "-c", "cat /var/log/heron/heron.log*")[1]
    res["after_rotate"] = {u: show(u) for u in UNITS}
    res["stop"] = run("systemctl", "stop", *UNITS)
    res["after_stop"] = {u: show(u) for u in UNITS}
except Exception as e:
    res["error"] = repr(e)
res["journal"] = run("journalctl", "--no-pager", *(a for u in UNITS for a in ("-u", u)))[1]
res["heron_log"] = run("sh", "-c", "tail -n 40 /var/log/heron/*")[1]
res["listening"] = run("sh", "-c", "ss -ltnp; systemctl list-units --no-pager --state=active")[1]
with open("/root/heron-result.json", "w") as f:
    json.dump(res, f)
subprocess.run(["systemctl", "poweroff"])
'''

TEST_CONF = """
# test_deb.py: loopback ports of the container, a users file, the log in a file
[directory]
backend = file
users_file = /etc/heron/users
[mtad]
listen = 127.0.0.1:25
submission = 127.0.0.1:587
local_domains = heron.test
[imapd]
listen = 127.0.0.1:143
allow_plaintext_auth = yes
[log]
target = file
"""


def boot():
    """Boots the root with systemd, runs CHECK in it; the result dict, or None when this
    machine cannot boot a container."""
    with open(ROOT + "/etc/heron/users", "w") as f:
        f.write(f"alice:{ssha('alicepw')}:alice@heron.test\n")
    chroot("chown root:heron /etc/heron/users && chmod 640 /etc/heron/users && "
           "rm -f /usr/sbin/policy-rc.d /etc/machine-id")
    with open(ROOT + "/etc/heron/heron.conf", "a") as f:
        f.write(TEST_CONF)
    with open(ROOT + "/root/heron-check.py", "w") as f:
        f.write(CHECK)
    # booted into a target of its own: basic.target and the check, none of the services
    # this machine's own system would start, and no wait for a network it does not have
    with open(ROOT + "/etc/systemd/system/heron-check.service", "w") as f:
        f.write("[Unit]\nAfter=basic.target\n[Service]\nType=oneshot\n"
                "ExecStart=/usr/bin/python3 /root/heron-check.py\n")
    with open(ROOT + "/etc/systemd/system/heron-check.target", "w") as f:
        f.write("[Unit]\nRequires=basic.target heron-check.service\n"
                "After=basic.target\nAllowIsolate=yes\n")
    os.symlink("/dev/null",
               ROOT + "/etc/systemd/system/systemd-networkd-wait-online.service")
    # the machine's own socket units (a peer's dovecot.socket holds 143) are masked
    for d in ("/lib/systemd/system", "/etc/systemd/system"):
        for name in os.listdir(ROOT + d):
            if name.endswith(".socket") and not name.startswith(("systemd-", "dbus")):
                mask = ROOT + "/etc/systemd/system/" + name
                if os.path.lexists(mask):
                    os.unlink(mask)
                os.symlink("/dev/null", mask)
    binds_down()
    machine = f"heron-test-{os.getpid()}"
    log = os.path.join(TMP, "nspawn.log")
    with open(log, "wb") as lf:
        p = subprocess.Popen(["systemd-nspawn", "-q", "-D", ROOT, f"--machine={machine}",
                              "--private-network", "--register=no", "--keep-unit",
                              "--link-journal=no", "-b", "systemd.unit=heron-check.target"],
                             stdout=lf, stderr=lf,
                             stdin=subprocess.DEVNULL)
        try:
            p.wait(timeout=240)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=30)
    binds_up()
    result = ROOT + "/root/heron-result.json"
    if not os.path.exists(result):
        with open(log, errors="replace") as f:
            print(f"skip the systemd boot: systemd-nspawn did not run the check "
                  f"(exit {p.returncode}):\n{f.read()[-2000:]}")
        return None
    with open(result) as f:
        return json.load(f)


def test_systemd_boot():
    install_debs()
    res = boot()
    if res is None:
        return
    try:
        assert "error" not in res, res.get("error")
        assert res["start"][0] == 0, res["start"]
        for unit in UNITS:
            b, r = res["before"][unit], res["after_rotate"][unit]
            assert b["ActiveState"] == "active" and b["SubState"] == "running", b
            assert re.fullmatch(r"\d+ workers serving", b["StatusText"]), b  # with READY=1
            assert r["MainPID"] == b["MainPID"] and r["NRestarts"] == "0", (b, r)
            assert res["after_reload"][unit]["ActiveState"] == "active"
            s = res["after_stop"][unit]
            assert s["ActiveState"] == "inactive" and s["Result"] == "success", s
        assert set(res["users"].split()) == {"heron", "mtad", "imapd", "managesieved"}, \
            res["users"]
        assert '"IMPLEMENTATION"' in res["sieve_greeting"], res["sieve_greeting"]
        caps = dict(l.split(":") for l in res["capeff"])
        assert int(caps["CapEff"], 16) == 1 << 10 and int(caps["CapBnd"], 16) == 1 << 10, caps
        assert caps["Seccomp"].strip() == "2" and caps["NoNewPrivs"].strip() == "1", caps
        assert "Subject: first" in res["fetched"], res["fetched"]
        assert res["reload"][0] == 0 and res["logrotate"][0] == 0, (res["reload"],
                                                                    res["logrotate"])
        assert "heron.log.1" in res["logs"], res["logs"]
        assert "SIGUSR1: log reopened" in res["new_log"], res["new_log"][-2000:]
        assert re.search(r" mtad\[\d+\] info: \S+ smtp connect", res["new_log"]), \
            res["new_log"][-2000:]
        # nothing the sandbox refused (SystemCallFilter answers EPERM) nor any other error
        errors = [l for l in res["all_logs"].splitlines() if " err: " in l]
        assert not errors, errors
    except AssertionError:
        print(res.get("journal", "")[-6000:])
        print(res.get("heron_log", ""))
        print(res.get("pre", ""), res.get("listening", ""))
        raise
    # purged with mail in the store: the store and its user stay
    r = chroot("dpkg --purge heron heron-bench 2>&1")
    assert "kept /var/lib/heron" in r.stdout, r.stdout
    assert os.path.isdir(ROOT + "/var/lib/heron/store")
    assert chroot("getent passwd heron", check=False).stdout.startswith("heron:")
    assert not os.path.lexists(ROOT + "/etc/heron/heron.conf")


def main():
    if os.geteuid() != 0:
        skip("needs root (mounts, chroot, dpkg in a throwaway root)")
    return run_main(lambda: run_tests([test_build_depends, test_build, test_lintian,
                                       test_contents,
                                       test_install_and_purge, test_systemd_boot]),
                    TMP, [], cleanup=[overlay_down])


if __name__ == "__main__":
    sys.exit(main())
