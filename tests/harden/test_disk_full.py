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
from heronlib import (DOMAIN, Imapd, Mtad, Store, after_test, mailctl_verify,  # noqa: E402
                      run_main, run_tests, skip, write_users)

ROOT, MTAD, PEEK, IMAPD, MAILCTL = sys.argv[1:6]


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


def remove(path):
    if os.path.exists(path):
        os.unlink(path)


def full_store(store_dir):
    """A small tmpfs mounted on store_dir, unmounted when the running test ends."""
    assert mount_tmpfs(store_dir, "8m"), f"cannot mount a tmpfs on {store_dir}"
    after_test(umount, store_dir)


def test_mtad_4xx_while_full():
    full_store(os.path.join(TMP, "store"))
    MTAD_D.start()
    for i in range(3):
        code, text = smtp_send(MTAD_D.port, f"before{i}")
        assert code == 250, (code, text)
    filler = fill(os.path.join(TMP, "store"))
    for i in range(3):
        code, text = smtp_send(MTAD_D.port, f"full{i}")
        assert 400 <= code < 500, (code, text)  # try again later, never 250 or 5xx
    os.unlink(filler)
    code, text = smtp_send(MTAD_D.port, "after")
    assert code == 250, (code, text)
    MTAD_D.stop()
    got = subjects(Store(PEEK, MTAD_D.conf), "user1")
    assert sorted(got) == ["after", "before0", "before1", "before2"], got
    mailctl_verify(MAILCTL, MTAD_D.conf)


def test_imapd_no_while_full():
    full_store(IMAPD_D.store)
    IMAPD_D.start(timeout=15)
    c = IMAPD_D.login("alice")
    for i in range(3):
        typ, data = c.append("INBOX", None, None, message(f"before{i}").encode())
        assert typ == "OK", (typ, data)
    filler = fill(IMAPD_D.store)
    after_test(remove, filler)  # space back whatever happens (before the unmount)
    for i in range(3):
        try:
            typ, data = c.append("INBOX", None, None, message(f"full{i}").encode())
        except imaplib.IMAP4.error as e:
            typ, data = "NO", [str(e).encode()]
        assert typ == "NO", (typ, data)
    assert c.noop()[0] == "OK"
    os.unlink(filler)
    typ, data = c.append("INBOX", None, None, message("after").encode())
    assert typ == "OK", (typ, data)
    c.select("INBOX")
    typ, data = c.fetch("1:*", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
    got = sorted(p[1].decode().split(":", 1)[1].strip() for p in data
                 if isinstance(p, tuple))
    assert got == ["after", "before0", "before1", "before2"], got
    c.logout()
    IMAPD_D.stop()
    mailctl_verify(MAILCTL, IMAPD_D.conf)


if os.geteuid() != 0:
    skip("needs root to mount a tmpfs")
TMP = tempfile.mkdtemp(prefix="heron-diskfull-")
if not mount_tmpfs(os.path.join(TMP, "probe"), "1m"):
    os.rmdir(os.path.join(TMP, "probe"))
    os.rmdir(TMP)
    skip("cannot mount a tmpfs here")
umount(os.path.join(TMP, "probe"))
write_users(os.path.join(TMP, "users"), ["user1"])
MTAD_D = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
              {"workers": "1"}, tls=False)
IMAPD_D = Imapd(IMAPD, workers=1)


def main():
    rc = run_main(lambda: run_tests([test_mtad_4xx_while_full, test_imapd_no_while_full]),
                  TMP, [MTAD_D, IMAPD_D], note=f" and {IMAPD_D.dir}")
    if rc == 0:  # the imapd's own directory, once its log was checked
        shutil.rmtree(IMAPD_D.dir, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
