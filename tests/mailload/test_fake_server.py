#!/usr/bin/env python3
"""test_fake_server.py — runs mailload against a scripted fake SMTP/IMAP server on loopback.

The fake server keeps a tiny in-memory mail store: SMTP deliveries to local users land in
their INBOX, IMAP speaks the RFC 3501 subset mailload uses (literals, sequence sets, FETCH of
UID/FLAGS/RFC822.SIZE/ENVELOPE/INTERNALDATE/BODY[]/BODY.PEEK[HEADER.FIELDS], STORE, EXPUNGE,
APPEND with a synchronizing literal). The test runs `mailload init`, then one short run per
IMAP session kind (check, sync, cleanup; submissions with their APPEND to Sent, deliveries
from outside MTAs and the delivery probes come along), and asserts what each kind must
produce: samples for its functions, no errors, nothing lost or duplicated. A last run against
a server that changes UIDVALIDITY under the client must report the contradiction. Two more
find every delivery with the probes alone (no user session reads INBOX): into INBOXes filled
behind the server's back, where the first delivery is numbered before the messages already
there and so comes first (an LMTP delivery into a Maildir the server never indexed); and with
deliveries made after the acknowledgement (a queue) while another session expunges a message,
so that EXISTS does not grow past what the probe saw before. A third has the probes in IDLE
at a server that says what changed before IDLE's "+". A search whose points straddle 95% runs
them again and lets the majority of up to three runs decide.

usage: test_fake_server.py PATH/TO/mailload"""
import json
import os
import re
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import free_port, run_main, run_tests, serve  # noqa: E402

LOCK = threading.Lock()
STORE = {}  # user -> {folder: {"uidvalidity", "uidnext", "msgs": [[uid, flags(set), bytes]], "sub"}}
LIE = {"uidvalidity": False}
# save_first: a delivery into a mailbox with unnumbered messages is numbered first;
# late: seconds between the SMTP acknowledgement and the delivery (0: before the reply);
# expunge_old: each delivery also expunges the oldest message, as another session would
# below: a delivery may take a UID under one a FETCH already showed (a server that numbers
# out of order); refuse: users whose LOGIN is refused (a server that cannot be read)
# fail_runs: ordinals (1 = the first run id seen since RUNS was cleared) of the runs in which
# every second DATA gets a 451 (a run that fails, between runs that pass)
# idle: IDLE offered, and what changed is said before its "+" (as imapd did before #25's fix)
MODE = {"save_first": False, "late": 0.0, "expunge_old": False, "below": False,
        "refuse": (), "fail_runs": (), "idle": False}
IDLE_NEWS = {"n": 0}  # IDLEs whose "+" came after an EXISTS that grew
RUNS = []  # run ids in the order their first message arrived
DATA_N = {"n": 0}
DEFAULT_MODE = dict(MODE)
LAST = {}  # the last run's report.json
ACKED = {"n": 0}  # messages the fake SMTP server acknowledged
LINE_MAX = 100000


def mailbox(user, name, create=False):
    u = STORE.setdefault(user, {})
    if name.upper() == "INBOX":
        name = "INBOX"
    if name not in u:
        if not create and name not in ("INBOX", "Sent", "Drafts", "Trash"):
            return None
        u[name] = {"uidvalidity": 1000 + len(u), "uidnext": 1, "msgs": [], "sub": False}
    return u[name]


def number(mb):
    """UIDs for the messages that have none (put there behind the server's back), in order."""
    for m in mb["msgs"]:
        if m[0] is None:
            m[0] = mb["uidnext"]
            mb["uidnext"] += 1


def deliver(user, data, flags=()):
    with LOCK:
        mb = mailbox(user, "INBOX")
        if MODE["expunge_old"] and mb["msgs"]:
            del mb["msgs"][0]
        if not MODE["save_first"]:
            number(mb)
        hole = mb.get("hole")
        if MODE["below"] and hole is not None and mb.get("shown", 0) > hole:
            msg = [hole, set(flags), data]  # under a UID already shown: RFC 3501 violated
            mb["hole"] = None
        elif MODE["below"] and hole is None:
            mb["hole"] = mb["uidnext"]  # keep one UID back for a later delivery
            msg = [mb["uidnext"] + 1, set(flags), data]
            mb["uidnext"] += 2
        else:
            msg = [mb["uidnext"], set(flags), data]
            mb["uidnext"] += 1
        number(mb)  # save_first: after the new one, which comes first in UID order
        mb["msgs"].append(msg)
        mb["msgs"].sort(key=lambda m: m[0])


