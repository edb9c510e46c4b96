#!/usr/bin/env python3
"""test_datacentre.py — Heron in scripts/cluster's network namespaces (issue #25): `up DIR
--stores 2 --daemons` starts a slapd provider (ldap), a syncrepl consumer in each Heron host,
mtad and imapd on each store host, the front's mtad (25, 587) and proxy imapd, and the sink;
the clients run in the client namespaces (client 198.18.0.50, client2 .51), the test's own
sockets opened there with setns(2). Checked: users of both store hosts log in through the front
(imaplib); mail from the client to users of both hosts arrives exactly once (the front's queue
empty, one copy each); mail between users of different hosts (submission on the front, and port
25 of a store host); mail out through the front to the sink, once; IDLE through the front sees
a delivery on the store host; mbsync syncs a user of each store host through the front into a
local Maildir, and after new mail a second sync fetches only the new message; mailload's
manager (client) drives one agent in each client namespace through the front in a short run of
4 users, which reports nothing lost or duplicated; in another such run a user of store1 is
moved to store2 (mailctl user move --via `ip netns exec` into store2's namespace, --finish once
every replica has the flip) and back (--to), and the
run loses and duplicates nothing, its model of the user's mailboxes is never contradicted and
the INBOX's UIDVALIDITY is kept; a proxy login with the right secret from the client's address
is refused by the store host and accepted from the front's (198.18.0.10); a store host
answering garbage to the front is cut off with NO [UNAVAILABLE]; with store1's mtad and imapd
killed (-9) its users get NO [UNAVAILABLE] at login and their mail is queued on the front,
deferred (not bounced), and arrives once when store1 is started again, while store2's users are
served throughout; with store1's link down (connections time out, nothing refuses) the same,
after the front's proxy_timeout; `start` of a host that runs is refused and leaves its daemons
alone; with the slapd provider stopped, logins and deliveries go on from each host's consumer,
which catches up when it is back (a password changed on the provider is the front's). `down`
leaves no process and no namespace. Needs root (CAP_NET_ADMIN): otherwise exit 77 (skip).

  test_datacentre.py SOURCE_ROOT MTAD IMAPD SINK STORE_PEEK"""
import base64
import ctypes
import imaplib
import json
import os
import signal
import smtplib
import socket
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Daemon, Store, alive, assert_eq, assert_in,  # noqa: E402
                      after_test, assert_not_in, assert_raises, children, end_process,
                      processes_with, read_env, run_main, run_tests, skip, ssha, wait_for)

ROOT, MTAD, IMAPD, SINK, PEEK = sys.argv[1:6]
BUILD = os.path.dirname(os.path.dirname(os.path.abspath(MTAD)))
CLUSTER = os.path.join(ROOT, "scripts", "cluster")
FRONT, STORE = "198.18.0.10", {1: "198.18.0.21", 2: "198.18.0.22"}
CLIENTS = {"client": "198.18.0.50", "client2": "198.18.0.51"}
SENDER = "x@ext.heron.test"
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def home(user):
    """scripts/ldap --hosts: user1 on store1, user2 on store2, user3 on store1, ..."""
    return 1 if int(user[4:]) % 2 else 2


def setns(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, f"setns {path}: {os.strerror(e)}")
    finally:
        os.close(fd)


