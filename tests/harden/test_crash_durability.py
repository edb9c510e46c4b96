#!/usr/bin/env python3
"""Crash durability: mtad and imapd share one store while SMTP clients deliver and
IMAP clients APPEND, flag (STORE) and EXPUNGE; at random moments (seeded, printed) a worker or
a whole daemon (master and workers) of either gets SIGKILL, many rounds. Afterwards every
message that got 250 is in its recipient's INBOX, every APPEND that got OK is there unless an
EXPUNGE of it got OK, every STORE that got OK shows its flag, every EXPUNGE that got OK left
nothing behind; and, past the age at which `mailctl verify` counts an unreferenced message
file as an orphan (60 s after the last kill), the daemons alone have removed what the killed
processes left (no marker of a dead process under the store's run/, verify finds no orphan
and no young file) without anyone running a repair.

  test_crash_durability.py SOURCE_ROOT MTAD IMAPD MAILCTL [SEED]"""
import imaplib
import os
import random
import re
import signal
import smtplib
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import heronlib  # noqa: E402
from heronlib import DOMAIN, mailctl_verify, run_main, shared_conf  # noqa: E402

ROOT, MTAD, IMAPD, MAILCTL = sys.argv[1:5]
SEED = int(sys.argv[5]) if len(sys.argv) > 5 else int(time.time())
ROUNDS = 8
SMTP_USERS = ["user1", "user2"]
IMAP_USERS = ["user3", "user4"]
MAX_OPS = 300  # per client thread and round: every loop is bounded
ORPHAN_AGE = 60  # store_verify.c: younger unreferenced files are "young", not orphans


class Daemon(heronlib.Daemon):
    def kill_worker(self):
        pids = self.worker_pids()
        if pids:
            os.kill(random.choice(pids), signal.SIGKILL)  # the master restarts it

    def ensure(self):
        if self.proc is None or self.proc.poll() is not None:
            self.proc = None
            self.start()