class SMTP(socketserver.StreamRequestHandler):
    def reply(self, s):
        self.wfile.write(s.encode() + b"\r\n")

    def fail_this(self, data):
        """Whether this DATA is refused: every second one of a run in MODE["fail_runs"]."""
        m = re.search(rb"Message-ID: <(\d+)\.\d+@mailload>", data, re.I)
        if m is None or not MODE["fail_runs"]:
            return False
        with LOCK:
            if m.group(1) not in RUNS:
                RUNS.append(m.group(1))
            if RUNS.index(m.group(1)) + 1 not in MODE["fail_runs"]:
                return False
            DATA_N["n"] += 1
            return DATA_N["n"] % 2 == 0

    def handle(self):
        self.reply("220 fake.heron.test ESMTP fake")
        rcpts = []
        while True:
            line = self.rfile.readline(LINE_MAX)
            if not line:
                return
            cmd = line.decode(errors="replace").strip()
            up = cmd.upper()
            if up.startswith("EHLO"):
                self.wfile.write(b"250-fake.heron.test\r\n250-PIPELINING\r\n250 8BITMIME\r\n")
            elif up.startswith("MAIL FROM:"):
                rcpts = []
                self.reply("250 2.1.0 ok")
            elif up.startswith("RCPT TO:"):
                rcpts.append(re.search(r"<([^>]*)>", cmd).group(1))
                self.reply("250 2.1.5 ok")
            elif up == "DATA":
                self.reply("354 go ahead")
                chunks = []
                while True:
                    d = self.rfile.readline(LINE_MAX)
                    if not d or d == b".\r\n":
                        break
                    chunks.append(d[1:] if d.startswith(b"..") else d)
                data = b"".join(chunks)
                if self.fail_this(data):
                    self.reply("451 4.3.0 try again later")
                    continue
                for r in rcpts:  # any local part at any domain but the remote one
                    m = re.match(r"([^@]+)@(?!ext\.)", r)
                    if m and MODE["late"]:
                        t = threading.Timer(MODE["late"], deliver, (m.group(1), data))
                        t.daemon = True
                        t.start()
                    elif m:
                        deliver(m.group(1), data)
                with LOCK:
                    ACKED["n"] += 1
                self.reply("250 2.0.0 queued")
            elif up == "QUIT":
                self.reply("221 bye")
                return
            else:
                self.reply("502 unknown")


def seqset(spec, maxv):
    out = []
    for part in spec.split(","):
        if ":" in part:
            a, b = part.split(":")
            a = maxv if a == "*" else int(a)
            b = maxv if b == "*" else int(b)
            lo, hi = min(a, b), max(a, b)
            out.extend(range(lo, hi + 1))
        else:
            out.append(maxv if part == "*" else int(part))
    return out


def header_fields(data, names):
    head = data.split(b"\r\n\r\n", 1)[0] + b"\r\n"
    out, keep = [], False
    for line in head.split(b"\r\n")[:-1]:
        if line[:1] in (b" ", b"\t"):
            if keep:
                out.append(line)
            continue
        keep = line.split(b":", 1)[0].decode().lower() in names
        if keep:
            out.append(line)
    return b"\r\n".join(out) + b"\r\n\r\n" if out else b"\r\n"


