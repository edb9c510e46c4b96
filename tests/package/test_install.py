"""test_install.py — `meson install` into a DESTDIR puts everything an admin needs in place,
and the installed programs run against the installed configuration:

- the programs, a man page for each and heron.conf(5), the guides, heron.conf (0644, never
  replaced once there: an edited file survives a second install), the LDAP schema, the
  systemd units (Type=notify, the installed paths), the sysusers.d, tmpfiles.d and logrotate
  entries;
- the installed mtad, imapd, sink and mailctl check the installed heron.conf (-t), a
  program without its config file names the file it tried and -c, sink runs on its command
  line alone, mailload writes LDIF with no config at all, mailctl as root works on a store
  owned by another user as that user; installed mtad and imapd on loopback ports deliver a
  message that IMAP then reads.

    test_install.py SOURCE_ROOT BUILD_ROOT PREFIX SYSCONFDIR
"""
import imaplib
import os
import pwd
import re
import shutil
import smtplib
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, HOST, Daemon, free_port, run_main, run_tests,  # noqa: E402
                      wait_for, wait_port, write_users)

SRC, BUILD, PREFIX, SYSCONFDIR = sys.argv[1:5]
TMP = tempfile.mkdtemp(prefix="heron-install-")
DEST = os.path.join(TMP, "root")
SBIN = DEST + os.path.join(PREFIX, "sbin")
BIN = DEST + os.path.join(PREFIX, "bin")
CONF = DEST + os.path.join(SYSCONFDIR, "heron", "heron.conf")
MAN = DEST + os.path.join(PREFIX, "share", "man")
DOC = DEST + os.path.join(PREFIX, "share", "doc", "heron")
LIB = DEST + os.path.join(PREFIX, "lib")
PROGRAMS = {"mtad": (SBIN, 8), "imapd": (SBIN, 8), "managesieved": (SBIN, 8),
            "mailctl": (SBIN, 8), "sink": (SBIN, 8), "mailload": (BIN, 1),
            "heron-sendmail": (SBIN, 8)}


def install():
    r = subprocess.run(["meson", "install", "-C", BUILD, "--no-rebuild", "--destdir", DEST],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=60, **kw)


def test_tree():
    install()
    for prog, (d, section) in PROGRAMS.items():
        p = os.path.join(d, prog)
        assert os.access(p, os.X_OK), p
        page = os.path.join(MAN, f"man{section}", f"{prog}.{section}")
        assert os.path.isfile(page), page
        with open(page) as f:
            assert f".TH {prog.upper()} {section}" in f.read(), page
    for page in os.listdir(os.path.join(SRC, "docs")):  # every man page of docs/
        m = re.search(r"\.([1-8])$", page)
        if m:
            assert os.path.isfile(os.path.join(MAN, f"man{m.group(1)}", page)), \
                f"docs/{page} is not installed: add it to docs/meson.build"
    for doc in ("deploy.md", "workload.md", "mailload-report.md", "SECURITY.md"):
        assert os.path.isfile(os.path.join(DOC, doc)), doc
    assert stat.S_IMODE(os.stat(CONF).st_mode) == 0o644, oct(os.stat(CONF).st_mode)
    with open(CONF) as f, open(os.path.join(SRC, "etc", "heron.conf")) as g:
        assert f.read() == g.read()
    assert os.path.isfile(DEST + os.path.join(PREFIX, "share", "heron", "ldap",
                                              "heron.schema"))
    with open(DEST + os.path.join(SYSCONFDIR, "logrotate.d", "heron")) as f:
        assert "/var/log/heron/*.log" in f.read()
    with open(os.path.join(LIB, "sysusers.d", "heron.conf")) as f:
        assert re.search(r"^u heron ", f.read(), re.M)
    with open(os.path.join(LIB, "tmpfiles.d", "heron.conf")) as f:
        tmpfiles = f.read()
    for d in ("/var/lib/heron/store", "/run/heron", "/var/log/heron"):
        assert re.search(rf"^d {re.escape(d)} +07[0-5][05] heron ", tmpfiles, re.M), d


def unfold(ldif):
    """The olc* lines of an LDIF, continuation lines joined."""
    out = []
    for line in ldif.splitlines():
        if line.startswith(" ") and out:
            out[-1] += line[1:]
        elif line.startswith("olc"):
            out.append(line)
    return out


