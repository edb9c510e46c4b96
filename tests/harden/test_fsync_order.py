#!/usr/bin/env python3
"""Durable before acknowledged, seen from the kernel (issue 11): mtad and imapd run under
strace; for one SMTP message and one IMAP APPEND and STORE, the message file's fsync, the
index's fdatasync and then its commit (LMDB's meta page, written through a descriptor opened
O_DSYNC) complete after the data arrived and before the 250 / OK is written to the socket. Skipped (77) without strace or when ptrace is not allowed.

  test_fsync_order.py SOURCE_ROOT MTAD IMAPD"""
import imaplib
import os
import re
import shutil
import signal
import smtplib
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import DOMAIN, children, shared_conf, wait_port  # noqa: E402

ROOT, MTAD, IMAPD = sys.argv[1:4]
SKIP = 77
CALLS = ("fsync,fdatasync,write,writev,pwrite64,pwritev,sendmsg,sendto,read,recvfrom,recvmsg,"
         "readv,openat")
# strace -f -y -s 200: "[pid N] " prefix (or not), then the call
LINE = re.compile(r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(?P<call>\w+)\((?P<args>.*)$")


def traced(exe, conf, trace):
    return subprocess.Popen(["strace", "-f", "-y", "-s", "200", "-o", trace, "-e",
                             f"trace={CALLS}", exe, "-c", conf, "-f"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)


def stop(proc):
    """SIGTERM to the daemon's master (strace's child), then wait for strace."""
    for k in children(proc.pid):
        os.kill(k, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def resumed_calls(trace):
    """Like events() but resumed lines carry their call name from the '<... x resumed>'."""
    out = []
    with open(trace, errors="replace") as f:
        for ln in f:
            ln = ln.strip()
            rm = re.search(r"<\.\.\. (\w+) resumed>(.*)$", ln)
            if rm is not None:
                out.append((rm.group(1), rm.group(2), True))
                continue
            m = LINE.match(ln)
            if m is None:
                continue
            if m.group("args").endswith("<unfinished ...>"):
                out.append((m.group("call"), m.group("args"), False))
                continue
            out.append((m.group("call"), m.group("args"), True))
    return out


def dsync_fds(ev):
    """Descriptors of index files opened O_DSYNC (LMDB writes its meta page through one)."""
    fds = set()
    for c, a, done in ev:
        if c == "openat" and done and "index.mdb" in a and "O_DSYNC" in a:
            m = re.search(r"= (\d+)<", a)
            if m:
                fds.add(m.group(1))
    return fds


def check_order(trace, start_pat, ack_pat, what, need_blob=True):
    """Between the first read or write matching start_pat and the next socket write matching
    ack_pat: a completed fsync of the message file (when need_blob), then a completed
    fdatasync/fsync of the index's data pages, then the meta page (the commit) written through
    the index's O_DSYNC descriptor. Returns a list of problems."""
    ev = resumed_calls(trace)
    io = ("write", "writev", "sendmsg", "sendto", "read", "readv", "recvfrom", "recvmsg")
    writes = ("write", "writev", "sendmsg", "sendto")
    dsync = dsync_fds(ev)
    start = next((i for i, (c, a, d) in enumerate(ev)
                  if c in io and re.search(start_pat, a)), None)
    if start is None:
        return [f"{what}: nothing matching {start_pat!r} in the trace"]
    ack = next((i for i, (c, a, d) in enumerate(ev)
                if i > start and c in writes and "socket:" in a and re.search(ack_pat, a)),
               None)
    if ack is None:
        return [f"{what}: no reply matching {ack_pat!r} after the start"]
    blob = data = meta = None
    for i in range(start, ack):
        c, a, done = ev[i]
        if not done:
            continue
        if c in ("fsync", "fdatasync") and "/blobs/" in a and blob is None:
            blob = i
        elif c in ("fsync", "fdatasync") and "index.mdb" in a and \
                (blob is not None or not need_blob):
            data = i
        elif c in ("pwrite64", "pwritev") and "index.mdb" in a and data is not None and \
                re.match(r"(\d+)<", a) and re.match(r"(\d+)<", a).group(1) in dsync:
            meta = i
    problems = []
    if need_blob and blob is None:
        problems.append(f"{what}: no completed fsync of the message file before the reply")
    if data is None:
        problems.append(f"{what}: no completed fdatasync of the index "
                        f"{'after the message file ' if need_blob else ''}before the reply")
    elif meta is None:
        problems.append(f"{what}: the index commit (meta page through O_DSYNC) is not "
                        f"written before the reply")
    return problems


def main():
    if shutil.which("strace") is None:
        print("SKIP: no strace")
        return SKIP
    probe = subprocess.run(["strace", "-o", "/dev/null", "true"], capture_output=True)
    if probe.returncode != 0:
        print("SKIP: ptrace not allowed here")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="heron-fsync-")
    conf, smtp_port, imap_port = shared_conf(tmp, ["user1"])
    mtrace, itrace = os.path.join(tmp, "mtad.trace"), os.path.join(tmp, "imapd.trace")
    mtad = traced(MTAD, conf, mtrace)
    imapd = traced(IMAPD, conf, itrace)
    problems = []
    try:
        wait_port(smtp_port, 60)
        wait_port(imap_port, 60)
        c = imaplib.IMAP4("127.0.0.1", imap_port, timeout=60)
        c.login("user1", "user1")  # creates the account
        with smtplib.SMTP("127.0.0.1", smtp_port, timeout=60) as s:
            s.sendmail(f"a@{DOMAIN}", [f"user1@{DOMAIN}"],
                       "Subject: traced-smtp\r\n\r\nkernel witness\r\n")
        typ, data = c.append("INBOX", None, None,
                             b"Subject: traced-imap\r\n\r\nkernel witness\r\n")
        assert typ == "OK", data
        c.select("INBOX")
        typ, data = c.store("1", "+FLAGS", "(\\Flagged)")
        assert typ == "OK", data
        c.logout()
    finally:
        stop(mtad)
        stop(imapd)
    problems += check_order(mtrace, r'"354 ', r'"250 2\.0\.0 Ok: queued', "SMTP DATA")
    problems += check_order(itrace, r'"\+ ', r'OK \[APPENDUID', "IMAP APPEND")
    problems += check_order(itrace, r"STORE 1 \+FLAGS", r"OK STORE", "IMAP STORE",
                            need_blob=False)
    if problems:
        print("\n".join(problems))
        print(f"traces kept in {tmp}")
        return 1
    print("ok   fsync of message file and index precede 250 / OK on the wire")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