class IMAP(socketserver.StreamRequestHandler):
    def send(self, s):
        self.wfile.write(s if isinstance(s, bytes) else s.encode())

    def fetch_one(self, mb, seq, items, uid_cmd):
        uid, flags, data = mb["msgs"][seq - 1]
        mb["shown"] = max(mb.get("shown", 0), uid)
        parts = []
        if uid_cmd or "UID" in items:
            parts.append(b"UID %d" % uid)
        up = items.upper()
        if "BODY[]" in up and "PEEK" not in up:
            flags.add("\\Seen")
        if "FLAGS" in up:
            parts.append(("FLAGS (%s)" % " ".join(sorted(flags))).encode())
        if "RFC822.SIZE" in up:
            parts.append(b"RFC822.SIZE %d" % len(data))
        if "INTERNALDATE" in up:
            parts.append(b'INTERNALDATE "01-Jan-2026 00:00:00 +0000"')
        if "ENVELOPE" in up:
            parts.append(b'ENVELOPE ("date" "subject" NIL NIL NIL NIL NIL NIL NIL "<id>")')
        m = re.search(r"HEADER\.FIELDS \(([^)]*)\)", items, re.I)
        if m:
            h = header_fields(data, [n.lower() for n in m.group(1).split()])
            parts.append(b"BODY[HEADER.FIELDS (%s)] {%d}\r\n%s" % (m.group(1).encode(), len(h), h))
        elif "BODY[]" in up:
            parts.append(b"BODY[] {%d}\r\n%s" % (len(data), data))
        self.send(b"* %d FETCH (%s)\r\n" % (seq, b" ".join(parts)))

    def sync_view(self, sel):
        """Tells this session, as RFC 3501 requires, of messages other sessions expunged
        (EXPUNGE, highest first) and of new ones (EXISTS), so EXISTS never goes down."""
        now = [m[0] for m in sel["msgs"]]
        present = set(now)
        for i in reversed(range(len(self.view))):
            if self.view[i] not in present:
                self.send("* %d EXPUNGE\r\n" % (i + 1))
                del self.view[i]
        known = set(self.view)
        self.view += [u for u in now if u not in known]
        self.send("* %d EXISTS\r\n" % len(self.view))

    def handle(self):
        self.view = []
        self.send("* OK [CAPABILITY IMAP4rev1] fake imap ready\r\n")
        user, sel = None, None
        while True:
            line = self.rfile.readline(LINE_MAX)
            if not line:
                return
            text = line.decode(errors="replace").rstrip("\r\n")
            tag, _, rest = text.partition(" ")
            cmd, _, args = rest.partition(" ")
            cmd = cmd.upper()
            uid_cmd = False
            if cmd == "UID":
                uid_cmd = True
                cmd, _, args = args.partition(" ")
                cmd = cmd.upper()
            if cmd == "IDLE" and MODE["idle"]:
                if not self.idle(tag, sel):
                    return
                continue
            with LOCK:
                r = self.command(tag, cmd, args, uid_cmd, user, sel)
            if r is None:
                return
            user, sel = r

    def idle(self, tag, sel):
        """IDLE that pushes nothing: what changed since the last command comes before the
        "+", then the client's DONE ends it (its own timer, or the news it already has)."""
        with LOCK:
            if sel is not None:
                before = len(self.view)
                self.sync_view(sel)
                if len(self.view) > before:
                    IDLE_NEWS["n"] += 1
        self.send("+ idling\r\n")
        line = self.rfile.readline(LINE_MAX)
        if not line:
            return False
        if line.rstrip(b"\r\n").upper() != b"DONE":
            self.send("%s BAD expected DONE\r\n" % tag)
            return False
        self.send("%s OK IDLE done\r\n" % tag)
        return True

    def command(self, tag, cmd, args, uid_cmd, user, sel):
        ok = "%s OK done\r\n" % tag
        if cmd == "CAPABILITY":
            self.send("* CAPABILITY IMAP4rev1%s\r\n" % (" IDLE" if MODE["idle"] else "") + ok)
        elif cmd == "LOGIN":
            user = args.split()[0].strip('"')
            if user in MODE["refuse"]:
                self.send("%s NO [UNAVAILABLE] try later\r\n" % tag)
                return None, None
            self.send(ok)
        elif cmd == "LOGOUT":
            self.send("* BYE bye\r\n" + ok)
            return None
        elif cmd == "NOOP":
            if sel is not None:
                self.sync_view(sel)
            self.send(ok)
        elif cmd in ("LIST", "LSUB"):
            mailbox(user, "INBOX")
            for name, mb in STORE[user].items():
                if cmd == "LIST" or mb["sub"]:
                    self.send('* %s () "/" "%s"\r\n' % (cmd, name))
            self.send(ok)
        elif cmd == "CREATE":
            mailbox(user, args.strip('"'), create=True)
            self.send(ok)
        elif cmd == "SUBSCRIBE":
            mailbox(user, args.strip('"'), create=True)["sub"] = True
            self.send(ok)
        elif cmd == "STATUS":
            name = args.split(" (")[0].strip('"')
            mb = mailbox(user, name)
            number(mb)
            self.send('* STATUS "%s" (MESSAGES %d)\r\n' % (name, len(mb["msgs"])) + ok)
        elif cmd in ("SELECT", "EXAMINE"):
            sel = mailbox(user, args.strip('"'))
            if sel is None:
                self.send("%s NO no such mailbox\r\n" % tag)
                return user, None
            if LIE["uidvalidity"] and sel is STORE[user]["INBOX"]:
                sel["uidvalidity"] += 1
            number(sel)
            self.view = [m[0] for m in sel["msgs"]]
            self.send("* %d EXISTS\r\n* 0 RECENT\r\n* OK [UIDVALIDITY %d] v\r\n"
                      "* OK [UIDNEXT %d] n\r\n" % (len(sel["msgs"]), sel["uidvalidity"],
                                                   sel["uidnext"]) + ok)
        elif cmd == "FETCH":
            spec, _, items = args.partition(" ")
            n = len(sel["msgs"])
            if uid_cmd:
                uids = [m[0] for m in sel["msgs"]]
                want = seqset(spec, uids[-1] if uids else 0)
                seqs = [i + 1 for i, u in enumerate(uids) if u in want]
            else:
                seqs = [s for s in seqset(spec, n) if 1 <= s <= n]
            for s in seqs:
                self.fetch_one(sel, s, items, uid_cmd)
            self.send(ok)
        elif cmd == "STORE":
            spec, _, rest = args.partition(" ")
            flags = re.search(r"\(([^)]*)\)", rest).group(1).split()
            uids = [m[0] for m in sel["msgs"]]
            if uid_cmd:
                want = seqset(spec, uids[-1] if uids else 0)
                seqs = [i + 1 for i, u in enumerate(uids) if u in want]
            else:
                seqs = seqset(spec, len(uids))
            for s in seqs:
                sel["msgs"][s - 1][1].update(flags)
                self.send("* %d FETCH (FLAGS (%s)%s)\r\n" % (
                    s, " ".join(sorted(sel["msgs"][s - 1][1])),
                    " UID %d" % sel["msgs"][s - 1][0] if uid_cmd else ""))
            self.send(ok)
        elif cmd == "EXPUNGE":
            i = 0
            while i < len(sel["msgs"]):
                if "\\Deleted" in sel["msgs"][i][1]:
                    if sel["msgs"][i][0] in self.view:
                        self.view.remove(sel["msgs"][i][0])
                    del sel["msgs"][i]
                    self.send("* %d EXPUNGE\r\n" % (i + 1))
                else:
                    i += 1
            self.send(ok)
        elif cmd == "APPEND":
            m = re.match(r'"?([^"]*)"? \(([^)]*)\) \{(\d+)\}$', args)
            self.send("+ go ahead\r\n")
            data = self.rfile.read(int(m.group(3)))
            self.rfile.readline(LINE_MAX)
            mb = mailbox(user, m.group(1))
            mb["msgs"].append([mb["uidnext"], set(m.group(2).split()), data])
            mb["uidnext"] += 1
            self.send(ok)
        else:
            self.send("%s BAD unknown command\r\n" % tag)
        return user, sel


