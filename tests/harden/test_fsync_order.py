#!/usr/bin/env python3
"""Durable before acknowledged, seen from the kernel: mtad and imapd run under
strace; for one SMTP message and one IMAP APPEND and STORE, the message file's fsync, the
index's fdatasync and then its commit (LMDB's meta page, synced: written through a descriptor
opened O_DSYNC, or by the group committer's own sync after it) complete after the data arrived
and before the 250 / OK is written to the socket (for the STORE: the commit, its sync may
follow: [store] fsync_flags = no).
Then mtad takes 12 messages at once (commits of several, their files fsynced by the commit),
with per-file syncs and with [store] group_commit_syncfs, and each 250 is followed back to
its own message file (the id in its Received header): the file renamed, its bytes synced
after its last write and its directory after the rename (fsyncs, or a syncfs after both),
then the index commit, all before that 250. These runs keep every body a file ([store]
inline_max = 0); a last run with bodies inline (the default) follows each 250 back to the end
of its own DATA on its connection: no message file written, and an index commit (fdatasync,
then the synced meta page) between that DATA and the 250. Skipped (77) without strace or when
ptrace is not allowed.

  test_fsync_order.py SOURCE_ROOT MTAD IMAPD"""
import imaplib
import os
import re
import smtplib
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import (DOMAIN, Traced, need_strace, run_main, run_tests,  # noqa: E402
                      shared_conf)

ROOT, MTAD, IMAPD = sys.argv[1:4]
CALLS = ("fsync,fdatasync,syncfs,write,writev,pwrite64,pwritev,sendmsg,sendto,read,recvfrom,"
         "recvmsg,readv,openat,rename,renameat,renameat2")
