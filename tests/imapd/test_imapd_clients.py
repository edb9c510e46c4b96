"""imapd end to end with real clients from Debian: mutt's threaded index under tmux (what a
person sees: the thread tree arrows, the subjects, the count), and offlineimap syncing two
folders to a Maildir. (mbsync with COMPRESS is in test_imapd_compress.py.)

Usage: test_imapd_clients.py IMAPD_BINARY DELIVER_BINARY"""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_imapd_protocol as proto  # noqa: E402

THREAD = [
    "Subject: Hello\r\nDate: Mon, 1 Jan 2001 10:00:00 +0000\r\nFrom: Zed <zed@b.example>\r\n"
    "Message-ID: <1@x>\r\n",
    "Subject: Re: hello\r\nDate: Mon, 1 Jan 2001 11:00:00 +0000\r\nFrom: amy@a.example\r\n"
    "Message-ID: <2@x>\r\nReferences: <1@x>\r\n",
    "Subject: other\r\nDate: Tue, 2 Jan 2001 10:00:00 +0000\r\nFrom: bob@b.example\r\n"
    "Message-ID: <4@x>\r\n",
]


class Clients(proto.Base):
    def setUp(self):
        self.d = proto.Imapd(proto.IMAPD, deliver=proto.DELIVER)
        self.d.__enter__()
        self.addCleanup(self.d.__exit__, None, None, None)
        self.raw()  # the first login makes the user
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, True)

    @classmethod
    def setUpClass(cls):
        pass

    def test_mutt_thread_view(self):
        for h in THREAD:
            self.d.deliver("alice", (h + "\r\nbody\r\n").encode())
        rc = os.path.join(self.tmp, "muttrc")
        with open(rc, "w") as f:
            f.write(f'''set folder="imap://alice@127.0.0.1:{self.d.port}/"
set spoolfile="+INBOX"
set imap_pass="{proto.PASSWORD}"
set ssl_starttls=no
set ssl_force_tls=no
set sort=threads
set sort_aux=date
set header_cache=""
set imap_idle=no
set index_format="%4C %s"
''')
        sess = "heron-mutt-%d" % os.getpid()
        env = dict(os.environ, TERM="xterm", HOME=self.tmp)
        subprocess.run(["tmux", "new-session", "-d", "-s", sess, "-x", "100", "-y", "20",
                        "mutt -n -F " + rc], check=True, env=env)
        self.addCleanup(subprocess.run, ["tmux", "kill-session", "-t", sess])
        want = ["   1 Hello", "   2 └─>Re: hello", "   3 other"]
        screen = ""
        for _ in range(100):  # up to 30 s for mutt to log in and draw
            time.sleep(0.3)
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", sess],
                                    capture_output=True, text=True).stdout
            if all(w in screen.splitlines() for w in want):
                break
        lines = screen.splitlines()
        self.assertEqual([ln for ln in lines if ln[:4].strip().isdigit()], want, screen)
        self.assertIn("[Msgs:3 New:3", screen)

    def test_offlineimap(self):
        r = self.raw()
        r.cmd("c", "CREATE Work")
        for i in range(4):
            self.d.deliver("alice", b"From: a@b\r\nSubject: o%d\r\n\r\nbody %d\r\n" % (i, i))
        self.d.deliver("alice", b"From: a@b\r\nSubject: w\r\n\r\nwork\r\n", "Work")
        rc = os.path.join(self.tmp, "rc")
        with open(rc, "w") as f:
            f.write(f"""[general]
accounts = h
metadata = {self.tmp}/meta
[Account h]
localrepository = L
remoterepository = R
[Repository L]
type = Maildir
localfolders = {self.tmp}/mail
[Repository R]
type = IMAP
remotehost = 127.0.0.1
remoteport = {self.d.port}
remoteuser = alice
remotepass = {proto.PASSWORD}
ssl = no
starttls = no
""")
        p = subprocess.run(["offlineimap", "-c", rc, "-o", "-u", "basic"], capture_output=True,
                           text=True, timeout=120, env=dict(os.environ, HOME=self.tmp))
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, out[-3000:])
        self.assertNotIn("ERROR", out)

        def count(folder):
            base = os.path.join(self.tmp, "mail", folder)
            return sum(len(os.listdir(os.path.join(base, s))) for s in ("cur", "new"))
        self.assertEqual((count("INBOX"), count("Work")), (4, 1))


def main():
    proto.IMAPD, proto.DELIVER = sys.argv[1], sys.argv[2]
    unittest.main(argv=[sys.argv[0], "-v"])


if __name__ == "__main__":
    main()