def mailload(exe, smtp, imap, *args):
    cmd = [exe, args[0], "--target", "127.0.0.1", "--smtp-port", str(smtp),
           "--submission-port", str(smtp), "--imap-port", str(imap), "--users", "4",
           "--local-agents", "1", "--profile", "tiny", "--seed", "7", "-q"] + list(args[1:])
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)


def run_kind(exe, smtp, imap, tmp, name, mix, extra=(), codes=(0, 1, 3), min_samples="1"):
    rep = os.path.join(tmp, name)
    p = mailload(exe, smtp, imap, "run", "--rate", "0.02", "--phases", "1/6/2", "--drain",
                 "10", "--load-points", "100", "--report", rep, "--min-samples", min_samples,
                 "--set", "imap_per_hour=1800", "--set", "send_per_hour=1200",
                 "--set", "recv_per_hour=1200", "--set", "check_delete=1",
                 "--set", "mix_check=%g" % mix[0], "--set", "mix_sync=%g" % mix[1],
                 "--set", "mix_cleanup=%g" % mix[2], *extra)
    assert p.returncode in codes, (p.returncode, p.stderr.decode())
    assert os.path.exists(os.path.join(rep, "report.json")), (p.returncode, p.stderr.decode())
    with open(os.path.join(rep, "report.json")) as f:
        r = json.load(f)
    LAST["report"] = r
    LAST["stderr"] = p.stderr.decode()
    assert os.path.getsize(os.path.join(rep, "report.html")) > 1000
    assert r["schema_version"] == 2 and r["run"]["command_line"].startswith(exe), r["run"]
    with open(os.path.join(rep, "report.txt")) as f:
        text = f.read()
    assert r["fill"]["status"] == "verified", r["fill"]
    pt = r["points"][0]
    d = pt["delivery"]
    line = ("Delivery accounting: %d copies checked, %d delivered, %d late, %d unchecked, "
            "%d lost, %d duplicated" % (d["checked"], d["delivered"], d["late"],
                                        d["unchecked"], d["lost"], d["duplicated"]))
    assert line in text and line in p.stderr.decode(), (line, p.stderr.decode())
    assert d["checked"] == d["delivered"] + d["late"] + d["unchecked"] + d["lost"], d
    return pt, {f["key"]: f for f in pt["functions"]}


def fill_inboxes(numbered, folders=False):
    """60 messages in every user's INBOX (and, with folders, in each of its other mailboxes),
    written as `mailload init --maildir` does: with no UIDs yet unless numbered."""
    with LOCK:
        for k, user in enumerate(sorted(STORE)):
            names = sorted(STORE[user]) if folders else ["INBOX"]
            for j, name in enumerate(names):
                mb = {"uidvalidity": 7000 + 100 * k + j, "uidnext": 1,
                      "sub": STORE[user][name]["sub"] if name != "INBOX" else False,
                      "msgs": [[None, set(), b"Message-ID: <old%d.%d@fill>\r\nSubject: old"
                                b"\r\n\r\nold\r\n" % (j, i)] for i in range(60)]}
                if numbered:
                    number(mb)
                STORE[user][name] = mb


def test_probes_find_every_delivery():
    """Only the probes read INBOX (no IMAP session of users): each delivery must be found
    where a server may legitimately put it, and when it comes after an EXPUNGE."""
    for name, mode, numbered in (
            ("first-save", {"save_first": True, "late": 0.0, "expunge_old": False}, False),
            ("queue-expunge", {"save_first": False, "late": 1.5, "expunge_old": True}, True)):
        fill_inboxes(numbered)
        MODE.update(mode)
        try:
            pt, fns = run_kind(EXE, SP, IP, TMP, name, (1, 0, 0),
                               ("--set", "imap_per_hour=0"))
        finally:
            MODE.update(DEFAULT_MODE)
        d = pt["delivery"]
        assert d["delivered"] > 0, (name, d)
        assert d["lost"] == 0 and d["duplicated"] == 0, (name, d)
        assert fns["probe_fetch"]["count"] > 0, (name, fns["probe_fetch"])
        print("ok %s: %d local copies found by the probes" % (name, d["local"]))


