#!/usr/bin/env python3
"""The store's disk fills up under mtad and imapd (a failing dependency): the store
lives on a small tmpfs that a filler file then fills. While it is full, SMTP clients get a 4xx
at the end of DATA and IMAP APPEND gets NO, sessions go on, and nothing of the refused messages
is stored; once space is back both accept mail again, every message acknowledged before is
there, and `mailctl verify` finds the store clean. Needs root (mount); skipped (77) otherwise.

  test_disk_full.py SOURCE_ROOT MTAD STORE_PEEK IMAPD MAILCTL"""
import errno
import imaplib
import os
import shutil
import smtplib
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import (DOMAIN, Imapd, Mtad, Store, check_sanitizers,  # noqa: E402
                      mailctl_verify, write_users)

ROOT, MTAD, PEEK, IMAPD, MAILCTL = sys.argv[1:6]
SKIP = 77


def mount_tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
                       capture_output=True)
    return r.returncode == 0


def umount(path):
    subprocess.run(["umount", "-l", path], capture_output=True)


def fill(path):
    """Writes a filler file until the filesystem is full; returns its name."""
    name = os.path.join(path, "filler")
    chunk = b"\0" * 65536
    with open(name, "wb") as f:
        try:
            while True:
                f.write(chunk)
                f.flush()
        except OSError as e:
            assert e.errno in (errno.ENOSPC, errno.EDQUOT), e
    # smaller writes too, so not even a page is left
    with open(name, "ab", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError:
            pass
    return name


def message(subject, size=20000):
    line = "z" * 78 + "\r\n"
    return (f"From: <sender@example.org>\r\nTo: <user1@{DOMAIN}>\r\nSubject: {subject}\r\n"
            f"Message-ID: <{subject}@test>\r\n\r\n" + line * (size // len(line)))


def subjects(store, user):
    out = []
    for uid, _blob, _size in store.inbox(user):
        body = store.body(user, uid)
        for ln in body.split(b"\r\n"):
            if ln.startswith(b"Subject: "):
                out.append(ln[9:].decode())
                break
    return out


def smtp_send(port, subject):
    c = smtplib.SMTP("127.0.0.1", port, timeout=30)
    try:
        c.ehlo("disk.test")
        assert c.mail("sender@example.org")[0] == 250
        assert c.rcpt(f"user1@{DOMAIN}")[0] == 250
        code, text = c.data(message(subject))
        assert c.noop()[0] == 250  # the session goes on either way
        return code, text
    finally:
        c.close()


def test_mtad(tmp):
    write_users(os.path.join(tmp, "users"), ["user1"])
    mtad = Mtad(MTAD, tmp, {"backend": "file", "users_file": os.path.join(tmp, "users")},
                {"workers": "1"}, tls=False)
    store_dir = os.path.join(tmp, "store")
    if not mount_tmpfs(store_dir, "8m"):
        return SKIP
    filler = None
    try:
        mtad.start()
        for i in range(3):
            code, text = smtp_send(mtad.port, f"before{i}")
            assert code == 250, (code, text)
        filler = fill(store_dir)
        for i in range(3):
            code, text = smtp_send(mtad.port, f"full{i}")
            assert 400 <= code < 500, (code, text)  # try again later, never 250 or 5xx
        os.unlink(filler)
        filler = None
        code, text = smtp_send(mtad.port, "after")
        assert code == 250, (code, text)
        mtad.stop()
        got = subjects(Store(PEEK, mtad.conf), "user1")
        assert sorted(got) == ["after", "before0", "before1", "before2"], got
        mailctl_verify(MAILCTL, mtad.conf)
        print("ok   mtad: 4xx while full, nothing stored of it, clean after", flush=True)
        return check_sanitizers(mtad)
    except Exception:
        print(mtad.logtext()[-3000:])
        raise
    finally:
        mtad.stop()
        umount(store_dir)


def test_imapd():
    d = Imapd(IMAPD, workers=1)
    store_dir = d.store
    if not mount_tmpfs(store_dir, "8m"):
        return SKIP
    d.__enter__()
    filler = None
    try:
        c = d.login("alice")
        for i in range(3):
            typ, data = c.append("INBOX", None, None, message(f"before{i}").encode())
            assert typ == "OK", (typ, data)
        filler = fill(store_dir)
        for i in range(3):
            try:
                typ, data = c.append("INBOX", None, None, message(f"full{i}").encode())
            except imaplib.IMAP4.error as e:
                typ, data = "NO", [str(e).encode()]
            assert typ == "NO", (typ, data)
        assert c.noop()[0] == "OK"
        os.unlink(filler)
        filler = None
        typ, data = c.append("INBOX", None, None, message("after").encode())
        assert typ == "OK", (typ, data)
        c.select("INBOX")
        typ, data = c.fetch("1:*", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
        got = sorted(p[1].decode().split(":", 1)[1].strip() for p in data
                     if isinstance(p, tuple))
        assert got == ["after", "before0", "before1", "before2"], got
        c.logout()
        d.stop()
        mailctl_verify(MAILCTL, d.conf)
        print("ok   imapd: NO while full, nothing stored of it, clean after", flush=True)
        return 0
    finally:
        if filler is not None and os.path.exists(filler):
            os.unlink(filler)
        d.stop()
        umount(store_dir)
        d.__exit__(None, None, None)


def main():
    if os.geteuid() != 0:
        print("SKIP: needs root to mount a tmpfs")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="heron-diskfull-")
    try:
        rc = test_mtad(tmp)
        if rc == SKIP:
            print("SKIP: cannot mount a tmpfs here")
            return SKIP
        return rc | test_imapd()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
