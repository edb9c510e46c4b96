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
import shutil
import signal
import smtplib
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import DOMAIN, children, shared_conf, wait_port  # noqa: E402

ROOT, MTAD, IMAPD = sys.argv[1:4]
SKIP = 77
SYNCS = ("fsync", "fdatasync", "syncfs", "msync", "sync_file_range")
CALLS = ",".join(SYNCS + ("accept", "accept4"))
LINE = re.compile(r"^(?:\[pid\s+(?P<tid>\d+)\]\s+|(?P<tid2>\d+)\s+)?(?P<call>\w+)\(")


def traced(exe, conf, trace):
    return subprocess.Popen(["strace", "-f", "-y", "-o", trace, "-e", f"trace={CALLS}", exe,
                             "-c", conf, "-f"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)


def workers(proc):
    """The worker pids of a daemon run under strace (strace -> master -> workers)."""
    out = []
    for master in children(proc.pid):
        out += children(master)
    return out


def stop(proc):
    for k in children(proc.pid):
        os.kill(k, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


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


def main():
    if shutil.which("strace") is None:
        print("SKIP: no strace")
        return SKIP
    if subprocess.run(["strace", "-o", "/dev/null", "true"], capture_output=True).returncode:
        print("SKIP: ptrace not allowed here")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="heron-loopsync-")
    conf, smtp_port, imap_port = shared_conf(tmp, ["user1", "user2"])
    mtrace, itrace = os.path.join(tmp, "mtad.trace"), os.path.join(tmp, "imapd.trace")
    mtad = traced(MTAD, conf, mtrace)
    imapd = traced(IMAPD, conf, itrace)
    problems = []
    try:
        wait_port(smtp_port, 60)
        wait_port(imap_port, 60)
        with smtplib.SMTP("127.0.0.1", smtp_port, timeout=60) as s:
            # user2 is in the directory, not yet in the store: made at RCPT
            s.sendmail("a@example.org", [f"user2@{DOMAIN}"], "Subject: first\r\n\r\nfirst\r\n")
            s.sendmail("a@example.org", [f"user2@{DOMAIN}", f"user1@{DOMAIN}"],
                       "Subject: second\r\n\r\nsecond\r\n")
        imap_session(imap_port, smtp_port)
        mains = {str(p) for p in workers(mtad) + workers(imapd)}
        assert mains, "no worker processes found"
    finally:
        stop(mtad)
        stop(imapd)
    durable = 0
    for trace, what in ((mtrace, "mtad"), (itrace, "imapd")):
        p, n = check(trace, mains, what)
        problems += p
        durable += n
        print(f"{what}: {n} sync calls on other threads")
    if durable == 0:
        problems.append("no sync call at all: the trace saw nothing")
    if problems:
        print("\n".join(problems[:40]))
        print(f"traces kept in {tmp}")
        return 1
    print("ok   no fsync on an event loop's thread")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
