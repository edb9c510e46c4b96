#!/usr/bin/env python3
"""`mailload init --maildir ROOT`: Maildir with the Maildir++ folders and size and nothing of one
server's own (bench/peers checks a real Dovecot with bench/peers/check_fill; CI has none).
Checked here on the files: every folder a directory with cur/new/tmp (and `maildirfolder`
outside INBOX), courierimapsubscribed naming existing folders (INBOX, INBOX.A.B), message file
names `<unique>,S=<size>` in new/ (unseen) or with `:2,S` in cur/ (\\Seen), no other server's
files (no dovecot-*, no subscriptions), LF line ends, the file time on the fixed init day; the same tree again for the same seed, another for another seed; a rerun
skips the users in place and completes one left half-built.

  test_init_maildir.py MAILLOAD
"""
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import run_tests  # noqa: E402

NAME = re.compile(r"^(\d+)\.M\d+P\d+F\d+\.mailload,S=(\d+)(:2,S)?$")
DAY0, DAY1 = 1735689600, 1735689600 + 86400 + 4096  # 2025-01-01 UTC (+ the seq spread)


def init(mailload, root, users, seed="1"):
    r = subprocess.run([mailload, "init", "--maildir", root, "--users", str(users),
                        "--profile", "tiny", "--seed", seed, "-q"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stderr


def tree(root):
    """relative path -> sha256 of the content ('' for directories)"""
    out = {}
    for d, dirs, files in os.walk(root):
        files = [n for n in files if n != ".mailload-fill"]  # the fill record: has a date
        for n in dirs:
            out[os.path.relpath(os.path.join(d, n), root)] = ""
        for n in files:
            with open(os.path.join(d, n), "rb") as f:
                out[os.path.relpath(os.path.join(d, n), root)] = \
                    hashlib.sha256(f.read()).hexdigest()
    return out


def check_user(home):
    md = os.path.join(home, "Maildir")
    with open(os.path.join(md, "courierimapsubscribed"), "rb") as f:
        subs = f.read().decode()
    assert all(s == "INBOX" or s.startswith("INBOX.") for s in subs.split("\n") if s), subs
    subscribed = [s[6:].replace(".", "/") if s != "INBOX" else s
                  for s in subs.split("\n") if s]
    assert not [n for n in os.listdir(md) if n.startswith("dovecot") or n == "subscriptions"]
    assert subscribed[:4] == ["INBOX", "Sent", "Drafts", "Trash"], subscribed
    folders = ["INBOX"] + [n[1:].replace(".", "/") for n in os.listdir(md)
                           if n.startswith(".") and os.path.isdir(os.path.join(md, n))]
    for s in subscribed:
        assert s in folders, (s, folders)
    msgs = seen = 0
    for f in folders:
        d = md if f == "INBOX" else os.path.join(md, "." + f.replace("/", "."))
        for sub in ("cur", "new", "tmp"):
            assert os.path.isdir(os.path.join(d, sub)), (d, sub)
        assert os.path.exists(os.path.join(d, "maildirfolder")) == (f != "INBOX"), d
        assert os.listdir(os.path.join(d, "tmp")) == []
        for sub in ("cur", "new"):
            for n in os.listdir(os.path.join(d, sub)):
                m = NAME.match(n)
                assert m, n
                assert (sub == "cur") == bool(m.group(3)), (sub, n)  # \Seen <-> cur/:2,S
                p = os.path.join(d, sub, n)
                with open(p, "rb") as fp:
                    body = fp.read()
                assert b"\r" not in body, p
                assert len(body) == int(m.group(2)), (p, len(body))
                assert body.count(b"Message-ID: <") == 1, p
                assert DAY0 <= int(os.stat(p).st_mtime) <= DAY1, p
                msgs += 1
                seen += sub == "cur"
        if f == "INBOX":  # delivered mail is unseen
            assert os.listdir(os.path.join(d, "cur")) == [], d
    assert os.stat(md).st_mode & 0o777 == 0o700
    return len(folders), msgs, seen


def main():
    mailload = sys.argv[1]
    top = tempfile.mkdtemp(prefix="heron-maildir-")
    a, b, c = (os.path.join(top, x) for x in ("a", "b", "c"))
    users = 12

    def test_layout():
        for d in (a, b, c):
            os.mkdir(d)
        out = init(mailload, a, users)
        assert "12 users (0 already complete)" in out, out
        assert sorted(os.listdir(a)) == sorted([f"user{u}" for u in range(1, users + 1)]
                                               + [".mailload-fill"])
        with open(os.path.join(a, ".mailload-fill")) as f:  # for mailload run --fill-record
            rec = f.read()
        assert rec.startswith("seed=1; profile=tiny; digest=") and "; users=12;" in rec, rec
        nf = nm = ns = 0
        for u in range(1, users + 1):
            f, m, s = check_user(os.path.join(a, f"user{u}"))
            nf, nm, ns = nf + f, nm + m, ns + s
        assert nm > users and 0 < ns < nm, (nm, ns)  # some folders hold \Seen mail
        print(f"{users} users, {nf} folders, {nm} messages ({ns} \\Seen): Maildir++ layout")

    def test_deterministic():
        init(mailload, b, users)
        assert tree(a) == tree(b), "the same seed gives the same Maildirs"
        init(mailload, c, users, seed="2")
        assert tree(a) != tree(c), "another seed gives other Maildirs"

    def test_resume():
        # user3 half-built (interrupted before its rename), the others in place
        before = tree(a)
        os.rename(os.path.join(a, "user3"), os.path.join(a, ".user3.tmp"))
        shutil.rmtree(os.path.join(a, ".user3.tmp", "Maildir", "cur"))
        out = init(mailload, a, users)
        assert "12 users (11 already complete)" in out, out
        assert tree(a) == before, "a rerun completes the interrupted user"

    try:
        return run_tests([test_layout, test_deterministic, test_resume])
    finally:
        shutil.rmtree(top)


if __name__ == "__main__":
    sys.exit(main())
