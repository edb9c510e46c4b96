"""imapd end to end with real clients from Debian: mutt's threaded index under tmux (what a
person sees: the thread tree arrows, the subjects, the count), and offlineimap syncing two
folders to a Maildir. (mbsync with COMPRESS is in test_imapd_compress.py.)

Usage: test_imapd_clients.py IMAPD_BINARY DELIVER_BINARY"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import IMAP_PASSWORD as PASSWORD, Imapd, after_test, run_suite  # noqa: E402
from heronlib import assert_eq, assert_in, assert_not_in  # noqa: E402

D = None  # the imapd the running tests talk to
TMP = None  # the client's home directory

THREAD = [
    "Subject: Hello\r\nDate: Mon, 1 Jan 2001 10:00:00 +0000\r\nFrom: Zed <zed@b.example>\r\n"
    "Message-ID: <1@x>\r\n",
    "Subject: Re: hello\r\nDate: Mon, 1 Jan 2001 11:00:00 +0000\r\nFrom: amy@a.example\r\n"
    "Message-ID: <2@x>\r\nReferences: <1@x>\r\n",
    "Subject: other\r\nDate: Tue, 2 Jan 2001 10:00:00 +0000\r\nFrom: bob@b.example\r\n"
    "Message-ID: <4@x>\r\n",
]


def make_user():
    D.raw()  # the first login makes the user


def test_mutt_thread_view():
    for h in THREAD:
        D.deliver("alice", (h + "\r\nbody\r\n").encode())
    rc = os.path.join(TMP, "muttrc")
    with open(rc, "w") as f:
        f.write(f'''set folder="imap://alice@127.0.0.1:{D.port}/"
set spoolfile="+INBOX"
set imap_pass="{PASSWORD}"
set ssl_starttls=no
set ssl_force_tls=no
set sort=threads
set sort_aux=date
set header_cache=""
set imap_idle=no
set index_format="%4C %s"
''')
    sess = "heron-mutt-%d" % os.getpid()
    env = dict(os.environ, TERM="xterm", HOME=TMP)
    subprocess.run(["tmux", "new-session", "-d", "-s", sess, "-x", "100", "-y", "20",
                    "mutt -n -F " + rc], check=True, env=env)
    after_test(subprocess.run, ["tmux", "kill-session", "-t", sess])
    want = ["   1 Hello", "   2 └─>Re: hello", "   3 other"]
    screen = ""
    for _ in range(100):  # up to 30 s for mutt to log in and draw
        time.sleep(0.3)
        screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", sess],
                                capture_output=True, text=True).stdout
        if all(w in screen.splitlines() for w in want):
            break
    lines = screen.splitlines()
    assert_eq([ln for ln in lines if ln[:4].strip().isdigit()], want, screen)
    assert_in("[Msgs:3 New:3", screen)


def test_offlineimap():
    r = D.raw()
    r.cmd("c", "CREATE Work")
    for i in range(4):
        D.deliver("alice", b"From: a@b\r\nSubject: o%d\r\n\r\nbody %d\r\n" % (i, i))
    D.deliver("alice", b"From: a@b\r\nSubject: w\r\n\r\nwork\r\n", "Work")
    rc = os.path.join(TMP, "rc")
    with open(rc, "w") as f:
        f.write(f"""[general]
accounts = h
metadata = {TMP}/meta
[Account h]
localrepository = L
remoterepository = R
[Repository L]
type = Maildir
localfolders = {TMP}/mail
[Repository R]
type = IMAP
remotehost = 127.0.0.1
remoteport = {D.port}
remoteuser = alice
remotepass = {PASSWORD}
ssl = no
starttls = no
""")
    p = subprocess.run(["offlineimap", "-c", rc, "-o", "-u", "basic"], capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, HOME=TMP))
    out = p.stdout + p.stderr
    assert_eq(p.returncode, 0, out[-3000:])
    assert_not_in("ERROR", out)

    def count(folder):
        base = os.path.join(TMP, "mail", folder)
        return sum(len(os.listdir(os.path.join(base, s))) for s in ("cur", "new"))
    assert_eq((count("INBOX"), count("Work")), (4, 1))


def main():
    global D, TMP
    imapd, deliver = sys.argv[1], sys.argv[2]
    rc = 0
    for test in [test_mutt_thread_view, test_offlineimap]:
        D = Imapd(imapd, deliver=deliver)  # a fresh imapd and store for each client
        TMP = os.path.join(D.dir, "client")  # the client's home, removed with D's directory
        os.mkdir(TMP)
        rc |= run_suite(D, [make_user, test], D.dir)
    return rc


if __name__ == "__main__":
    sys.exit(main())