def test_probes_in_idle():
    """Probes in IDLE at a server that says what changed before IDLE's "+": every delivery
    found, the IDLEs given news before their "+" ended by the client (#25: the probe then
    waited for its 2 s timer; that wait shows only in the probe's delivery times, which
    this server, pushing nothing in IDLE, does not make meaningful)."""
    fill_inboxes(True)
    MODE.update({"idle": True, "late": 0.5})
    IDLE_NEWS["n"] = 0
    try:
        pt, fns = run_kind(EXE, SP, IP, TMP, "idle", (1, 0, 0), ("--set", "imap_per_hour=0"))
    finally:
        MODE.update(DEFAULT_MODE)
    d = pt["delivery"]
    assert d["delivered"] > 0, d
    assert d["lost"] == 0 and d["duplicated"] == 0, d
    assert fns["probe_idle"]["count"] > 0, fns.get("probe_idle")
    assert IDLE_NEWS["n"] > 0, "no IDLE had news before its +"
    print("ok idle: %d IDLEs had news before the +, %d delivered" % (IDLE_NEWS["n"],
                                                                      d["delivered"]))


def test_any_server():
    """Users named by a users file (login, password, address; two domains), and the server
    disclosed: a heron.conf's non-default keys (secrets withheld) and workers, a process tree's
    pinning and CPU, the notes."""
    users, conf, notes = (os.path.join(TMP, n) for n in ("users.txt", "sut.conf", "notes.txt"))
    with open(users, "w") as f:
        f.write("# login password address\n")
        for i in range(1, 5):
            f.write("u%d pw%d u%d@%s.heron.test\n" % (i, i, i, "ab"[i % 2]))
    with open(conf, "w") as f:
        f.write("[mtad]\nworkers = 3\n[imapd]\nworkers = 2\nmax_connections = 20000\n"
                "[directory]\nbind_password_file = /etc/secret\n")
    with open(notes, "w") as f:
        f.write("  noatime on the store's file system\n")
    p = mailload(EXE, SP, IP, "init", "--users-file", users)
    assert p.returncode == 0, p.stderr.decode()
    assert "MailloadFill" in STORE["u1"], STORE["u1"].keys()  # the record: user 1 is u1
    assert {"u1", "u2", "u3", "u4"} <= set(STORE), STORE.keys()
    pt, fns = run_kind(EXE, SP, IP, TMP, "users-file", (1, 0, 0),
                       ("--users-file", users, "--set", "rcpt_local=1", "--sut-config", conf,
                        "--sut-pid", str(os.getpid()), "--sut-version", "Heron test",
                        "--notes", notes))
    d, r = pt["delivery"], LAST["report"]
    assert d["delivered"] > 0 and d["lost"] == 0 and d["unchecked"] == 0, d
    mail = b"".join(m[2] for u in ("u1", "u2", "u3", "u4") for m in STORE[u]["INBOX"]["msgs"])
    assert b"@a.heron.test" in mail and b"@b.heron.test" in mail, "addresses from the file"
    sc = r["sut"]["config"]
    assert sc["kind"] == "heron.conf" and sc["mtad_workers"] == 3, sc
    assert sc["non_default"]["mtad.workers"] == "3", sc
    assert sc["non_default"]["directory.bind_password_file"] == "(not disclosed)", sc
    assert "python" in sc["cpu_pinning"] and "CPUs " in sc["cpu_pinning"], sc
    assert r["notes"].strip() == "noatime on the store's file system", r["notes"]
    assert pt["sut_cpu"]["cpu_s"] >= 0 and pt["sut_cpu"]["messages"] > 0, pt["sut_cpu"]
    p = mailload(EXE, SP, IP, "run", "--rate", "1", "--report", os.path.join(TMP, "bad"),
                 "--user-format", "u%s")
    assert p.returncode == 2, p.stderr
    print("ok users file in two domains, server disclosed:", sorted(sc["non_default"]))


def test_two_agents():
    """Two agents in their own processes on their own ports, as on two hosts, driven by one
    manager: the merged report counts every message the server acknowledged, each agent's
    machine and clock offset are disclosed, and copies one agent sent to the other's users are
    all found (the sightings of both merge)."""
    secret = os.path.join(TMP, "agents.secret")
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"two agents on two hosts, one secret 0123456789\n")
    os.close(fd)
    ports = [free_port(), free_port()]
    agents = [subprocess.Popen([EXE, "agent", "--listen", "127.0.0.1:%d" % p, "--secret-file",
                                secret], stderr=subprocess.DEVNULL) for p in ports]
    try:
        for p in ports:  # listening?
            for _ in range(200):
                try:
                    socket.create_connection(("127.0.0.1", p), timeout=5).close()
                    break
                except OSError:
                    time.sleep(0.05)
        with LOCK:
            before = ACKED["n"]
        pt, fns = run_kind(EXE, SP, IP, TMP, "two-agents", (1, 0, 0),
                           ("--agents", ",".join("127.0.0.1:%d" % p for p in ports),
                            "--secret-file", secret, "--set", "rcpt_local=1"))
        with LOCK:
            acked = ACKED["n"] - before
    finally:
        for a in agents:
            a.terminate()
            a.wait(10)
    assert [a["name"] for a in pt["agents"]] == ["127.0.0.1:%d" % p for p in ports], pt["agents"]
    assert all("clock_offset_ms" in a and a["kernel"] for a in pt["agents"]), pt["agents"]
    m, d = pt["messages"], pt["delivery"]
    assert m["submitted"] + m["incoming"] == acked, (m, acked)
    assert d["checked"] > 0 and d["lost"] == 0 and d["unchecked"] == 0, d
    print("ok two agents: %d messages acknowledged, all %d merged; %d copies, none lost"
          % (acked, m["submitted"] + m["incoming"], d["checked"]))


