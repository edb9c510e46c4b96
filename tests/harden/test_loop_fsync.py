#!/usr/bin/env python3
"""No fsync on an event loop's thread, seen from the kernel: mtad, imapd and managesieved run
under strace -f; every write path of a session is exercised (SMTP to a user the store does
not know yet and to one it does, an IMAP LOGIN that creates the account, CREATE, SUBSCRIBE,
RENAME, DELETE, APPEND, SELECT claiming \\Recent, new mail while selected (the claim of a
running session), FETCH BODY[] setting \\Seen, STORE, COPY, MOVE, EXPUNGE, CLOSE's expunge;
relay through mtad's queue: to a real sink, a recipient deferred (its port closed) until its
delay notice, one refused by a second sink with 550 (a bounce to the sender), each of them
leased, recorded and finished through the queue; sieve-connect's PUTSCRIPT and SETACTIVE);
then no fsync, fdatasync, syncfs, msync or sync_file_range ran on a worker's main thread
(its event loop) once it served its first connection, while the group committer's threads
did make the writes durable. Skipped (77) without strace or when ptrace is not allowed.

  test_loop_fsync.py SOURCE_ROOT MTAD IMAPD MANAGESIEVED SINK"""
import imaplib
import os
import re
import shutil
import smtplib
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import (DOMAIN, HOST, Sink, SinkControl, Traced, free_port,  # noqa: E402
                      make_cert, need_strace, run_main, run_tests, shared_conf, skip,
                      wait_for)

ROOT, MTAD, IMAPD, MANAGESIEVED, SINK = sys.argv[1:6]
SYNCS = ("fsync", "fdatasync", "syncfs", "msync", "sync_file_range")
CALLS = ",".join(SYNCS + ("accept", "accept4"))
LINE = re.compile(r"^(?:\[pid\s+(?P<tid>\d+)\]\s+|(?P<tid2>\d+)\s+)?(?P<call>\w+)\(")

need_strace()
SIEVE_CONNECT = shutil.which("sieve-connect")
if SIEVE_CONNECT is None:
    skip("no sieve-connect")
TMP = tempfile.mkdtemp(prefix="heron-loopsync-")
os.makedirs(os.path.join(TMP, "ok"))
os.makedirs(os.path.join(TMP, "bad"))
OK_SINK = Sink(SINK, os.path.join(TMP, "ok"), {"starttls": "no", "records": "all"})
BAD_SINK = Sink(SINK, os.path.join(TMP, "bad"), {"starttls": "no"})
CLOSED = free_port()  # nothing listens: its recipient is deferred
MS_PORT = free_port()
CERT, KEY = make_cert(TMP)
CONF, SMTP_PORT, IMAP_PORT = shared_conf(TMP, ["user1", "user2"], keys={
    "tls": {"cert": CERT, "key": KEY},
    "mtad": {"transport_map": f"ok.test=127.0.0.1:{OK_SINK.port},"
                              f"later.test=127.0.0.1:{CLOSED},"
                              f"bad.test=127.0.0.1:{BAD_SINK.port}",
             "trusted_networks": "127.0.0.1/32", "relay_timeout": "10s",
             "retry_schedule": "1s", "delay_warning": "1s"},
    "sieve": {"listen": f"{HOST}:{MS_PORT}"},
})
MTAD_D = Traced(MTAD, CONF, os.path.join(TMP, "mtad.log"), SMTP_PORT,
                os.path.join(TMP, "mtad.trace"), CALLS)
IMAPD_D = Traced(IMAPD, CONF, os.path.join(TMP, "imapd.log"), IMAP_PORT,
                 os.path.join(TMP, "imapd.trace"), CALLS)
MSD_D = Traced(MANAGESIEVED, CONF, os.path.join(TMP, "managesieved.log"), MS_PORT,
               os.path.join(TMP, "managesieved.trace"), CALLS)
TRACED = ((MTAD_D, "mtad"), (IMAPD_D, "imapd"), (MSD_D, "managesieved"))


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