def test_ldap_schema():
    """heron.ldif (cn=config) loads into slapd's configuration and says what heron.schema
    (slapd.conf) says: the installed schema converted by slaptest gives the same lines."""
    ldap = DEST + os.path.join(PREFIX, "share", "heron", "ldap")
    if shutil.which("slaptest") is None and not os.path.exists("/usr/sbin/slaptest"):
        print("skip the schema check: no slaptest (slapd)")
        return
    d = os.path.join(TMP, "slapd")
    os.makedirs(os.path.join(d, "conv"))
    os.makedirs(os.path.join(d, "cfg"))
    base = "".join(f"include /etc/ldap/schema/{s}.schema\n"
                   for s in ("core", "cosine", "inetorgperson"))
    with open(os.path.join(d, "conv.conf"), "w") as f:
        f.write(base + f"include {ldap}/heron.schema\n")
    with open(os.path.join(d, "cfg.conf"), "w") as f:
        f.write(base)
    for conf, out in (("conv.conf", "conv"), ("cfg.conf", "cfg")):
        r = run(["/usr/sbin/slaptest", "-f", os.path.join(d, conf), "-F", os.path.join(d, out)])
        assert r.returncode == 0, r.stderr
    with open(os.path.join(d, "conv", "cn=config", "cn=schema", "cn={3}heron.ldif")) as f:
        converted = unfold(f.read())
    with open(os.path.join(ldap, "heron.ldif")) as f:
        shipped = unfold(f.read())
    assert shipped == converted, (shipped, converted)
    r = run(["/usr/sbin/slapadd", "-n0", "-F", os.path.join(d, "cfg"), "-l",
             os.path.join(ldap, "heron.ldif")])
    assert r.returncode == 0, r.stderr
    r = run(["/usr/sbin/slapcat", "-n0", "-F", os.path.join(d, "cfg")])
    assert "NAME 'heronMailUser'" in r.stdout.replace("\n ", ""), r.stdout[-2000:]


def test_units():
    for name, prog in (("heron-mtad", "mtad"), ("heron-imapd", "imapd"),
                       ("heron-managesieve", "managesieved")):
        with open(os.path.join(LIB, "systemd", "system", name + ".service")) as f:
            unit = f.read()
        assert "\nType=notify\n" in unit
        assert f"\nExecStart={PREFIX}/sbin/{prog} -F -c {SYSCONFDIR}/heron/heron.conf\n" in unit
        assert "\nExecReload=/bin/kill -HUP $MAINPID\n" in unit
        assert "\nUser=heron\n" in unit and "\nNoNewPrivileges=yes\n" in unit
        assert "\nCapabilityBoundingSet=CAP_NET_BIND_SERVICE\n" in unit
        assert not re.search(r"@[a-z]+@", unit), "an unexpanded @VAR@"


def test_conf_kept():
    with open(CONF, "a") as f:
        f.write("# edited by the admin\n")
    install()
    with open(CONF) as f:
        assert f.read().endswith("# edited by the admin\n"), "heron.conf was replaced"


def test_programs_check_the_installed_conf():
    for prog in ("mtad", "imapd", "managesieved", "sink", "mailctl"):
        r = run([os.path.join(SBIN, prog), "-c", CONF, "-t"])
        assert r.returncode == 0, (prog, r.stderr)
        assert "[store]" in r.stdout and "path = /var/lib/heron/store" in r.stdout, prog


def test_missing_conf_is_named():
    default = os.path.join(SYSCONFDIR, "heron", "heron.conf")
    for prog in ("mtad", "imapd", "managesieved"):
        r = run([os.path.join(SBIN, prog), "-t", "-c", os.path.join(TMP, "none.conf")])
        assert r.returncode == 1, (prog, r.returncode)
        assert f"{TMP}/none.conf" in r.stderr and "-c" in r.stderr, r.stderr
        if not os.path.exists(default):  # the compiled-in default, named when it is absent
            r = run([os.path.join(SBIN, prog), "-t"])
            assert r.returncode == 1 and default in r.stderr and "-c PATH" in r.stderr, \
                r.stderr
    r = run([os.path.join(SBIN, "mailctl"), "-c", os.path.join(TMP, "none.conf"), "user",
             "list"])
    assert r.returncode != 0 and "none.conf" in r.stderr and "-c" in r.stderr, r.stderr