def test_fill_record_checked():
    """init records its seed, profile and users in user1's MailloadFill folder; run refuses a
    fill that does not match (with the command that fixes it) unless --force, and the report
    says which."""
    recs = STORE["user1"]["MailloadFill"]["msgs"]
    assert len(recs) == 1 and b"X-Mailload-Fill: seed=7; profile=tiny;" in recs[0][2], recs
    assert b"users=4;" in recs[0][2], recs[0][2]
    rep = os.path.join(TMP, "wrong-seed")
    p = mailload(EXE, SP, IP, "run", "--rate", "0.02", "--phases", "1/2/1", "--load-points",
                 "100", "--report", rep, "--seed", "8")
    err = p.stderr.decode()
    assert p.returncode == 2 and "do not match" in err and "the seed (filled 7" in err, err
    assert "mailload init --target 127.0.0.1" in err and "--seed 8" in err, err
    assert not os.path.exists(os.path.join(rep, "report.json"))
    p = mailload(EXE, SP, IP, "run", "--rate", "0.02", "--phases", "1/2/1", "--load-points",
                 "100", "--report", rep, "--users", "5")
    assert p.returncode == 2 and "the users (4 filled" in p.stderr.decode(), p.stderr.decode()
    p = mailload(EXE, SP, IP, "run", "--rate", "0.02", "--phases", "1/2/1", "--load-points",
                 "100", "--report", rep, "--seed", "8", "--force", "--drain", "2")
    assert p.returncode in (0, 1, 3), p.stderr.decode()
    with open(os.path.join(rep, "report.json")) as f:
        fill = json.load(f)["fill"]
    assert fill["status"] == "forced" and "do NOT match" in fill["text"], fill
    with open(os.path.join(rep, "report.txt")) as f:
        assert "mailboxes: do NOT match" in f.read()
    print("ok fill record: a different seed or more users refused, --force noted")


def test_verdicts_stay_true():
    """Only the probes read INBOX. A server too slow for the probe's window gets late copies,
    not lost ones; a copy put under a UID the client had seen is found by the reconciliation
    and named; copies of a user nobody can log in as are unchecked (invalid run), not lost;
    too few samples make the run invalid, and a search that finds no passing rate says so."""
    only_probes = ("--set", "imap_per_hour=0", "--set", "rcpt_local=1")
    fill_inboxes(True)
    MODE.update({"late": 3.0})
    try:  # delivered 3 s after the 250, the probes watch for 1 s only
        pt, fns = run_kind(EXE, SP, IP, TMP, "overloaded", (1, 0, 0),
                           only_probes + ("--probe-window", "1", "--drain", "6"))
    finally:
        MODE.update(DEFAULT_MODE)
    d = pt["delivery"]
    assert d["lost"] == 0 and d["duplicated"] == 0 and d["unchecked"] == 0, d
    assert d["late"] > 0 and d["late"] == d["local"], d
    assert all(c["delivery_s"] >= 2.5 and c["how"] for c in d["late_copies"]), d["late_copies"]
    assert d["probes"]["expired_unprobed"] == 0, d["probes"]  # watched, just too early
    assert d["probes"]["queue"]["count"] > 0, d["probes"]
    print("ok overloaded: %d late, 0 lost of %d local copies" % (d["late"], d["local"]))

    fill_inboxes(True)
    MODE.update({"below": True})
    try:
        pt, fns = run_kind(EXE, SP, IP, TMP, "below", (1, 0, 0), only_probes, codes=(1, 3))
    finally:
        MODE.update(DEFAULT_MODE)
    d = pt["delivery"]
    assert d["lost"] == 0 and d["reconciliation"]["below_covered_uid"] > 0, d
    assert any("under a UID already covered" in c["how"] for c in d["late_copies"]), d
    assert not pt["pass"] and any("UID" in r for r in pt["reasons"]), pt["reasons"]
    print("ok below: %d copies under a covered UID found by the reconciliation"
          % d["reconciliation"]["below_covered_uid"])

    fill_inboxes(True)
    MODE.update({"refuse": ("user3",)})
    try:
        pt, fns = run_kind(EXE, SP, IP, TMP, "unreadable", (1, 0, 0), only_probes, codes=(3,))
    finally:
        MODE.update(DEFAULT_MODE)
    d = pt["delivery"]
    assert d["lost"] == 0 and d["unchecked"] > 0, d
    assert all(c["rcpt"].startswith("user3@") for c in d["unchecked_copies"]), d
    assert pt["verdict"] == "INVALID" and pt["invalid_reasons"], pt
    # the probes' failed logins are not workload errors (the users' own APPEND sessions are)
    logins = sum(t["count"] for t in pt["errors"]["top"] if t["function"] == "imap_login")
    assert pt["errors"]["failed"] == logins and pt["errors"]["probe_failed"] > 0, pt["errors"]
    print("ok unreadable: %d copies unchecked, 0 lost, run invalid" % d["unchecked"])

    pt, fns = run_kind(EXE, SP, IP, TMP, "short", (1, 0, 0), codes=(3,), min_samples="73")
    assert pt["verdict"] == "INVALID", pt
    assert any("73 required (too short)" in r for r in pt["invalid_reasons"]), pt
    print("ok short:", pt["invalid_reasons"][0])
    rep = os.path.join(TMP, "search")
    p = mailload(EXE, SP, IP, "search", "--from", "0.01", "--to", "0.02", "--steps", "2",
                 "--phases", "1/3/1", "--drain", "5", "--report", rep)
    assert p.returncode == 1, (p.returncode, p.stderr.decode())
    assert b"no rate passed" in p.stderr and b"2 invalid" in p.stderr, p.stderr.decode()
    assert b"highest" not in p.stdout, p.stdout
    print("ok search: no rate passed, exit 1")


