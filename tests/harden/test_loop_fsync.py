#!/usr/bin/env python3
"""No fsync on an event loop's thread, seen from the kernel: mtad and imapd run under
strace -f; every write path of a session is exercised (SMTP to a user the store does not
know yet and to one it does, an IMAP LOGIN that creates the account, CREATE, SUBSCRIBE,
RENAME, DELETE, APPEND, SELECT claiming \\Recent, new mail while selected (the claim of a
running session), FETCH BODY[] setting \\Seen, STORE, COPY, MOVE, EXPUNGE, CLOSE's expunge);
then no fsync, fdatasync, syncfs, msync or sync_file_range ran on a worker's main thread
(its event loop) once it served its first connection, while the group committer's threads
did make the writes durable. Skipped (77) without strace or when ptrace is not allowed.

  test_loop_fsync.py SOURCE_ROOT MTAD IMAPD"""
import imaplib
import os
import re
import smtplib
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import (DOMAIN, Traced, need_strace, run_main, run_tests,  # noqa: E402
                      shared_conf)

ROOT, MTAD, IMAPD = sys.argv[1:4]
SYNCS = ("fsync", "fdatasync", "syncfs", "msync", "sync_file_range")
CALLS = ",".join(SYNCS + ("accept", "accept4"))
LINE = re.compile(r"^(?:\[pid\s+(?P<tid>\d+)\]\s+|(?P<tid2>\d+)\s+)?(?P<call>\w+)\(")

need_strace()
TMP = tempfile.mkdtemp(prefix="heron-loopsync-")
CONF, SMTP_PORT, IMAP_PORT = shared_conf(TMP, ["user1", "user2"])
MTAD_D = Traced(MTAD, CONF, os.path.join(TMP, "mtad.log"), SMTP_PORT,
                os.path.join(TMP, "mtad.trace"), CALLS)
IMAPD_D = Traced(IMAPD, CONF, os.path.join(TMP, "imapd.log"), IMAP_PORT,
                 os.path.join(TMP, "imapd.trace"), CALLS)


def check(trace, mains, what):
    """(problems, syncs by other threads): sync calls of a main thread after its first
    accept are problems."""
    serving, problems, others = set(), [], 0
    with open(trace, errors="replace") as f:
        for ln in f:
            m = LINE.match(ln)
            if m is None:
                continue
            tid = m.group("tid") or m.group("tid2")
            call = m.group("call")
            if call in ("accept", "accept4") and tid in mains:
                serving.add(tid)
            elif call in SYNCS:
                if tid in mains and tid in serving:
                    problems.append(f"{what}: {call} on the loop thread {tid}: {ln.strip()}")
                elif tid not in mains:
                    others += 1
    if not serving:
        problems.append(f"{what}: no worker accepted a connection in the trace")
    return problems, others


def imap_session(port, smtp_port):
    c = imaplib.IMAP4("127.0.0.1", port, timeout=60)
    c.login("user1", "user1")  # the first login: the account is made
    for cmd in (("create", "Work"), ("subscribe", "Work"), ("create", "Tmp"),
                ("rename", "Tmp", "Old"), ("delete", "Old")):
        typ, data = getattr(c, cmd[0])(*cmd[1:])
        assert typ == "OK", (cmd, data)
    for i in range(3):
        typ, data = c.append("INBOX", None, None,
                             f"Subject: appended {i}\r\n\r\nbody {i}\r\n".encode())
        assert typ == "OK", data
    typ, data = c.select("INBOX")  # claims the appended messages' \Recent
    assert typ == "OK", data
    with smtplib.SMTP("127.0.0.1", smtp_port, timeout=60) as s:
        s.sendmail("a@example.org", [f"user1@{DOMAIN}"], "Subject: new while selected\r\n\r\nx\r\n")
    for _ in range(100):  # the session sees it (and claims its \Recent) at a NOOP
        typ, data = c.noop()
        if any(b"EXISTS" in d for d in data if d):
            break
        time.sleep(0.1)
    for cmd in (("fetch", "1", "(BODY[])"), ("store", "2", "+FLAGS", "(\\Flagged)"),
                ("copy", "1:2", "Work"), ("store", "3", "+FLAGS", "(\\Deleted)"),
                ("expunge",)):
        typ, data = getattr(c, cmd[0])(*cmd[1:])
        assert typ == "OK", (cmd, data)
    typ, data = c.uid("MOVE", "1", "Work")
    assert typ == "OK", data
    typ, data = c.select("Work")
    assert typ == "OK", data
    typ, data = c.store("1", "+FLAGS", "(\\Deleted)")
    assert typ == "OK", data
    typ, data = c.close()  # expunges \Deleted silently
    assert typ == "OK", data
    c.logout()


def test_no_sync_on_a_loop_thread():
    MTAD_D.start(timeout=60)
    IMAPD_D.start(timeout=60)
    with smtplib.SMTP("127.0.0.1", SMTP_PORT, timeout=60) as s:
        # user2 is in the directory, not yet in the store: made at RCPT
        s.sendmail("a@example.org", [f"user2@{DOMAIN}"], "Subject: first\r\n\r\nfirst\r\n")
        s.sendmail("a@example.org", [f"user2@{DOMAIN}", f"user1@{DOMAIN}"],
                   "Subject: second\r\n\r\nsecond\r\n")
    imap_session(IMAP_PORT, SMTP_PORT)
    mains = {str(p) for p in MTAD_D.worker_pids() + IMAPD_D.worker_pids()}
    assert mains, "no worker processes found"
    MTAD_D.stop()
    IMAPD_D.stop()
    problems, durable = [], 0
    for d, what in ((MTAD_D, "mtad"), (IMAPD_D, "imapd")):
        p, n = check(d.trace, mains, what)
        problems += p
        durable += n
        print(f"{what}: {n} sync calls on other threads")
    if durable == 0:
        problems.append("no sync call at all: the trace saw nothing")
    assert not problems, "\n".join(problems[:40])


def main():
    return run_main(lambda: run_tests([test_no_sync_on_a_loop_thread]), TMP, [MTAD_D, IMAPD_D],
                    note=" (the traces)")


if __name__ == "__main__":
    sys.exit(main())