def test_sink_without_conf():
    default = os.path.join(SYSCONFDIR, "heron", "heron.conf")
    if os.path.exists(default):
        print(f"skip sink without a config: {default} exists on this machine")
        return
    port, control = free_port(), free_port()
    log = os.path.join(TMP, "sink.log")
    with open(log, "wb") as logf:
        p = subprocess.Popen([os.path.join(SBIN, "sink"), "-f", "--listen", f"{HOST}:{port}",
                              "--control", f"{HOST}:{control}", "--workers", "1"],
                             stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
    try:
        wait_port(port, 20, p, "sink")
        with smtplib.SMTP(HOST, port, timeout=10) as c:
            c.sendmail("a@ext.test", ["b@ext.test"], b"Subject: x\r\n\r\nbody\r\n")
    finally:
        p.terminate()
        p.wait(timeout=20)
    assert p.returncode == 0, open(log).read()[-2000:]


def test_mailload_without_conf():
    r = run([os.path.join(BIN, "mailload"), "ldif", "--users", "2"], cwd=TMP)
    assert r.returncode == 0, r.stderr
    assert "uid: user2" in r.stdout, r.stdout[:500]


def test_mailctl_as_store_owner():
    if os.geteuid() != 0:
        print("skip mailctl as root: not root")
        return
    owner = pwd.getpwnam("nobody")
    lib = os.path.join(TMP, "varlib")
    os.mkdir(lib)
    os.chown(lib, owner.pw_uid, owner.pw_gid)
    os.chmod(TMP, 0o755)
    conf = os.path.join(TMP, "owner.conf")
    with open(conf, "w") as f:
        f.write(f"[store]\npath = {lib}/store\npartitions = 2\nmap_size = 4M\n"
                "[directory]\nbackend = file\nusers_file = /dev/null\n")
    r = run([os.path.join(SBIN, "mailctl"), "-c", conf, "user", "add", "bob"])
    assert r.returncode == 0, r.stderr
    for dirpath, dirs, files in os.walk(lib):
        for n in dirs + files:
            st = os.lstat(os.path.join(dirpath, n))
            assert st.st_uid == owner.pw_uid, (os.path.join(dirpath, n), st.st_uid)


def test_daemons_from_the_install():
    """The installed mtad and imapd, on the installed heron.conf with loopback ports and a
    users file included: a message sent over SMTP is read over IMAP."""
    smtp, imap = free_port(), free_port()
    users = os.path.join(TMP, "users")
    write_users(users, ["alice"])
    local = os.path.join(TMP, "local.conf")
    with open(local, "w") as f:
        f.write(f"[store]\npath = {TMP}/store\npartitions = 2\nmap_size = 8M\n"
                f"[directory]\nbackend = file\nusers_file = {users}\n"
                f"[mtad]\nlisten = {HOST}:{smtp}\nsubmission =\nworkers = 1\n"
                f"local_domains = {DOMAIN}\nuser =\nallow_root = yes\n"
                f"local_submission = {TMP}/submit.sock\n"
                f"[imapd]\nlisten = {HOST}:{imap}\nlisten_tls =\nworkers = 1\n"
                "allow_plaintext_auth = yes\nuser =\nallow_root = yes\n"
                f"[log]\ntarget = file\nfile = {TMP}/heron.log\n")
    shutil.copy(CONF, os.path.join(TMP, "installed.conf"))
    with open(CONF, "a") as f:
        f.write(f"include {local}\n")
    mtad = Daemon(os.path.join(SBIN, "mtad"), CONF, os.path.join(TMP, "mtad.err"), smtp)
    imapd = Daemon(os.path.join(SBIN, "imapd"), CONF, os.path.join(TMP, "imapd.err"), imap)
    mtad.fg = imapd.fg = "-F"
    try:
        mtad.start()
        imapd.start()
        with smtplib.SMTP(HOST, smtp, timeout=20) as c:
            c.sendmail("x@example.org", [f"alice@{DOMAIN}"],
                       b"Subject: installed\r\n\r\nfrom the installed mtad\r\n")
        c = imaplib.IMAP4(HOST, imap, timeout=20)
        c.login("alice", "alice")
        c.select("INBOX")
        typ, data = wait_for(lambda: (lambda r: r if r[1][0] else None)(c.search(None, "ALL")),
                             20, "the message in INBOX")
        typ, msg = c.fetch(data[0].split()[0], "(BODY[])")
        assert b"from the installed mtad" in msg[0][1]
        # the installed heron-sendmail over the installed config's local socket
        r = subprocess.run([os.path.join(SBIN, "heron-sendmail"), "-C", CONF, "-t"],
                           input=f"To: alice@{DOMAIN}\nSubject: cron\n\nfrom cron\n".encode(),
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r.stderr
        wait_for(lambda: len(c.search(None, "ALL")[1][0].split()) == 2 or c.noop() and None,
                 20, "the sendmail message in INBOX")
        c.logout()
    finally:
        mtad.stop()
        imapd.stop()
        shutil.copy(os.path.join(TMP, "installed.conf"), CONF)
    with open(os.path.join(TMP, "heron.log")) as f:
        text = f.read()
    assert " mtad[" in text and " imapd[" in text, text[-2000:]


def main():
    return run_main(lambda: run_tests([
        test_tree, test_ldap_schema, test_units, test_conf_kept,
        test_programs_check_the_installed_conf, test_missing_conf_is_named,
        test_sink_without_conf, test_mailload_without_conf, test_mailctl_as_store_owner,
        test_daemons_from_the_install]), TMP, [])


if __name__ == "__main__":
    sys.exit(main())