def test_search_repeats():
    """A point whose interval straddles the limit is run again, up to three runs, and the
    majority decides: pass, fail, pass is a pass; pass, fail, fail is not. With a few dozen
    samples per function every passing point straddles 95% (Wilson), so the first run of each
    search is repeated; the fake server makes the second (and third) run fail."""
    # every folder refilled: cleanup sessions store \Deleted only in a non-empty folder other
    # than INBOX, and earlier runs' cleanups expunge them; an empty one gives no sample of
    # IMAP STORE_NUM_SET_FLAGS_DELETED and makes a run invalid
    fill_inboxes(True, folders=True)
    busy = ("--set", "imap_per_hour=3600", "--set", "send_per_hour=1200",
            "--set", "recv_per_hour=1200", "--set", "check_delete=0.5",
            "--set", "rcpt_local=1",
            "--set", "mix_check=0.4", "--set", "mix_sync=0.3", "--set", "mix_cleanup=0.3")
    for name, fail_runs, want in (("majority-pass", (2,), ["PASS", "FAIL", "PASS"]),
                                  ("majority-fail", (2, 3), ["PASS", "FAIL", "FAIL"])):
        # a run the fake server does not fail can still miss a 5 s limit when the machine is
        # overloaded (the sanitizer suite runs four tests at a time); such a run fails on
        # latency alone, never on the error rate the refusals cause: the scenario is then
        # tried once more, and a second miss fails the test
        for attempt in (1, 2):
            if attempt > 1:
                fill_inboxes(True, folders=True)
            got, why, p, err = search_scenario(busy, name, attempt, fail_runs)
            loaded = [i for i, (g, w) in enumerate(zip(got, want))
                      if g != w and w == "PASS" and why[i] is not None
                      and not any("Error Rate" in r for r in why[i][0] or [])]
            if got == want or attempt == 2 or not loaded:
                break
            print("note: %s attempt 1: run(s) %s failed on latency alone (%s); again" %
                  (name, [i + 1 for i in loaded], why))
        assert got == want, (name, got, why, err)
        assert err.count("its interval straddles the limit") >= 2, err
        assert "running 0.02 msgs/min again before deciding" in err, err
        if want.count("PASS") >= 2:
            assert p.returncode == 0, (p.returncode, err)
            assert b"highest valid passing rate: 0.02 msgs/min" in p.stdout, p.stdout
        else:
            assert p.returncode == 1 and "no rate passed" in err and "1 failed" in err, err
            assert b"highest" not in p.stdout, p.stdout
        print("ok search %s: runs %s" % (name, ", ".join(got)))


def search_scenario(busy, name, attempt, fail_runs):
    """One search of test_search_repeats; the verdicts and reasons of its three runs."""
    rep = os.path.join(TMP, "%s-%d" % (name, attempt))
    with LOCK:
        del RUNS[:]
        MODE["fail_runs"] = fail_runs
    try:
        # 10 s measured: a slow (sanitizer) build under a busy CI still gets a sample of
        # every summary function in each run, so no run is invalid for want of one
        p = mailload(EXE, SP, IP, "search", "--from", "0.02", "--to", "0.02", "--steps", "1",
                     "--phases", "1/10/1", "--drain", "10", "--min-samples", "1",
                     "--report", rep, *busy)
    finally:
        MODE.update(DEFAULT_MODE)
    got, why = [], []
    for d in ("rate-0.0", "rate-0.0-run2", "rate-0.0-run3"):
        try:
            with open(os.path.join(rep, d, "report.json")) as f:
                r = json.load(f)
            got.append(r["verdict"])
            why.append([r["points"][0].get(k) for k in ("reasons", "invalid_reasons")])
        except OSError:
            got.append(None)
            why.append(None)
    return got, why, p, p.stderr.decode()