def relay_session(smtp_port):
    """Mail through the queue: delivered to the sink; delivered, deferred (with a delay
    notice once it waited delay_warning) and refused with 550 (a bounce); refused alone (a
    bounce, and the entry deleted). The sender's DSNs go to the sink too."""
    SinkControl(BAD_SINK.control_port, check=True).req(cmd="faults", rcpt_5xx=1.0)
    mids = [f"<relay.{i}@ok.test>" for i in range(3)]
    rcpts = (["a@ok.test"], ["b@ok.test", "c@later.test", "d@bad.test"], ["e@bad.test"])
    with smtplib.SMTP("127.0.0.1", smtp_port, timeout=60) as s:
        for mid, to in zip(mids, rcpts):
            s.sendmail("sender@ok.test", to,
                       f"From: <sender@ok.test>\r\nMessage-ID: {mid}\r\n"
                       f"Subject: relay\r\n\r\nrelay me\r\n",
                       rcpt_options=["NOTIFY=FAILURE,DELAY"])
    ok = SinkControl(OK_SINK.control_port, check=True)

    def arrived():
        ids = ok.ids()
        return (all(m in ids for m in mids[:2]) and
                sum(".bounce@" in i for i in ids) == 2 and
                sum(".delay@" in i for i in ids) == 1)
    wait_for(arrived, 120, "the relayed mail, two bounces and a delay notice at the sink")
    ok.close()
    log = MTAD_D.logtext()
    assert "status=deferred" in log and "status=bounced" in log, log[-3000:]


def sieve_session():
    """sieve-connect over STARTTLS: PUTSCRIPT, then SETACTIVE (the account made by the
    first write), then the list shows it active."""
    path = os.path.join(TMP, "filter.sieve")
    with open(path, "w") as f:
        f.write('require "fileinto";\nif header :contains "subject" "x" '
                '{ fileinto "Work"; }\n')

    def sc(*args):
        r = subprocess.run([SIEVE_CONNECT, "-s", HOST, "-p", str(MS_PORT), "-u", "user1",
                            "--passwordfd", "0", "--notlsverify", *args], input="user1\n",
                           capture_output=True, text=True, timeout=60, cwd=TMP)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout + r.stderr
    sc("--localsieve", path, "--remotesieve", "filter", "--upload")
    sc("--remotesieve", "filter", "--activate")
    listed = sc("--list")
    assert "filter" in listed and "activ" in listed.lower(), listed


def test_no_sync_on_a_loop_thread():
    OK_SINK.start()
    BAD_SINK.start()
    MTAD_D.start(timeout=60)
    IMAPD_D.start(timeout=60)
    MSD_D.start(timeout=60)
    with smtplib.SMTP("127.0.0.1", SMTP_PORT, timeout=60) as s:
        # user2 is in the directory, not yet in the store: made at RCPT
        s.sendmail("a@example.org", [f"user2@{DOMAIN}"], "Subject: first\r\n\r\nfirst\r\n")
        s.sendmail("a@example.org", [f"user2@{DOMAIN}", f"user1@{DOMAIN}"],
                   "Subject: second\r\n\r\nsecond\r\n")
    imap_session(IMAP_PORT, SMTP_PORT)
    relay_session(SMTP_PORT)
    sieve_session()
    mains = {str(p) for d, _ in TRACED for p in d.worker_pids()}
    assert mains, "no worker processes found"
    for d, _ in TRACED:
        d.stop()
    problems = []
    for d, what in TRACED:
        p, n = check(d.trace, mains, what)
        problems += p
        print(f"{what}: {n} sync calls on other threads")
        if n == 0:
            problems.append(f"{what}: no sync call at all: the trace saw nothing")
    assert not problems, "\n".join(problems[:40])


def main():
    return run_main(lambda: run_tests([test_no_sync_on_a_loop_thread]), TMP,
                    [d for d, _ in TRACED], note=" (the traces)",
                    cleanup=[lambda: OK_SINK.stop(timeout=10),
                             lambda: BAD_SINK.stop(timeout=10)])


if __name__ == "__main__":
    sys.exit(main())