class Netns:
    """with Netns(ns): the calling thread's sockets are made in namespace ns (setns(2) is per
    thread); the thread's own namespace is back on leaving."""

    def __init__(self, ns):
        self.ns = ns

    def __enter__(self):
        self.home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        setns(f"/run/netns/{self.ns}")
        return self

    def __exit__(self, *exc):
        try:
            if _libc.setns(self.home, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")
        finally:
            os.close(self.home)
        return False


def cluster(*args, check=True, timeout=300):
    r = subprocess.run([CLUSTER, *args], stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"scripts/cluster {' '.join(args)}: {r.returncode}\n"
                             f"{r.stdout}{r.stderr}")
    return r


def msg(subject, to="somebody"):
    return (f"From: <{SENDER}>\r\nTo: <{to}>\r\nSubject: {subject}\r\n"
            f"Message-ID: <{subject}@ext.heron.test>\r\n\r\nbody of {subject}\r\n")


class DC:
    """The data centre in DIR: its namespaces, stores and logs."""

    def __init__(self, d):
        self.dir = d
        self.ns = {}

    def load_hosts(self):
        with open(os.path.join(self.dir, "hosts")) as f:
            for line in f:
                h, ns, _a = line.split()
                self.ns[h] = ns

    def conf(self, host):
        return os.path.join(self.dir, "h", host, "heron.conf")

    def store(self, host):
        return Store(PEEK, self.conf(host))

    def pid(self, host, name):
        with open(os.path.join(self.dir, "h", host, name + ".pid")) as f:
            return int(f.read())

    def subjects(self, user):
        """Subjects in user's INBOX on the user's own store host, in UID order."""
        st = self.store(f"store{home(user)}")
        out = []
        for uid, _blob, _size in st.inbox(user):
            for line in st.body(user, uid).split(b"\r\n"):
                if line.startswith(b"Subject: "):
                    out.append(line[9:].decode())
                    break
        return out

    def queue(self, host="front"):
        return self.store(host).queue()

    def logs(self):
        """Log-only Daemon objects (never started) for run_main: tails shown on failure,
        sanitizer reports fail the test."""
        out = []
        hd = os.path.join(self.dir, "h")
        for host in sorted(os.listdir(hd)) if os.path.isdir(hd) else []:
            for name in ("mtad", "imapd", "sink"):
                log = os.path.join(hd, host, name + ".log")
                if os.path.exists(log):
                    d = Daemon(name, self.conf(host), log, 0)
                    d.name = f"{host}/{name}"
                    out.append(d)
        return out


def main():
    if os.geteuid() != 0 or subprocess.run(["unshare", "-n", "true"],
                                           capture_output=True).returncode != 0:
        skip("test_datacentre: needs root with CAP_NET_ADMIN")
    tmp = tempfile.mkdtemp(prefix="heron-dc-")
    dc = DC(os.path.join(tmp, "dc"))
    logs = []

    def client():
        return Netns(dc.ns["client"])

    def imap_front(user, password=None):
        with client():
            c = imaplib.IMAP4(FRONT, 143, timeout=30)
        c.login(user, password or user)
        return c

    def send(to, subject, host=FRONT, port=25, auth=None, sender=SENDER):
        with client():
            s = smtplib.SMTP(host, port, timeout=30)
        with s:
            if auth:
                s.login(auth, auth)
            assert_eq(s.sendmail(sender, [f"{u}@{DOMAIN}" for u in to],
                                 msg(subject, ",".join(to))), {})

    def settled():
        """The front's queue is empty: every message it took is delivered (or bounced)."""
        wait_for(lambda: dc.queue() == [], 60, "the front's queue to empty")

    def test_login_through_front_to_each_host():
        for user in ("user1", "user2"):
            c = imap_front(user)
            typ, _ = c.select("INBOX")
            assert_eq(typ, "OK")
            c.logout()
        for host, user in (("store1", "user1"), ("store2", "user2")):
            text = open(os.path.join(dc.dir, "h", host, "imapd.log")).read()
            # the front's proxy connections leave from its one address, and name the
            # client's (x-originating-ip), which the store host logs the login with
            assert_in(f"imap id from={FRONT} originating={CLIENTS['client']} ", text)
            assert_in(f"addr={CLIENTS['client']} user={user} via=proxy result=ok", text)
        with client():
            c = imaplib.IMAP4(FRONT, 143, timeout=30)
        with assert_raises(imaplib.IMAP4.error) as e:
            c.login("user1", "wrong")
        assert_in("AUTHENTICATIONFAILED", str(e.exception))
        c.logout()

    def test_mail_to_both_hosts_exactly_once():
        send(["user3", "user4"], "to-both")
        wait_for(lambda: "to-both" in dc.subjects("user3") and
                 "to-both" in dc.subjects("user4"), 60, "to-both on both hosts")
        settled()
        assert_eq(dc.subjects("user3").count("to-both"), 1)
        assert_eq(dc.subjects("user4").count("to-both"), 1)
        # each copy in its own host's store only
        assert_eq(dc.store("store2").inbox("user3"), [])
        assert_eq(dc.store("store1").inbox("user4"), [])
        # and seen through the front
        c = imap_front("user4")
        c.select("INBOX", readonly=True)
        typ, data = c.search(None, 'SUBJECT "to-both"')
        assert_eq((typ, len(data[0].split())), ("OK", 1))
        c.logout()

    def test_mail_between_hosts():
        # user1 (store1) submits on the front to user2 (store2)
        send(["user2"], "one-to-two", port=587, auth="user1", sender=f"user1@{DOMAIN}")
        # user2's host takes mail on its own port 25 for user1, relayed to store1 by LMTP
        send(["user1"], "two-to-one", host=STORE[2])
        wait_for(lambda: "one-to-two" in dc.subjects("user2"), 60, "one-to-two")
        wait_for(lambda: "two-to-one" in dc.subjects("user1"), 60, "two-to-one")
        settled()
        wait_for(lambda: dc.queue("store2") == [], 60, "store2's queue to empty")
        assert_eq(dc.subjects("user2").count("one-to-two"), 1)
        assert_eq(dc.subjects("user1").count("two-to-one"), 1)

    def sink_ids():
        """Message-IDs of what the sink took (its control port, from the client)."""
        with client():
            s = socket.create_connection(("198.18.0.40", 26), timeout=10)
        with s:
            f = s.makefile("rwb")
            f.write(b'{"cmd": "records", "since": 0}\n')
            f.flush()
            ids = []
            while "ok" not in (rec := json.loads(f.readline(1 << 20) or b'{"ok": false}')):
                ids.append(rec.get("id"))
            assert rec["ok"] is True, rec
            return ids

    def test_mail_out_through_the_front_to_the_sink():
        # user2 (store2) submits on the front to the external domain: the front relays it to
        # the sink (transport_map), once
        with client():
            s = smtplib.SMTP(FRONT, 587, timeout=30)
        with s:
            s.login("user2", "user2")
            assert_eq(s.sendmail(f"user2@{DOMAIN}", ["far@ext.heron.test"],
                                 msg("to-ext", "far@ext.heron.test")), {})
        want = "<to-ext@ext.heron.test>"
        wait_for(lambda: want in sink_ids(), 60, "to-ext at the sink")
        settled()
        assert_eq(sink_ids().count(want), 1)

    def test_idle_through_front_sees_delivery():
        c = imap_front("user5")
        c.select("INBOX")
        tag = c._new_tag().decode()
        c.send(f"{tag} IDLE\r\n".encode())
        assert c.readline().startswith(b"+"), "no IDLE continuation"
        send(["user5"], "while-idle")
        c.sock.settimeout(60)
        line = c.readline()
        assert line.endswith(b"EXISTS\r\n"), line
        c.send(b"DONE\r\n")
        while not (line := c.readline()).startswith(tag.encode()):
            pass
        assert_in(b"OK", line)
        c.logout()

    def mbsync_rc(user):
        """An mbsync config syncing user's INBOX through the front into DIR/mbsync/USER."""
        d = os.path.join(tmp, "mbsync", user)
        os.makedirs(os.path.join(d, "mail"), exist_ok=True)
        rc = os.path.join(d, "rc")
        with open(rc, "w") as f:
            f.write(f"""IMAPAccount a
Host {FRONT}
Port 143
User {user}
Pass "{user}"
SSLType None
AuthMechs LOGIN

IMAPStore a-remote
Account a

MaildirStore a-local
Path {d}/mail/
Inbox {d}/mail/INBOX

Channel a
Far :a-remote:
Near :a-local:
Patterns INBOX
Create Near
SyncState *
""")
        return rc, os.path.join(d, "mail", "INBOX")

    def mbsync(rc):
        """mbsync -a in the client namespace; its debug log (every IMAP command sent)."""
        p = subprocess.run(["ip", "netns", "exec", dc.ns["client"], "mbsync", "-D", "-c", rc,
                            "-a"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=120)
        log = p.stdout + p.stderr
        assert_eq(p.returncode, 0, log[-3000:])
        assert_not_in("Error", log, log[-3000:])
        return log

    def maildir(inbox):
        """{file name without its flags: contents} of a Maildir's cur/ and new/."""
        out = {}
        for sub in ("cur", "new"):
            for name in os.listdir(os.path.join(inbox, sub)):
                with open(os.path.join(inbox, sub, name), "rb") as f:
                    out[name.split(":", 1)[0]] = f.read()
        return out

    def body_fetches(log):
        """The messages mbsync fetched: its commands asking for a whole message."""
        return [line for line in log.splitlines()
                if ">>> " in line and "BODY.PEEK[]" in line]

    def test_mbsync_through_front():
        # a user of each store host syncs INBOX through the front into a local Maildir; after
        # new mail a second sync fetches only the new message, with no error
        for user in ("user1", "user2"):
            send([user], f"mbsync-first-{user}")
            wait_for(lambda: f"mbsync-first-{user}" in dc.subjects(user), 60, "first copy")
            rc, inbox = mbsync_rc(user)
            mbsync(rc)
            first = maildir(inbox)
            n = len(dc.subjects(user))
            assert_eq(len(first), n, (user, sorted(first)))
            assert any(f"Subject: mbsync-first-{user}".encode() in m
                       for m in first.values()), user
            send([user], f"mbsync-second-{user}")
            wait_for(lambda: f"mbsync-second-{user}" in dc.subjects(user), 60, "new copy")
            log = mbsync(rc)
            fetched = body_fetches(log)
            assert_eq(len(fetched), 1, (user, fetched))
            second = maildir(inbox)
            new = set(second) - set(first)
            assert_eq(len(new), 1, (user, sorted(second)))
            assert_in(f"Subject: mbsync-second-{user}".encode(), second[new.pop()])
            # what was there before is untouched
            assert_eq({k: second[k] for k in first}, first)
            # and its store host saw the front's proxy login for this sync, from the client
            text = open(os.path.join(dc.dir, "h", f"store{home(user)}", "imapd.log")).read()
            assert_in(f"addr={CLIENTS['client']} user={user} via=proxy result=ok", text)

    def mailload_cmd(*args):
        """BUILD's mailload in the client namespace against the front, quiet."""
        return ["ip", "netns", "exec", dc.ns["client"], os.path.join(BUILD, "mailload",
                "mailload"), *args, "--target", FRONT, "--domain", DOMAIN, "--ext-domain",
                "ext.heron.test", "-q"]

    def agent(host, secret):
        """`mailload agent` on host:1200 in its client namespace (its pid closed after the
        test, passed or failed), once it listens."""
        addr = CLIENTS[host]
        with open(os.path.join(tmp, f"agent-{host}.log"), "a") as log:
            p = subprocess.Popen(["ip", "netns", "exec", dc.ns[host],
                                  os.path.join(BUILD, "mailload", "mailload"), "agent",
                                  "--listen", f"{addr}:1200", "--secret-file", secret],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=log)
        after_test(end_process, p)

        def listens():
            with Netns(dc.ns[host]):
                s = socket.socket()
            with s:
                s.settimeout(2)
                return s.connect_ex((addr, 1200)) == 0
        wait_for(lambda: p.poll() is None and listens(), 30, f"mailload agent on {host}")
        return f"{addr}:1200"

    ml_users = "4"  # user1..user4: two on each store host

    def agents_run(report, phases):
        """An agent in each client namespace and the manager's command line driving them:
        a bounded run of ml_users users at a few messages a minute, the sink checked."""
        secret = os.path.join(dc.dir, "agents.secret")
        if not os.path.exists(secret):
            fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, base64.b16encode(os.urandom(24)) + b"\n")
            os.close(fd)
        agents = [agent(h, secret) for h in CLIENTS]
        return agents, mailload_cmd(
            "run", "--rate", "0.02", "--users", ml_users, "--profile", "tiny", "--seed", "3",
            "--phases", phases, "--load-points", "100", "--drain", "30",
            "--sink", "198.18.0.40:26", "--report", report, "--agents", ",".join(agents),
            "--secret-file", secret, "--set", "send_per_hour=360",
            "--set", "recv_per_hour=360", "--set", "imap_per_hour=360",
            "--set", "rcpt_local=0.8")

    def agents_point(report, agents, rc, err):
        """The run's one load point: both agents merged, nothing lost, duplicated or left
        unchecked."""
        # 3: invalid (too few samples in so short a run): a verdict all the same
        assert rc in (0, 1, 3), f"rc {rc}\n{err[-3000:]}"
        with open(os.path.join(report, "report.json")) as f:
            pt = json.load(f)["points"][0]
        assert_eq([a["name"] for a in pt["agents"]], agents)
        d, m = pt["delivery"], pt["messages"]
        print("mailload:", json.dumps(m), json.dumps({k: d[k] for k in (
            "checked", "delivered", "late", "unchecked", "lost", "duplicated", "local",
            "remote")}), flush=True)
        assert m["submitted"] > 0 and m["incoming"] > 0, m
        assert d["checked"] > 0 and d["local"] > 0, d
        assert_eq((d["lost"], d["duplicated"], d["unchecked"]), (0, 0, 0), d)
        with open(os.path.join(report, "report.txt"), errors="replace") as f:
            assert_in(" 0 lost, 0 duplicated", f.read())
        return pt

    def test_mailload_agents_in_two_clients():
        # mailload's manager in the client namespace drives one agent in each client
        # namespace through the front: a short, bounded run at a low rate; nothing
        # acknowledged is lost or delivered twice
        r = subprocess.run(mailload_cmd("init", "--users", ml_users, "--profile", "tiny",
                                        "--seed", "3", "--local-agents", "1"),
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           errors="replace", timeout=300)
        assert_eq(r.returncode, 0, r.stdout[-2000:] + r.stderr[-3000:])
        report = os.path.join(tmp, "mailload-report")
        agents, cmd = agents_run(report, "3/20/3")
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           errors="replace", timeout=300)
        agents_point(report, agents, r.returncode, r.stderr)
        settled()

    def wait_sync(host):
        """Until host's slapd consumer has what the provider has."""
        subprocess.run(["ip", "netns", "exec", dc.ns[host], sys.executable,
                        os.path.join(ROOT, "scripts", "ldap"), "wait-sync",
                        os.path.join(dc.dir, "h", host, "slapd")], check=True, timeout=120)

    def mailctl(host, *args, rc=0):
        """BUILD's mailctl --json in host's namespace with its heron.conf; its JSON."""
        r = subprocess.run(["ip", "netns", "exec", dc.ns[host],
                            os.path.join(BUILD, "mailctl", "mailctl"), "-c", dc.conf(host),
                            "--json", *args], stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=300)
        assert_eq(r.returncode, rc, f"mailctl {' '.join(args)}: {r.stdout}{r.stderr}")
        return json.loads(r.stdout) if r.stdout.strip() else None

    def move(user, src, dst, via=False):
        """mailctl user move from src to dst on the provider, then --finish; via: the copy
        streamed into mailctl in dst's namespace (--via), else dst's store opened (--to)."""
        target = (("--via", f"ip netns exec {dc.ns[dst]} "
                   f"{os.path.join(BUILD, 'mailctl', 'mailctl')} -c {dc.conf(dst)}")
                  if via else ("--to", dc.conf(dst)))
        args = ("user", "move", user, f"{dst}.{DOMAIN}", *target,
                "--provider", "ldap://198.18.0.30:389/")
        doc = mailctl(src, *args)
        assert_eq(doc["step"], "flipped")
        print(f"moved {user} {src} -> {dst}: {doc['mailboxes']} mailboxes, "
              f"{doc['messages']} messages", flush=True)
        # every host's replica has the new mailHost before the source copy goes: a login
        # routed to the source by a stale replica would find no user there
        for h in ("front", src, dst):
            wait_sync(h)
        assert_eq(mailctl(src, *args, "--finish")["step"], "done")
        mailctl(src, "user", "show", user, rc=67)  # gone from the source

    def uidvalidity(user):
        c = imap_front(user)
        typ, data = c.status("INBOX", "(UIDVALIDITY)")
        c.logout()
        assert_eq(typ, "OK")
        return data[0].split(b"UIDVALIDITY ")[1].rstrip(b")")

    def test_user_move_during_mailload():
        # user3 (store1) moves to store2 in the middle of a mailload run through the front,
        # then back: nothing acknowledged is lost or duplicated, and mailload's model of
        # user3's mailboxes (UIDVALIDITY, UIDs) is never contradicted
        before = uidvalidity("user3")
        report = os.path.join(tmp, "mailload-move")
        agents, cmd = agents_run(report, "3/30/3")
        log = os.path.join(dc.dir, "h", "front", "mtad.log")
        with open(log) as f:
            start = len(f.read())
        with open(os.path.join(tmp, "mailload-move.err"), "w") as err:
            p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=err)
        after_test(end_process, p)

        def agents_sending():
            with open(log) as f:
                return "addr=198.18.0.5" in f.read()[start:]
        wait_for(agents_sending, 60, "the agents' first SMTP sessions")
        move("user3", "store1", "store2", via=True)  # a stream between the namespaces
        try:
            rc = p.wait(timeout=300)
        finally:
            move("user3", "store2", "store1")  # back home for the tests after this one
        with open(os.path.join(tmp, "mailload-move.err"), errors="replace") as f:
            pt = agents_point(report, agents, rc, f.read())
        bad = [e for e in pt["errors"]["top"] if "contradiction" in e["message"]]
        assert_eq(bad, [])
        assert_eq(uidvalidity("user3"), before)
        settled()
        with open(os.path.join(dc.dir, "h", "store2", "imapd.log")) as f:
            print("user3's logins on store2 during the run:",
                  f.read().count("user=user3 via=proxy result=ok"), flush=True)

    def proxy_login(ns, authz, secret):
        def plain(*parts):
            return base64.b64encode("\0".join(parts).encode())
        with Netns(ns):
            s = socket.create_connection((STORE[2], 143), timeout=10)
        with s:
            f = s.makefile("rb")
            assert f.readline().startswith(b"* OK")
            s.sendall(b"a AUTHENTICATE PLAIN " + plain(authz, "heron-proxy", secret) + b"\r\n")
            return f.readline()

    def test_forged_proxy_login_refused():
        with open(os.path.join(dc.dir, "proxy.secret")) as f:
            secret = f.readline().strip()
        # the right secret from the client's address (not proxy_trusted): refused
        line = proxy_login(dc.ns["client"], f"user2@{DOMAIN}", secret)
        assert line.startswith(b"a NO [AUTHORIZATIONFAILED]"), line
        # the same from the front's address is the proxy login, and works
        line = proxy_login(dc.ns["front"], f"user2@{DOMAIN}", secret)
        assert line.startswith(b"a OK"), line
        # a wrong secret from the front: refused
        line = proxy_login(dc.ns["front"], f"user2@{DOMAIN}", "guess")
        assert line.startswith(b"a NO [AUTHORIZATIONFAILED]"), line

    def refused(addr, port):
        with client():
            s = socket.socket()
        with s:
            s.settimeout(5)
            return s.connect_ex((addr, port)) != 0

    def kill9(host, name, ports):
        """kill -9 of a daemon's master and workers; returns once its ports are closed (a
        killed worker's other threads may hold them a moment after it shows as a zombie)."""
        pid = dc.pid(host, name)
        pids = [pid] + children(pid)
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_for(lambda: not any(alive(p) for p in pids), 30, f"{host} {name} gone")
        for port in ports:
            wait_for(lambda: refused(STORE[int(host[5:])], port), 30,
                     f"{host} port {port} closed")

    def assert_unavailable(user):
        with client():
            c = imaplib.IMAP4(FRONT, 143, timeout=30)
        with assert_raises(imaplib.IMAP4.error) as e:
            c.login(user, user)
        assert_in("UNAVAILABLE", str(e.exception))
        c.logout()

    def assert_served(user):
        c = imap_front(user)
        typ, _ = c.select("INBOX")
        assert_eq(typ, "OK")
        c.logout()

    def test_garbage_store_host_cut_off():
        kill9("store2", "imapd", [143])
        with Netns(dc.ns["store2"]):
            srv = socket.create_server((STORE[2], 143))
        stop = threading.Event()

        def garbage():
            srv.settimeout(0.5)
            while not stop.is_set():
                try:
                    s, _ = srv.accept()
                except OSError:
                    continue
                with s:
                    s.sendall(b"\x00\xffHELLO garbage\r\n* OK\r\n" * 3)
                    stop.wait(0.5)
        t = threading.Thread(target=garbage, daemon=True)
        t.start()
        try:
            assert_unavailable("user2")
            assert_served("user1")
        finally:
            stop.set()
            t.join(10)
            srv.close()
        cluster("stop", dc.dir, "store2")
        cluster("start", dc.dir, "store2", "--build", BUILD)
        assert_served("user2")

    def deferred(addr):
        """addr is pending in the front's queue after at least one try (store_peek queue:
        "id <sender> rcpt:state:attempts ...")."""
        for line in dc.queue():
            for r in line.split()[2:]:
                a, _, rest = r.partition(":")
                state, _, tries = rest.partition(":")
                if a == addr and state == "0" and tries.isdigit() and int(tries) >= 1:
                    return True
        return False

    def test_store_host_down_mail_queued():
        before2 = dc.subjects("user2")
        kill9("store1", "imapd", [143])
        kill9("store1", "mtad", [24, 25])
        assert_unavailable("user1")
        assert_served("user2")
        # user2 (submission on the front) writes to user1 (store1, down) and user4 (store2):
        # user4's copy arrives, and user1's waits on the front, deferred
        send(["user1", "user4"], "while-down", port=587, auth="user2",
             sender=f"user2@{DOMAIN}")
        wait_for(lambda: "while-down" in dc.subjects("user4"), 60, "store2's copy")
        # user1's copy is pending on the front (state 0) after a failed try: deferred, not
        # failed (state 2, a bounce)
        wait_for(lambda: deferred(f"user1@{DOMAIN}"), 60, "user1's copy deferred on the front")
        assert_served("user4")
        cluster("start", dc.dir, "store1", "--build", BUILD)
        wait_for(lambda: "while-down" in dc.subjects("user1"), 60, "user1's copy")
        settled()
        assert_eq(dc.subjects("user1").count("while-down"), 1)
        assert_eq(dc.subjects("user4").count("while-down"), 1)
        # not bounced: no notice came back to the sender
        assert_eq(dc.subjects("user2"), before2)
        assert_served("user1")

    def test_start_of_a_running_host_refused():
        # `start store2` while store2 runs: refused before anything starts, the running
        # daemons keep their pid files (a second mtad used to overwrite them, failing to
        # bind, and the first was left running unrecorded)
        pids = {d: dc.pid("store2", d) for d in ("mtad", "imapd")}
        r = cluster("start", dc.dir, "store2", "--build", BUILD, check=False)
        assert_eq(r.returncode, 1, r.stderr)
        assert_in("stop store2 first", r.stderr)
        assert_eq({d: dc.pid("store2", d) for d in pids}, pids)
        assert all(alive(p) for p in pids.values()), pids
        assert_served("user2")

    def test_store_host_unreachable():
        # store1's link down: connections to it time out (no refusal), the front's login
        # gives up after proxy_timeout, its mail is deferred; back up, the mail arrives once
        ns = dc.ns["store1"]
        subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "down"], check=True)
        try:
            assert_unavailable("user3")
            assert_served("user2")
            send(["user3"], "link-down")
            wait_for(lambda: deferred(f"user3@{DOMAIN}"), 60, "user3's copy deferred")
        finally:
            subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "up"], check=True)
        wait_for(lambda: "link-down" in dc.subjects("user3"), 60, "user3's copy")
        settled()
        assert_eq(dc.subjects("user3").count("link-down"), 1)
        assert_served("user3")

    def test_directory_provider_down():
        # the ldap host's slapd (the provider) stopped: every host reads its own consumer,
        # so logins through the front and deliveries go on; started again, on its data
        cluster("stop", dc.dir, "ldap")
        try:
            assert_served("user1")
            assert_served("user2")
            send(["user1", "user2"], "provider-down")
            wait_for(lambda: "provider-down" in dc.subjects("user1") and
                     "provider-down" in dc.subjects("user2"), 60, "provider-down")
            settled()
        finally:
            cluster("start", dc.dir, "ldap", "--build", BUILD)
        assert_eq(dc.subjects("user1").count("provider-down"), 1)
        # the consumers catch up: a password changed on the provider reaches the front's
        # replica, where the front checks logins
        env = read_env(os.path.join(dc.dir, "h", "ldap", "slapd", "ldap.env"))
        ldif = (f"dn: uid=user7,{env['LDAP_PEOPLE']}\nchangetype: modify\n"
                f"replace: userPassword\nuserPassword: {ssha('seven-new')}\n")
        subprocess.run(["ip", "netns", "exec", dc.ns["ldap"], "ldapmodify", "-x", "-H",
                        env["LDAP_URI"], "-D", env["LDAP_ADMIN_DN"], "-w",
                        env["LDAP_ADMIN_PASSWORD"]], input=ldif.encode(), check=True,
                       stdout=subprocess.DEVNULL, timeout=60)
        wait_sync("front")
        c = imap_front("user7", "seven-new")
        c.logout()
        with client():
            c = imaplib.IMAP4(FRONT, 143, timeout=30)
        with assert_raises(imaplib.IMAP4.error):
            c.login("user7", "user7")
        c.logout()

    def down():
        """`down` stops every daemon and removes every namespace; the failures, listed."""
        r = cluster("down", dc.dir, check=False)
        bad = [] if r.returncode == 0 else [f"down: {r.returncode} {r.stderr}"]
        left = processes_with(dc.dir)
        if left:
            bad.append(f"left running: {left}")
        out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        bad += [f"namespace {ns} left" for ns in dc.ns.values() if ns in out.split()]
        return bad

    def body():
        r = cluster("up", dc.dir, "--stores", "2", "--daemons", "--users", "8", "--build",
                    BUILD, check=False)
        if r.returncode == 77:  # root, yet no network namespaces (a container)
            print(f"SKIP: {r.stderr.strip()}", flush=True)
            return 77
        assert_eq(r.returncode, 0, r.stdout + r.stderr)
        dc.load_hosts()
        logs.extend(dc.logs())
        rc = run_tests([test_login_through_front_to_each_host,
                          test_mail_to_both_hosts_exactly_once,
                          test_mail_between_hosts,
                          test_mail_out_through_the_front_to_the_sink,
                          test_idle_through_front_sees_delivery,
                          test_mbsync_through_front,
                          test_mailload_agents_in_two_clients,
                          test_user_move_during_mailload,
                          test_forged_proxy_login_refused,
                          test_garbage_store_host_cut_off,
                          test_store_host_down_mail_queued,
                          test_start_of_a_running_host_refused,
                          test_store_host_unreachable,
                          test_directory_provider_down])
        bad = down()
        if bad:
            print("FAIL down: " + "; ".join(bad), flush=True)
            rc = 1
        return rc

    def body_logged():
        try:
            return body()
        finally:
            if not logs:  # up failed: its logs, if any
                logs.extend(dc.logs())

    return run_main(body_logged, tmp, logs, cleanup=[down], tail=6000)  # down is idempotent


if __name__ == "__main__":
    sys.exit(main())