def test_init_fills_and_resumes():
    p = mailload(EXE, SP, IP, "init")
    assert p.returncode == 0, p.stderr.decode()
    assert set(STORE) == {"user1", "user2", "user3", "user4"}, STORE.keys()
    total = sum(len(mb["msgs"]) for u in STORE.values() for mb in u.values())
    assert total > 20, total
    # resumable and deterministic: a second init adds nothing
    p = mailload(EXE, SP, IP, "init")
    assert p.returncode == 0, p.stderr.decode()
    assert total == sum(len(mb["msgs"]) for u in STORE.values() for mb in u.values())


def test_session_kinds():
    """One run per IMAP session kind: samples of each of its functions, no errors, nothing
    lost or duplicated."""
    need = {
        "check": ((1, 0, 0), ["smtp_connect", "smtp_data", "imap_append", "imap_connect",
                              "imap_select_inbox", "imap_uid_fetch_hdr", "imap_fetch_body",
                              "imap_uid_store_seen", "imap_uid_store_deleted",
                              "imap_expunge", "imap_login", "imap_logout"]),
        "sync": ((0, 1, 0), ["imap_list", "imap_lsub", "imap_select_inbox",
                             "imap_fetch_hdr", "imap_select_folder"]),
        "cleanup": ((0, 0, 1), ["imap_select_folder", "imap_store_deleted",
                                "imap_expunge"]),
    }
    for name, (mix, keys) in need.items():
        pt, fns = run_kind(EXE, SP, IP, TMP, name, mix)
        for k in keys:
            assert fns[k]["count"] > 0, (name, k, fns[k])
        bad = {k: f["errors"] for k, f in fns.items() if f["errors"]}
        assert not bad, (name, bad, pt["errors"]["top"])
        d = pt["delivery"]
        assert d["lost"] == 0 and d["duplicated"] == 0, (name, d)
        assert d["delivered"] > 0, (name, d)
        print("ok %s: %d steps, %d deliveries checked" % (name, pt["errors"]["steps"],
                                                        d["checked"]))


def test_session_cap_fits_descriptors():
    """A session cap beyond what the descriptor limit can hold (even raised to fs.nr_open)
    shrinks to fit with a warning, so no connect fails with EMFILE as if the server had."""
    pt, fns = run_kind(EXE, SP, IP, TMP, "fdcap", (1, 0, 0),
                       ("--set", "max_sessions=100000000"))
    err = LAST["stderr"]
    assert "descriptors (ulimit -n): session cap" in err and "instead of max_sessions 100000000" in err, err
    top = [t["message"] for t in pt["errors"]["top"]]
    assert not any("Too many open files" in t or "session cap" in t for t in top), top
    assert pt["delivery"]["lost"] == 0, pt["delivery"]


def test_uidvalidity_change_reported():
    """A server that changes UIDVALIDITY under the client is caught, and the report
    re-renders from its JSON."""
    LIE["uidvalidity"] = True
    try:
        pt, fns = run_kind(EXE, SP, IP, TMP, "lie", (1, 0, 0))
    finally:
        LIE["uidvalidity"] = False
    top = [t["message"] for t in pt["errors"]["top"]]
    assert any("UIDVALIDITY changed" in t for t in top), top
    assert pt["pass"] is False and any("Error Rate" in r for r in pt["reasons"]), pt
    print("contradiction reported:", [t for t in top if "contradiction" in t][:1])
    p = subprocess.run([EXE, "report", os.path.join(TMP, "lie")], stdout=subprocess.PIPE,
                       timeout=30)
    assert p.returncode == 0 and b"contradiction: UIDVALIDITY changed" in p.stdout


EXE = os.path.abspath(sys.argv[1])
TMP = tempfile.mkdtemp(prefix="heron-mailload-test-")
SERVERS = [serve(SMTP), serve(IMAP)]
SP, IP = (s.server_address[1] for s in SERVERS)


def close_servers():
    for s in SERVERS:
        s.shutdown()
        s.server_close()


def main():
    # in this order: each test goes on from the store the ones before it left
    return run_main(lambda: run_tests([test_init_fills_and_resumes, test_fill_record_checked,
                                       test_any_server, test_two_agents, test_session_kinds,
                                       test_uidvalidity_change_reported,
                                       test_session_cap_fits_descriptors,
                                       test_probes_find_every_delivery, test_probes_in_idle,
                                       test_verdicts_stay_true, test_search_repeats]),
                    TMP, [], cleanup=[close_servers])


if __name__ == "__main__":
    sys.exit(main())