# strace -f -y -s 200: "[pid N] " prefix (or not), then the call
LINE = re.compile(r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(?P<call>\w+)\((?P<args>.*)$")
CONCURRENT = 12

need_strace()
TMP = tempfile.mkdtemp(prefix="heron-fsync-")
DAEMONS = []  # every traced daemon started, stopped by run_main whatever happens


def traced(exe, conf, port, trace):
    """exe under strace (the calls of CALLS, strings up to 200 bytes), started; its log
    next to its trace."""
    d = Traced(exe, conf, os.path.splitext(trace)[0] + ".log", port, trace, CALLS, strings=200)
    DAEMONS.append(d)
    return d.start(timeout=60)


def resumed_calls(trace):
    """(call, args, done) in trace order; a call strace split is done at its '<... x
    resumed>' line, which carries the first line's arguments (per thread) and its result."""
    out, pending = [], {}
    with open(trace, errors="replace") as f:
        for ln in f:
            ln = ln.strip()
            pid = re.match(r"^(?:\[pid\s+)?(\d+)", ln)
            pid = pid.group(1) if pid else ""
            rm = re.search(r"<\.\.\. (\w+) resumed>(.*)$", ln)
            if rm is not None:
                out.append((rm.group(1), pending.pop(pid, "") + rm.group(2), True))
                continue
            m = LINE.match(ln)
            if m is None:
                continue
            if m.group("args").endswith("<unfinished ...>"):
                pending[pid] = m.group("args")[:-len("<unfinished ...>")].rstrip()
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


def meta_write(call, args):
    """LMDB's meta page: a short pwrite into the index's first two pages (data pages and the
    file's creation write whole pages)."""
    m = re.search(r", (\d+), (\d+)\)\s+= \d+", args)
    return call in ("pwrite64", "pwritev") and "index.mdb" in args and m is not None and \
        int(m.group(2)) < 8192 and int(m.group(1)) < 4096


def check_order(trace, start_pat, ack_pat, what, need_blob=True, durable=True):
    """Between the first read or write matching start_pat and the next socket write matching
    ack_pat: a completed fsync of the message file (when need_blob), then a completed
    fdatasync/fsync of the index's data pages, then the meta page (the commit) written, and
    (durable) synced: through the index's O_DSYNC descriptor, or a completed fdatasync/fsync
    of the index after it (the group committer's: MDB_NOMETASYNC, then its own sync). A flag
    change ([store] fsync_flags = no) is answered once committed: durable=False. Returns a
    list of problems."""
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
    blob = data = meta = synced = None
    for i in range(start, ack):
        c, a, done = ev[i]
        if not done:
            continue
        if c in ("fsync", "fdatasync") and "/blobs/" in a and blob is None:
            blob = i
        elif c in ("fsync", "fdatasync") and "index.mdb" in a and meta is not None:
            synced = i
        elif c in ("fsync", "fdatasync") and "index.mdb" in a and \
                (blob is not None or not need_blob):
            data = i
        elif meta_write(c, a) and data is not None and meta is None:
            meta = i
            if re.match(r"(\d+)<", a).group(1) in dsync:
                synced = i
    problems = []
    if need_blob and blob is None:
        problems.append(f"{what}: no completed fsync of the message file before the reply")
    if data is None:
        problems.append(f"{what}: no completed fdatasync of the index "
                        f"{'after the message file ' if need_blob else ''}before the reply")
    elif meta is None:
        problems.append(f"{what}: the index commit (its meta page) is not written before the "
                        f"reply")
    elif durable and synced is None:
        problems.append(f"{what}: the index commit's meta page is not synced before the "
                        f"reply")
    return problems


EVENT = re.compile(r"^(?:\[pid\s+)?(?P<pid>\d+)\]?\s+(?P<rest>.*)$")


def calls(trace):
    """Completed calls in completion order: (start, end, pid, call, args). A call strace
    split (<unfinished ...> / <... resumed>) is put together: it starts at the first line,
    ends at the second, with the first's arguments and the second's result."""
    out, pending, idx = [], {}, 0
    with open(trace, errors="replace") as f:
        for ln in f:
            m = EVENT.match(ln.strip())
            if m is None:
                continue
            idx += 1
            pid, rest = m.group("pid"), m.group("rest")
            rm = re.match(r"<\.\.\. (\w+) resumed>(.*)$", rest)
            if rm is not None:
                if pid in pending:
                    start, call, args = pending.pop(pid)
                    out.append((start, idx, pid, call, args + rm.group(2)))
                continue
            cm = re.match(r"(\w+)\((.*)$", rest)
            if cm is None:
                continue
            if cm.group(2).endswith("<unfinished ...>"):
                pending[pid] = (idx, cm.group(1),
                                cm.group(2)[:-len("<unfinished ...>")].rstrip())
            else:
                out.append((idx, idx, pid, cm.group(1), cm.group(2)))
    return out


def ok_result(args):
    return re.search(r"\)\s+= 0\b", args) is not None


def commit_between(ev, dsync, after, ack):
    """An index commit in ev started after event index after and complete before ack: a
    completed fdatasync/fsync of the index, then the meta page written, synced (through an
    O_DSYNC descriptor of dsync, or a completed sync after it)."""
    idx = next((e for e in ev if e[3] in ("fsync", "fdatasync") and "index.mdb" in e[4] and
                e[0] > after and ok_result(e[4])), None)
    meta = idx and next((e for e in ev if meta_write(e[3], e[4]) and e[0] > idx[1]), None)
    if meta is not None and re.match(r"(\d+)<", meta[4]).group(1) not in dsync:
        meta = next((e for e in ev if e[3] in ("fsync", "fdatasync") and
                     "index.mdb" in e[4] and e[0] > meta[1] and ok_result(e[4])), None)
    return idx is not None and meta is not None and meta[1] < ack


def check_each_message(trace, what):
    """For every 250 of the trace (queued as QID): the message file whose first bytes carry
    "id QID" (the Received header mtad writes) was renamed to its final name, its bytes were
    made durable after its last write (an fdatasync/fsync of it, or a syncfs after it), its
    directory after the rename (a fsync of blobs/xx, or that syncfs), then the index data
    was fdatasynced and the commit (meta page, O_DSYNC) written, all before the 250. Returns
    (problems, number of 250s checked, syncfs calls seen)."""
    ev = calls(trace)
    dsync = {fd for (_s, _e, _p, c, a) in ev if c == "openat" and "index.mdb" in a and
             "O_DSYNC" in a for fd in re.findall(r"= (\d+)<", a)}
    problems, n = [], 0
    nsyncfs = sum(1 for e in ev if e[3] == "syncfs")
    for (_s, ack, _p, c, a) in ev:
        m = re.search(r"250 2\.0\.0 Ok: queued as ([0-9a-f]{16})", a)
        if c not in ("write", "writev", "sendmsg", "sendto") or "socket:" not in a or m is None:
            continue
        n += 1
        qid = m.group(1)
        first = next((e for e in ev if e[3] in ("write", "writev") and "/blobs/" in e[4] and
                      f"id {qid}" in e[4]), None)
        if first is None:
            problems.append(f"{what} {qid}: no message file write carrying its id")
            continue
        tmp = re.match(r"\d+<([^>]*/blobs/[0-9a-f]{2}/[0-9a-f]{16})\.tmp>", first[4])
        if tmp is None:
            problems.append(f"{what} {qid}: message file name not seen: {first[4][:120]}")
            continue
        final = tmp.group(1)
        blobdir = os.path.dirname(final)
        rel = "/".join(final.split("/")[-2:])  # renameat names it under the blobs/ fd
        ren = next((e for e in ev if e[3].startswith("rename") and f'"{rel}.tmp"' in e[4] and
                    ok_result(e[4]) and e[1] < ack), None)
        if ren is None:
            problems.append(f"{what} {qid}: {final} not renamed before the 250")
            continue
        last_w = max(e[1] for e in ev if e[3] in ("write", "writev") and
                     (f"<{final}.tmp>" in e[4] or f"<{final}>" in e[4]))
        data = [e[1] for e in ev if ((e[3] in ("fsync", "fdatasync") and f"<{final}" in e[4])
                                     or e[3] == "syncfs")
                and e[0] > last_w and e[0] > (ren[1] if e[3] == "syncfs" else 0)
                and ok_result(e[4])]
        dirs = [e[1] for e in ev if ((e[3] == "fsync" and
                                      re.match(r"\d+<" + re.escape(blobdir) + r">\)", e[4]))
                                     or e[3] == "syncfs")
                and e[0] > ren[1] and ok_result(e[4])]
        if not data:
            problems.append(f"{what} {qid}: {final}: no sync of its bytes after its last write")
            continue
        if not dirs:
            problems.append(f"{what} {qid}: {blobdir}: no sync of the directory after the "
                            f"rename")
            continue
        synced = max(min(data), min(dirs))
        if not commit_between(ev, dsync, synced, ack):
            problems.append(f"{what} {qid}: no index commit (fdatasync, then the meta page) "
                            f"between the message file's syncs and the 250")
    return problems, n, nsyncfs


def check_each_inline(trace, what):
    """For every 250 of the trace: the last read of its connection before it (the end of the
    DATA), then a completed index fdatasync and the commit's meta page, synced (O_DSYNC, or a
    sync after it), before the 250; and no message file written at all. Returns (problems,
    number of 250s checked, sync calls seen)."""
    ev = calls(trace)
    dsync = {fd for (_s, _e, _p, c, a) in ev if c == "openat" and "index.mdb" in a and
             "O_DSYNC" in a for fd in re.findall(r"= (\d+)<", a)}
    problems, n = [], 0
    nsync = sum(1 for e in ev if e[3] in ("fsync", "fdatasync", "syncfs"))
    if any(e[3] in ("write", "writev", "pwrite64") and "/blobs/" in e[4] for e in ev):
        problems.append(f"{what}: a message file was written (bodies are inline)")
    for (_s, ack, pid, c, a) in ev:
        if c not in ("write", "writev", "sendmsg", "sendto") or "socket:" not in a or \
                re.search(r"250 2\.0\.0 Ok: queued as", a) is None:
            continue
        n += 1
        fd = re.match(r"(\d+)<", a).group(1)
        end = max((e[1] for e in ev if e[2] == pid and e[4].startswith(fd + "<socket:") and
                   e[3] in ("read", "readv", "recvfrom") and e[1] < ack and ok_len(e[4])),
                  default=None)
        if end is None:
            problems.append(f"{what}: a 250 on fd {fd} without a read before it")
            continue
        if not commit_between(ev, dsync, end, ack):
            problems.append(f"{what}: a 250 on fd {fd} without an index commit (fdatasync, "
                            f"then the synced meta page) between its DATA and it")
    return problems, n, nsync


def ok_len(args):
    return re.search(r"\)\s+= [1-9]\d*\b", args) is not None


def set_store(conf, line):
    """Adds line to the [store] section of conf."""
    with open(conf) as f:
        text = f.read()
    with open(conf, "w") as f:
        f.write(text.replace("[store]\n", f"[store]\n{line}\n", 1))


def concurrent_smtp(conf, smtp_port, n):
    """n messages sent at once over n connections (so commits hold several): the 250s."""
    errors = []

    def one(i):
        try:
            with smtplib.SMTP("127.0.0.1", smtp_port, timeout=120) as s:
                s.sendmail("a@example.org", [f"user1@{DOMAIN}"],
                           f"Subject: concurrent {i}\r\n\r\nbatch {i}\r\n")
        except (OSError, smtplib.SMTPException) as e:
            errors.append(f"message {i}: {e}")

    th = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in th:
        t.start()
    for t in th:
        t.join(180)
    return errors


def batch_run(mode):
    """mtad under strace with CONCURRENT messages at once: every 250 checked one by one, by
    check_each_message (mode "files": per-file syncs; "syncfs": [store] group_commit_syncfs)
    or check_each_inline (mode "inline": bodies inline, the default)."""
    d = os.path.join(TMP, mode)
    os.mkdir(d)
    conf, smtp_port, _imap = shared_conf(d, ["user1"])
    if mode != "inline":
        set_store(conf, "inline_max = 0")
    if mode == "syncfs":
        set_store(conf, "group_commit_syncfs = yes")
    mtad = traced(MTAD, conf, smtp_port, os.path.join(d, "mtad.trace"))
    try:
        problems = concurrent_smtp(conf, smtp_port, CONCURRENT)
    finally:
        mtad.stop()
    if mode == "inline":
        p, n, nsync = check_each_inline(mtad.trace, f"SMTP batch ({mode})")
    else:
        p, n, nsync = check_each_message(mtad.trace, f"SMTP batch ({mode})")
    if n != CONCURRENT:
        p.append(f"SMTP batch ({mode}): {n} replies 250 in the trace, {CONCURRENT} sent")
    print(f"{mode}: {n} messages checked one by one, "
          f"{'sync' if mode == 'inline' else 'syncfs'} calls: {nsync}")
    problems += p
    assert not problems, "\n".join(problems)


def test_smtp_append_store_durable_before_the_reply():
    """One SMTP message, one IMAP APPEND and STORE, bodies as files ([store] inline_max = 0:
    the message files' own syncs; bodies inline: test_batch_inline)."""
    d = os.path.join(TMP, "one")
    os.mkdir(d)
    conf, smtp_port, imap_port = shared_conf(d, ["user1"])
    set_store(conf, "inline_max = 0")
    mtad = traced(MTAD, conf, smtp_port, os.path.join(d, "mtad.trace"))
    imapd = traced(IMAPD, conf, imap_port, os.path.join(d, "imapd.trace"))
    try:
        c = imaplib.IMAP4("127.0.0.1", imap_port, timeout=60)
        c.login("user1", "user1")  # creates the account
        with smtplib.SMTP("127.0.0.1", smtp_port, timeout=60) as s:
            s.sendmail("a@example.org", [f"user1@{DOMAIN}"],
                       "Subject: traced-smtp\r\n\r\nkernel witness\r\n")
        typ, data = c.append("INBOX", None, None,
                             b"Subject: traced-imap\r\n\r\nkernel witness\r\n")
        assert typ == "OK", data
        c.select("INBOX")
        typ, data = c.store("1", "+FLAGS", "(\\Flagged)")
        assert typ == "OK", data
        c.logout()
    finally:
        mtad.stop()
        imapd.stop()
    problems = check_order(mtad.trace, r'"354 ', r'"250 2\.0\.0 Ok: queued', "SMTP DATA")
    problems += check_order(imapd.trace, r'"\+ ', r'OK \[APPENDUID', "IMAP APPEND")
    problems += check_order(imapd.trace, r"STORE 1 \+FLAGS", r"OK STORE", "IMAP STORE",
                            need_blob=False, durable=False)
    problems += check_each_message(mtad.trace, "SMTP DATA")[0]
    assert not problems, "\n".join(problems)


def test_batch_files():
    batch_run("files")


def test_batch_syncfs():
    batch_run("syncfs")


def test_batch_inline():
    batch_run("inline")


def main():
    return run_main(lambda: run_tests([test_smtp_append_store_durable_before_the_reply,
                                       test_batch_files, test_batch_syncfs,
                                       test_batch_inline]),
                    TMP, DAEMONS, note=" (the traces)")


if __name__ == "__main__":
    sys.exit(main())