class Ledger:
    """What the servers acknowledged (appended under a lock from the client threads)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.delivered = []      # (user, subject)
        self.appended = {}       # subject -> user
        self.flagged = set()     # subjects
        self.expunged = set()    # subjects
        self.expunge_sent = set()  # subjects whose expunge was sent (its OK may be lost)

    def add(self, what, *v):
        with self.lock:
            if what == "delivered":
                self.delivered.append(v)
            elif what == "appended":
                self.appended[v[1]] = v[0]
            elif what == "flagged":
                self.flagged.add(v[0])
            elif what == "expunge_sent":
                self.expunge_sent.add(v[0])
            else:
                self.expunged.add(v[0])


def smtp_client(port, tag, ledger, stop):
    n = 0
    while not stop.is_set() and n < MAX_OPS:
        n += 1
        user = SMTP_USERS[n % len(SMTP_USERS)]
        subject = f"smtp-{tag}-{n}"
        try:
            with smtplib.SMTP("127.0.0.1", port, timeout=10) as c:
                c.sendmail("s@example.org", [f"{user}@{DOMAIN}"],
                           f"From: <s@{DOMAIN}>\r\nSubject: {subject}\r\n\r\nbody {n}\r\n")
            ledger.add("delivered", user, subject)
        except (OSError, smtplib.SMTPException):
            time.sleep(0.05)  # not acknowledged: nothing promised


def imap_client(port, user, tag, ledger, stop):
    n = 0
    c = None
    while not stop.is_set() and n < MAX_OPS:
        n += 1
        subject = f"imap-{tag}-{n}"
        try:
            if c is None:
                c = imaplib.IMAP4("127.0.0.1", port, timeout=10)
                c.login(user, user)
                c.select("INBOX")
            typ, data = c.append("INBOX", None, None,
                                 f"Subject: {subject}\r\n\r\nappended {n}\r\n".encode())
            if typ != "OK":
                continue
            ledger.add("appended", user, subject)
            uid = re.search(rb"APPENDUID \d+ (\d+)", data[0]).group(1).decode()
            if c.uid("STORE", uid, "+FLAGS", r"(\Flagged)")[0] == "OK":
                ledger.add("flagged", subject)
            if n % 3 == 0:
                ledger.add("expunge_sent", subject)
                if c.uid("STORE", uid, "+FLAGS", r"(\Deleted)")[0] == "OK" and \
                        c.uid("EXPUNGE", uid)[0] == "OK":
                    ledger.add("expunged", subject)
        except (OSError, imaplib.IMAP4.error, imaplib.IMAP4.abort, AttributeError):
            try:
                if c is not None:
                    c.shutdown()
            except OSError:
                pass
            c = None
            time.sleep(0.05)
    if c is not None:
        try:
            c.logout()
        except (OSError, imaplib.IMAP4.error, imaplib.IMAP4.abort):
            pass


def mailbox_state(port, user):
    """subject -> set of flags, read back over IMAP."""
    c = imaplib.IMAP4("127.0.0.1", port, timeout=30)
    c.login(user, user)
    typ, data = c.select("INBOX", readonly=True)
    assert typ == "OK", data
    state = {}
    if int(data[0]) > 0:
        typ, data = c.fetch("1:*", "(FLAGS BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
        assert typ == "OK", data
        for part in data:
            if not isinstance(part, tuple):
                continue
            flags = set(re.search(rb"FLAGS \(([^)]*)\)", part[0]).group(1).decode().split())
            subject = part[1].decode().split(":", 1)[1].strip()
            assert subject not in state, f"{subject} stored twice"
            state[subject] = flags
    c.logout()
    return state


def main():
    random.seed(SEED)
    print(f"seed {SEED}", flush=True)
    tmp = tempfile.mkdtemp(prefix="heron-crash-")
    # password = user name
    conf, smtp_port, imap_port = shared_conf(tmp, SMTP_USERS + IMAP_USERS, workers=2,
                                             partitions=2, map_size="32M")
    mtad = Daemon(MTAD, conf, os.path.join(tmp, "mtad.log"), smtp_port)
    imapd = Daemon(IMAPD, conf, os.path.join(tmp, "imapd.log"), imap_port)
    ledger = Ledger()

    def body():
        mtad.start()
        imapd.start()
        for u in IMAP_USERS:  # the first login creates the account
            c = imaplib.IMAP4("127.0.0.1", imap_port, timeout=10)
            c.login(u, u)
            c.logout()
        kills = []
        last_kill = time.monotonic()
        for r in range(ROUNDS):
            mtad.ensure()
            imapd.ensure()
            stop = threading.Event()
            threads = [threading.Thread(target=smtp_client,
                                        args=(smtp_port, f"{r}.{i}", ledger, stop))
                       for i in range(3)]
            threads += [threading.Thread(target=imap_client,
                                         args=(imap_port, u, f"{r}.{u}", ledger, stop))
                        for u in IMAP_USERS]
            for t in threads:
                t.start()
            time.sleep(random.uniform(0.3, 1.5))
            what = random.choice(["mtad worker", "imapd worker", "mtad", "imapd", "both"])
            kills.append(what)
            if what == "mtad worker":
                mtad.kill_worker()
            elif what == "imapd worker":
                imapd.kill_worker()
            else:
                if what in ("mtad", "both"):
                    mtad.kill9()
                if what in ("imapd", "both"):
                    imapd.kill9()
            last_kill = time.monotonic()
            time.sleep(random.uniform(0.1, 0.5))
            stop.set()
            for t in threads:
                t.join(timeout=60)
        print("kills: " + ", ".join(kills), flush=True)
        # a clean restart, then read everything back
        mtad.stop()
        imapd.stop()
        mtad.start()
        imapd.start()
        state = {u: mailbox_state(imap_port, u) for u in SMTP_USERS + IMAP_USERS}
        problems = []
        for user, subject in ledger.delivered:
            if subject not in state[user]:
                problems.append(f"250 but missing: {user} {subject}")
        for subject, user in ledger.appended.items():
            present = subject in state[user]
            if subject in ledger.expunged:
                if present:
                    problems.append(f"EXPUNGE OK but present: {user} {subject}")
            elif not present:
                # an expunge that committed but whose OK was lost to the kill is allowed
                if subject not in ledger.expunge_sent:
                    problems.append(f"APPEND OK but missing: {user} {subject}")
            elif subject in ledger.flagged and "\\Flagged" not in state[user][subject]:
                problems.append(f"STORE OK but not flagged: {user} {subject}")
        print(f"acknowledged: {len(ledger.delivered)} deliveries, {len(ledger.appended)} "
              f"appends, {len(ledger.flagged)} flag changes, {len(ledger.expunged)} expunges; "
              f"{len(problems)} problems", flush=True)
        assert ledger.delivered and ledger.appended and ledger.flagged and ledger.expunged, \
            "too little was acknowledged to test anything"
        assert not problems, problems[:20]
        mtad.stop()
        imapd.stop()
        # what the killed processes left was removed by the daemons that came after: no
        # marker of a dead process is left for the next opener (mailctl) to recover
        run = os.path.join(tmp, "store", "run")
        left = sorted(os.listdir(run)) if os.path.isdir(run) else []
        assert not left, f"markers of processes nobody recovered: {left}"
        wait = ORPHAN_AGE + 2 - (time.monotonic() - last_kill)
        if wait > 0:
            print(f"waiting {wait:.0f} s past the orphan age", flush=True)
            time.sleep(wait)
        v = mailctl_verify(MAILCTL, conf)
        assert v["orphan_files"] == 0 and v["young_files"] == 0, v

    return run_main(body, tmp, [mtad, imapd], tail=6000, note=f"; rerun with seed {SEED}")


if __name__ == "__main__":
    sys.exit(main())
