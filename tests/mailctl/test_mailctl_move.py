#!/usr/bin/env python3
"""test_mailctl_move.py — `mailctl user move USER HOST --to TARGET.conf` between two store
hosts (tests/cluster/heroncluster.py: mtad + imapd on 127.0.0.2 and 127.0.0.3 with their own
stores, a front imapd in proxy mode, one real slapd whose mailHost routes the users). The move
keeps UIDVALIDITY, UIDs, UIDNEXT, flags, keywords, MODSEQs (HIGHESTMODSEQ does not go back),
subscriptions, the mailbox and server annotations and the mailboxes' special-use
attributes (what an imaplib client of the front sees before, relayed to the source, and
after, relayed to the target), and the Sieve scripts with the active one (mail after the
move is filed by it);
mail sent while the user is frozen (the flip failed: the provider down) waits in the
sending host's queue and arrives once, on the target, after the flip; the source's
sessions are kicked; --finish deletes the source copy; --abort before the flip leaves the
user as it was; a journal left by a crash in the copy step is resumed (the half copy dropped);
refusals change nothing. After --finish the source keeps a tombstone: a host that still routes
the user there (a stale directory) gets 451 4.2.0 over SMTP and LMTP, a direct IMAP login a
NO [REFERRAL] to the new host, one through the front NO [UNAVAILABLE], and no account is made
there; user show/list show it, user del clears it, and so do a move back and user add;
verify --repair drops it once older than [store] tombstone_age. Every --json output is
validated against docs/schema/mailctl.schema.json.

  test_mailctl_move.py SOURCE_ROOT MTAD IMAPD STORE_PEEK MAILCTL"""
import imaplib
import json
import os
import re
import smtplib
import subprocess
import sys
import tempfile

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cluster"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heroncluster import Cluster, run_cluster  # noqa: E402
from heronlib import DOMAIN, assert_eq, tls_client_ctx, wait_for, write_conf  # noqa: E402

ROOT, MTAD, IMAPD, PEEK, MAILCTL = sys.argv[1:6]
TMP = tempfile.mkdtemp(prefix="heron-mailctl-move-")
with open(os.path.join(ROOT, "docs", "schema", "mailctl.schema.json")) as f:
    SCHEMA = json.load(f)
DEAD_PROVIDER = "ldap://127.0.0.1:1/"  # nothing listens: the flip fails, the copy is ready

# --via CMD for the test: runs `mailctl -c TARGET.conf user VERB USER`; each stream into
# `receive` is kept as DIR/streamN; the first is cut inside its third mailbox (stdin closed),
# the second has its receiver killed -9 inside its second mailbox, the third has the sender
# (the source's mailctl) killed -9 once its second mailbox began
VIA_WRAPPER = r"""
import os, signal, subprocess, sys
tmp, mailctl, conf = sys.argv[1:4]
args = sys.argv[4:]
if args[1] != "receive":
    os.execv(mailctl, [mailctl, "-c", conf, *args])
n = 1
while os.path.exists(os.path.join(tmp, "stream%d" % n)):
    n += 1
if n == 3:
    data = b""
    while data.count(b"\nmailbox ") < 2:
        b = sys.stdin.buffer.read1(65536)
        if not b:
            break
        data += b
    at = -1  # a read may hold more than two: what follows the second mailbox's line goes
    for _ in range(3):
        at = data.find(b"\nmailbox ", at + 1)
        if at == -1:
            break
    if at != -1:
        data = data[:at + 1]
else:
    data = sys.stdin.buffer.read()
with open(os.path.join(tmp, "stream%d" % n), "wb") as f:
    f.write(data)
p = subprocess.Popen([mailctl, "-c", conf, *args], stdin=subprocess.PIPE)
if n == 3:
    sender = os.getppid()  # through the sh -c of --via
    while open("/proc/%d/comm" % sender).read().strip() != "mailctl":
        sender = int(open("/proc/%d/stat" % sender).read().rsplit(")", 1)[1].split()[1])
    p.stdin.write(data)
    os.kill(sender, signal.SIGKILL)
    p.stdin.close()
    p.wait()
    sys.exit(1)
if n <= 2:
    at = -1
    for _ in range(4 - n):
        at = data.index(b"\nmailbox ", at + 1)
    end = min(data.find(k, at + 1) % (len(data) + 1) for k in (b"\nmailbox ", b"\nuserdata "))
    p.stdin.write(data[:(at + end) // 2])
    p.stdin.flush()
    if n == 1:
        p.stdin.close()
    else:
        p.send_signal(signal.SIGKILL)
    p.wait()
    sys.exit(1)
p.communicate(data)
sys.exit(p.returncode)
"""


def valid(name, doc):
    jsonschema.Draft202012Validator({**SCHEMA, "$ref": "#/$defs/" + name}).validate(doc)
    return doc


def mailctl(conf, *args):
    r = subprocess.run([MAILCTL, "-c", conf, "--json", *args], capture_output=True,
                       text=True, timeout=120)
    doc = json.loads(r.stdout) if r.stdout.strip() else None
    return r.returncode, doc, r.stderr


def move(h_from, h_to, user, *more, rc=0):
    code, doc, err = mailctl(h_from.conf, "user", "move", user, h_to.name, "--to", h_to.conf,
                             *more)
    assert code == rc, (user, more, code, doc, err)
    return valid("user move" if rc == 0 else "error", doc)


def send(host, user, subject):
    msg = (f"From: <x@example.org>\r\nTo: <{user}@{DOMAIN}>\r\nSubject: {subject}\r\n"
           f"Message-ID: <{subject}@example.org>\r\n\r\nbody of {subject}\r\n")
    with smtplib.SMTP(host.addr, host.smtp_port, timeout=30) as c:
        assert_eq(c.sendmail("x@example.org", [f"{user}@{DOMAIN}"], msg), {})


def imap(host, user):
    c = imaplib.IMAP4(host.addr, host.imap_port, timeout=20)
    c.login(user, user)
    return c


def front_login(front, user):
    """A client of the front host: STARTTLS, LOGIN, relayed to the user's mailHost."""
    c = imaplib.IMAP4(front.addr, front.imap_port, timeout=20)
    c.starttls(ssl_context=tls_client_ctx(front.cert))
    c.login(user, user)
    return c


imaplib.Commands.setdefault("GETMETADATA", ("AUTH", "SELECTED"))
imaplib.Commands.setdefault("SETMETADATA", ("AUTH", "SELECTED"))
# annotations set before the move (RFC 5464): a mailbox's private and shared, the server's
META = {"INBOX": {"/private/comment": "inbox, moved", "/shared/vendor/heron/x": "shared one"},
        "Work": {"/private/comment": "work (filed)"},
        "": {"/private/vendor/heron/server": "a server entry of the user"}}


SPECIAL_USES = {b"\\All", b"\\Archive", b"\\Drafts", b"\\Flagged", b"\\Junk", b"\\Sent",
                b"\\Trash"}
# mailboxes made with CREATE (USE ...) before the move (RFC 6154); one has two uses
USES = {"Sent": "\\Sent", "Drafts": "\\Drafts", "Junk": "\\Junk", "Trash": "\\Trash",
        "Archive/2026": "\\Archive \\Flagged"}


# Sieve scripts put before the move; "filing" active: the target files by it after the flip
SCRIPTS = {"filing": 'require "fileinto";\r\nif header :contains "subject" "to-work" '
                     '{ fileinto "Work"; }\r\n',
           "spare": 'keep;\r\n'}


def scripts(h, user):
    """{name: (active, source)} of user's Sieve scripts in h's store."""
    code, doc, err = mailctl(h.conf, "sieve", "list", user)
    assert code == 0, err
    out = {}
    for s in valid("sieve list", doc):
        code, got, err = mailctl(h.conf, "sieve", "get", user, s["script"])
        assert code == 0, err
        out[s["script"]] = (s["active"], valid("sieve get", got)["source"])
    return out


def vanished(c, uidvalidity, modseq, box="INBOX"):
    """VANISHED (EARLIER) of SELECT box (QRESYNC (uidvalidity modseq)), RFC 7162."""
    assert c.enable("QRESYNC")[0] == "OK"
    typ, data = c._simple_command("SELECT", box, "(QRESYNC (%d %d))" % (uidvalidity, modseq))
    assert typ == "OK", data
    return c.untagged_responses.pop("VANISHED", [])


def metadata(c):
    """{mailbox: {entry: value}} of GETMETADATA for the entries of META that have one."""
    out = {}
    for box, entries in META.items():
        typ, data = c._simple_command("GETMETADATA", '"%s"' % box,
                                      "(%s)" % " ".join(entries))
        assert typ == "OK", (box, data)
        _, data = c._untagged_response(typ, data, "METADATA")
        got = {}
        for item in data:
            for m in re.finditer(rb'(/[^\s()"]+) "([^"]*)"', item or b""):
                got[m.group(1).decode().lower()] = m.group(2).decode()
        out[box] = got
    return out


def state(c):
    """What a client resynchronizes by: per mailbox UIDVALIDITY, UIDNEXT, HIGHESTMODSEQ, each
    UID's flags (keywords included) and MODSEQ (CONDSTORE, RFC 7162), the subscriptions and
    the annotations and the special-use attributes of LIST."""
    out = {}
    for box in ("INBOX", "Work"):
        typ, data = c.status(box, "(UIDVALIDITY UIDNEXT HIGHESTMODSEQ)")
        assert typ == "OK", data
        st = dict(re.findall(rb"(UIDVALIDITY|UIDNEXT|HIGHESTMODSEQ) (\d+)", data[0]))
        c.select(box, readonly=True)
        typ, data = c.uid("FETCH", "1:*", "(FLAGS MODSEQ)")
        msgs, modseqs = {}, {}
        for line in data:
            m = re.search(rb"UID (\d+) FLAGS \(([^)]*)\)", line or b"")
            if m:
                msgs[int(m.group(1))] = set(m.group(2).split()) - {b"\\Recent"}
            m = re.search(rb"UID (\d+).*MODSEQ \((\d+)\)", line or b"")
            if m:
                modseqs[int(m.group(1))] = int(m.group(2))
        assert set(modseqs) == set(msgs), data
        out[box] = (int(st[b"UIDVALIDITY"]), int(st[b"UIDNEXT"]), msgs)
        out[box + " modseq"] = (int(st[b"HIGHESTMODSEQ"]), modseqs)
    typ, data = c.lsub()
    out["subscribed"] = sorted(d.split(b" ")[-1].strip(b'"') for d in data)
    typ, data = c.list()
    assert typ == "OK", data
    out["special-use"] = {}  # RFC 6154 attributes in LIST, by mailbox
    for d in data:
        m = re.match(rb'\(([^)]*)\) "/" "?([^"]*)"?$', d or b"")
        uses = {a for a in m.group(1).split() if a in SPECIAL_USES}
        if uses:
            out["special-use"][m.group(2).decode()] = uses

    out["metadata"] = metadata(c)
    return out


def mailhost(cl, user):
    r = subprocess.run(["ldapsearch", "-x", "-LLL", "-H", cl.slapd.uri, "-D",
                        cl.slapd.env["LDAP_ADMIN_DN"], "-y",
                        cl.slapd.env["LDAP_ADMIN_PASSWORD_FILE"], "-b",
                        cl.slapd.env["LDAP_PEOPLE"], f"(uid={user})", "mailHost"],
                       capture_output=True, text=True, timeout=60, check=True)
    m = re.search(r"^mailHost: (\S+)", r.stdout, re.M)
    return m.group(1) if m else None


def set_mailhost(cl, user, host):
    cl.slapd.change("ldapmodify", f"dn: uid={user},{cl.slapd.env['LDAP_PEOPLE']}\n"
                    f"changetype: modify\nreplace: mailHost\nmailHost: {host}\n")


def rcpt_answer(host, port, user, lmtp=False):
    """The (code, text) of RCPT TO user@ at host:port, over SMTP or LMTP."""
    c = (smtplib.LMTP if lmtp else smtplib.SMTP)(host, port, timeout=30)
    try:
        c.ehlo()  # LHLO for LMTP
        assert_eq(c.mail("x@example.org")[0], 250)
        return c.rcpt(f"{user}@{DOMAIN}")
    finally:
        c.quit()


def login_refusal(addr, port, user, tls_cert=None):
    """The text of the NO that LOGIN gets (None when it is accepted)."""
    c = imaplib.IMAP4(addr, port, timeout=20)
    if tls_cert is not None:
        c.starttls(ssl_context=tls_client_ctx(tls_cert))
    try:
        c.login(user, user)
    except imaplib.IMAP4.error as e:
        c.logout()
        return str(e)
    c.logout()
    return None


def main():
    cl = Cluster(ROOT, MTAD, IMAPD, PEEK, TMP, users=4, front=True)
    h1 = h2 = None

    def arrived(h, user, subject):
        return lambda: subject in h.subjects(user)

    def test_move_keeps_uids_and_holds_mail():
        for k in range(3):
            send(h2, "user1", f"old-{k}")  # through store2: LMTP to store1
        wait_for(lambda: len(h1.subjects("user1")) == 3, 30, "user1's mail on store1")
        c = imap(h1, "user1")
        assert c.create("Work")[0] == "OK" and c.subscribe("Work")[0] == "OK"
        assert c.append("Work", "(\\Flagged $Label1)", None,
                        b"Subject: filed\r\n\r\nkept\r\n")[0] == "OK"
        assert c.append("Work", "(\\Deleted)", None,
                        b"Subject: dropped\r\n\r\ngone\r\n")[0] == "OK"
        c.select("Work")
        c.expunge()  # Work's UID 2, before the change that makes its HIGHESTMODSEQ
        c.uid("STORE", "1", "+FLAGS", "(\\Seen)")  # a MODSEQ past the append's
        c.select("INBOX")
        c.uid("STORE", "1", "+FLAGS", "(\\Seen $Important)")
        c.uid("STORE", "2", "+FLAGS", "(\\Deleted)")
        c.expunge()  # a gap in the UIDs: 1 and 3 remain
        for box, entries in META.items():
            for entry, value in entries.items():
                typ, data = c._simple_command("SETMETADATA", '"%s"' % box,
                                              '(%s "%s")' % (entry, value))
                assert typ == "OK", (box, entry, data)
        for box, uses in USES.items():
            typ, data = c._simple_command("CREATE", '"%s"' % box, "(USE (%s))" % uses)
            assert typ == "OK", (box, data)
        c.logout()
        for name, src in SCRIPTS.items():
            path = os.path.join(TMP, name + ".sieve")
            with open(path, "w", newline="") as f:
                f.write(src)
            code, _, err = mailctl(h1.conf, "sieve", "put", "user1", name, path,
                                   *(["--activate"] if name == "filing" else []))
            assert code == 0, err
        sieve_before = scripts(h1, "user1")
        assert_eq(sieve_before, {"filing": (True, SCRIPTS["filing"]),
                                 "spare": (False, SCRIPTS["spare"])})
        c = front_login(cl.front, "user1")  # the client's view, through the front
        before = state(c)
        c.logout()
        assert_eq(sorted(before["INBOX"][2]), [1, 3])
        assert_eq(before["metadata"], META)
        assert_eq(before["special-use"],
                  {b: set(u.encode().split()) for b, u in USES.items()})
        # MODSEQs a copy numbering anew would not give: 1 changed after 3, the expunge after
        hms, modseqs = before["INBOX modseq"]
        assert modseqs[1] > modseqs[3] and hms > modseqs[1], before
        c = front_login(cl.front, "user1")  # a QRESYNC client last synced before the expunge
        gone_before = vanished(c, before["INBOX"][0], modseqs[1])
        # one that synced Work after its expunge: nothing vanished since (a copy with no
        # history could not tell, and would name every missing UID, RFC 7162 3.2.5.2)
        work_since = before["Work modseq"][0] - 1
        assert_eq(vanished(c, before["Work"][0], work_since - 1, "Work"), [b"(EARLIER) 2"])
        assert_eq(vanished(c, before["Work"][0], work_since, "Work"), [])
        c.logout()
        assert_eq(gone_before, [b"(EARLIER) 2"])
        assert "user=user1 via=proxy result=ok" in h1.imapd.logtext()
        q = subprocess.run([MAILCTL, "-c", h1.conf, "quota", "set", "user1", "--bytes", "5M"],
                           capture_output=True, text=True)
        assert q.returncode == 0, q.stderr
        watcher = imap(h1, "user1")  # a session on the source: kicked by the move
        watcher.select("INBOX")

        # the flip fails (provider down): copied and verified, the source frozen, mailHost kept
        err = move(h1, h2, "user1", "--provider", DEAD_PROVIDER, rc=75)
        assert "the directory:" in err["error"] and "run the command again" in err["hint"], err
        assert_eq(mailhost(cl, "user1"), "store1.heron.test")
        try:
            watcher.noop()
            kicked = False
        except (imaplib.IMAP4.abort, OSError):
            kicked = True
        assert kicked, "the source session was not closed"
        # mail sent meanwhile waits in store2's queue: store1 refuses it for now (4.2.2)
        send(h2, "user1", "held-1")
        wait_for(lambda: re.search(rf"to=<user1@{DOMAIN}>, relay=store1[^\n]*dsn=4\.2\.2, "
                                   r"status=deferred", h2.mtad.logtext()), 30,
                 "held-1 deferred by the frozen source")
        assert "held-1" not in h1.subjects("user1")
        assert "held-1" not in h2.subjects("user1")
        assert any(f"user1@{DOMAIN}" in q for q in h2.store.queue())

        # again, with the provider up: resumes at the flip
        doc = move(h1, h2, "user1")
        assert_eq((doc["step"], doc["from"], doc["mailboxes"], doc["messages"]),
                  ("flipped", "store1.heron.test", 8, 3))
        assert doc["finish_after"] is not None, doc
        assert_eq(mailhost(cl, "user1"), "store2.heron.test")
        wait_for(arrived(h2, "user1", "held-1"), 60, "held-1 on store2 after the flip")
        wait_for(lambda: not [q for q in h2.store.queue() if q.strip()], 30,
                 "store2's queue to empty")
        assert_eq(h2.subjects("user1").count("held-1"), 1)
        assert "held-1" not in h1.subjects("user1")

        # the same client through the front, now relayed to store2: same UIDVALIDITY, UIDs,
        # flags, subscriptions (no download again); held-1 took the old UIDNEXT
        c2 = front_login(cl.front, "user1")
        after = state(c2)
        c2.logout()
        assert "user=user1 via=proxy result=ok" in h2.imapd.logtext()
        v, n, msgs = before["INBOX"]
        assert_eq(after["INBOX"][0], v)
        assert_eq(after["INBOX"][1], n + 1)
        assert_eq({u: f for u, f in after["INBOX"][2].items() if u != n}, msgs)
        assert n in after["INBOX"][2], after
        assert_eq(after["Work"], before["Work"])
        assert_eq(after["subscribed"], before["subscribed"])
        # CONDSTORE state kept: the same MODSEQs, HIGHESTMODSEQ not back (INBOX: held-1 came
        # after it), so CHANGEDSINCE the client's old HIGHESTMODSEQ gives just held-1
        assert_eq(after["Work modseq"], before["Work modseq"])
        assert_eq({u: s for u, s in after["INBOX modseq"][1].items() if u != n}, modseqs)
        assert after["INBOX modseq"][0] > hms, after
        assert after["INBOX modseq"][1][n] > hms, after
        assert_eq(after["metadata"], META)
        c2 = front_login(cl.front, "user1")  # the same VANISHED as on the source
        assert_eq(vanished(c2, before["INBOX"][0], modseqs[1]), gone_before)
        assert_eq(vanished(c2, before["Work"][0], work_since, "Work"), [])
        c2.logout()
        assert_eq(after["special-use"], before["special-use"])
        c2 = front_login(cl.front, "user1")
        c2.select("INBOX", readonly=True)
        typ, data = c2.uid("FETCH", "1:*", "(FLAGS) (CHANGEDSINCE %d)" % hms)
        assert typ == "OK", data
        assert_eq([int(re.search(rb"UID (\d+)", d).group(1)) for d in data if d], [n])
        c2.logout()
        assert_eq(scripts(h2, "user1"), sieve_before)  # the same scripts, the same active
        code, quota, _ = mailctl(h2.conf, "quota", "get", "user1")
        assert code == 0 and quota["quota_bytes"] == 5 * 1024 * 1024, quota

        # --finish ([directory] auth_cache_ttl is 0 s here): the source copy goes
        doc = move(h1, h2, "user1", "--finish")
        assert_eq(doc["step"], "done")
        assert_eq(mailctl(h1.conf, "user", "show", "user1")[0], 67)
        assert not os.path.exists(os.path.join(h1.dir, "store.move-user1"))
        # new mail through store1's SMTP now goes to store2, once
        send(h1, "user1", "after-1")
        wait_for(arrived(h2, "user1", "after-1"), 30, "after-1 on store2")
        assert_eq(h2.subjects("user1").count("after-1"), 1)
        # the active script moved with the user: store2's delivery files by it
        send(h1, "user1", "to-work-1")
        c2 = front_login(cl.front, "user1")

        def filed():
            c2.select("Work", readonly=True)
            return c2.uid("SEARCH", "SUBJECT", "to-work-1")[1][0].split()
        wait_for(filed, 30, "to-work-1 filed into Work on store2")
        c2.logout()
        assert "to-work-1" not in h2.subjects("user1")
        assert_eq(mailctl(h1.conf, "user", "show", "user1")[0], 67)

    def test_move_via_a_stream_cut_and_killed():
        """--via CMD (mailctl on the target, here the other store's conf): the stream cut
        after two mailboxes (the receiver sees its end early), then the receiver killed -9
        inside the next stream, then the sender killed -9; each rerun sends only the
        mailboxes the target does not hold complete, and the fourth completes with
        UIDVALIDITY, UIDs, flags and digests kept."""
        def flags_of(c):  # {UID: flags} of the selected mailbox, \Recent aside
            return {int(m.group(1)): set(m.group(2).split()) - {b"\\Recent"}
                    for m in (re.search(rb"UID (\d+) FLAGS \(([^)]*)\)", d or b"")
                              for d in c.uid("FETCH", "1:*", "(FLAGS)")[1]) if m}

        src, dst = (h1, h2) if mailhost(cl, "user4") == "store1.heron.test" else (h2, h1)
        for k in range(4):
            send(src, "user4", f"four-{k}")
        wait_for(lambda: len(src.subjects("user4")) == 4, 30, "user4's mail")
        c = front_login(cl.front, "user4")
        for box in ("Alpha", "Beta", "Gamma", "Delta"):
            assert c.create(box)[0] == "OK"
            for k in range(3):
                body = (f"Subject: {box}-{k}\r\n\r\n" + "x" * 70 + "\r\n") * 300
                assert c.append(box, "(\\Seen $K%d)" % k, None, body.encode())[0] == "OK"
        assert c.create('" My box"')[0] == "OK"  # spaces in the name, one leading
        assert c.append('" My box"', "(\\Answered)", None,
                        b"Subject: m\r\n\r\nm\r\n")[0] == "OK"
        c.select("Beta")
        c.uid("STORE", "2", "+FLAGS", "(\\Deleted)")
        c.expunge()
        before = {}
        for box in ("INBOX", "Alpha", "Beta", "Gamma", "Delta", '" My box"'):
            typ, data = c.status(box, "(UIDVALIDITY UIDNEXT MESSAGES)")
            c.select(box, readonly=True)
            before[box] = (data, flags_of(c))
        c.logout()
        assert_eq(sorted(before["Beta"][1]), [1, 3])
        # a vacation and a duplicate memory (as an export carries them), moved with the user
        mem = os.path.join(TMP, "mem4")
        os.mkdir(mem)
        memories = "D 00000000000000aa 4000000000\nV 0123456789abcdef 4000000000\n"
        with open(os.path.join(mem, "heron-sieve-memory"), "w") as f:
            f.write(memories)
        assert_eq(mailctl(src.conf, "import", "user4", mem)[0], 0)
        wrap = os.path.join(TMP, "via.py")
        with open(wrap, "w") as f:
            f.write(VIA_WRAPPER)
        via = f"{sys.executable} {wrap} {TMP} {MAILCTL} {dst.conf}"

        def digest(h):
            r = subprocess.run([MAILCTL, "-c", h.conf, "user", "digest", "user4"],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            return [ln for ln in r.stdout.splitlines() if ln.startswith("mailbox ")]

        def sent(n):
            with open(os.path.join(TMP, f"stream{n}"), "rb") as f:
                return [ln.split(b" ", 3)[3].decode() for ln in f.read().split(b"\n")
                        if ln.startswith(b"mailbox ")]

        def move_via(*more, rc=0):
            code, doc, err = mailctl(src.conf, "user", "move", "user4", dst.name, "--via",
                                     via, *more)
            assert code == rc, (more, code, doc, err)
            return (valid("user move" if rc == 0 else "error", doc) if rc >= 0 else doc), err

        def complete():
            return {d.split(" ", 2)[2] for d in set(digest(dst)) & set(full)}

        full = digest(src)
        assert_eq(len(full), 6)
        # 1: the pipe dropped inside the third mailbox: two complete there, no partial one
        err, _ = move_via(rc=75)
        assert "run the command again" in err["hint"], err
        got = digest(dst)
        first = sent(1)
        assert_eq(len(first), 6)
        assert_eq(sorted(got), sorted(d for d in full if d.split(" ", 2)[2] in first[:2]))
        # 2: the receiver killed -9 in the middle; the rerun skips what the target holds
        move_via(rc=75)
        assert_eq(sorted(sent(2)), sorted(first[2:]))
        # 3: the sender killed -9 in the middle (the journal stays at frozen)
        held = complete()
        move_via(rc=-9)
        assert set(sent(3)) <= set(first) - held and len(sent(3)) == 2, (sent(3), held)
        # 4: completes, sending only what was not complete
        held = complete()
        assert len(held) < 6, held
        doc, _ = move_via()
        assert_eq(set(sent(4)), set(first) - held)
        assert_eq((doc["step"], doc["mailboxes"], doc["messages"]), ("flipped", 6, 16))
        assert_eq(mailhost(cl, "user4"), dst.name)
        assert_eq(sorted(digest(dst)), sorted(full))
        c = front_login(cl.front, "user4")  # relayed to the target now
        for box, (status, flags) in before.items():
            typ, data = c.status(box, "(UIDVALIDITY UIDNEXT MESSAGES)")
            assert_eq(data, status)
            c.select(box, readonly=True)
            assert_eq(flags_of(c), flags)
        c.logout()
        out = os.path.join(TMP, "out4")
        assert_eq(mailctl(dst.conf, "export", "user4", out)[0], 0)
        with open(os.path.join(out, "heron-sieve-memory")) as f:
            assert_eq(f.read(), memories)
        assert_eq(move_via("--finish")[0]["step"], "done")
        assert_eq(mailctl(src.conf, "user", "show", "user4")[0], 67)
        # back through --via, the flip failing: copied there (the old host), then --abort
        # drops that copy through CMD and leaves the user where it is, unfrozen
        back = f"{sys.executable} {wrap} {TMP} {MAILCTL} {src.conf}"
        q0 = mailctl(dst.conf, "quota", "get", "user4")[1]
        code, doc, err = mailctl(dst.conf, "user", "move", "user4", src.name, "--via", back,
                                 "--provider", DEAD_PROVIDER)
        assert code == 75 and "the directory:" in valid("error", doc)["error"], (doc, err)
        assert_eq(mailctl(src.conf, "user", "show", "user4")[0], 0)
        assert_eq(sorted(digest(src)), sorted(full))
        with open(os.path.join(src.dir, "store.recv-user4.tomb")) as f:
            assert f.read().startswith(dst.name + " "), "the cleared tombstone remembered"
        code, doc, err = mailctl(dst.conf, "user", "move", "user4", src.name, "--via", back,
                                 "--abort")
        assert code == 0 and valid("user move", doc)["step"] == "aborted", (doc, err)
        # the receiver's create cleared src's tombstone; the drop put it back
        code, doc, _ = mailctl(src.conf, "user", "show", "user4")
        assert code == 67 and f"moved to {dst.name}" in valid("error", doc)["error"], doc
        assert not os.path.exists(os.path.join(src.dir, "store.recv-user4.tomb"))
        assert_eq(mailctl(dst.conf, "quota", "get", "user4")[1], q0)
        assert_eq(mailhost(cl, "user4"), dst.name)
        # bad input from the pipe: a clear refusal (exit 65), nobody made; two scripts of
        # 16 MiB source and program each, then one more byte each: over the 64 MiB held
        # for a user's scripts, refused at its line (before reading it)
        big_sieve = b"heron-move 1\nuser user9\nuserdata 0 0\n" + b"".join(
            b"sieve 0 16777216 16777216 s%d\n" % i + b"x" * (32 << 20) + b"\n"
            for i in range(2)) + b"sieve 0 1 1 s2\nab\n"
        for bad in (b"", b"heron-move 2\n", b"heron-move 1\nuser user9\nmailbox 1 0 X\n"
                    b"file cur/../../x 3 0\nabc\n", b"heron-move 1\nuser user9\n"
                    b"mailbox 0 0 " + b"y" * 9000 + b"\n", b"heron-move 1\nuser user9\n"
                    b"mailbox 0 0 X\nfile cur/a 99999999999 0\n", b"heron-move 1\nuser "
                    b"user9\nmailbox 0 0 X\nfile cur/a 10 0\nshort", b"heron-move 1\nuser "
                    b"user9\nuserdata 0 0\nsieve 1 5 3 s\nabc", b"heron-move 1\nuser us",
                    b"heron-move 1\nuser user9\nkept\nmailbox 0 0 X\n",
                    big_sieve):
            r = subprocess.run([MAILCTL, "-c", src.conf, "user", "receive", "user9"],
                               input=bad, capture_output=True, timeout=60)
            assert r.returncode == 65, (bad[:60], r.returncode, r.stderr)
            assert b"user receive: line" in r.stderr, r.stderr
            if bad is big_sieve:
                assert b"Sieve scripts over 67108864 bytes in all" in r.stderr, r.stderr
        assert_eq(mailctl(src.conf, "user", "show", "user9")[0], 67)
        r = subprocess.run([MAILCTL, "-c", src.conf, "user", "digest", "user9"],
                           capture_output=True, text=True, timeout=60)
        assert_eq((r.returncode, r.stdout), (0, "heron-digest 1\nuser absent\nend\n"))
        # and a target answering garbage to the digest: refused before the move begins
        for answer in ("heron-digest 1\\nmailbox zz X\\nend\\n", "hello\\n",
                       "heron-digest 1\\nuser absent\\n", "x" * 10000):
            code, doc, err = mailctl(dst.conf, "user", "move", "user4", src.name, "--via",
                                     f"printf '{answer}' #")
            assert code == 65 and "digest does not parse" in valid("error", doc)["error"], \
                (answer, code, doc, err)
        assert not os.path.exists(os.path.join(dst.dir, "store.move-user4"))
        # back through --via for good: the receiver keeps the tombstone its create cleared
        # (for a drop) until --finish tells it the move is done; then nothing is left of it
        tomb = os.path.join(src.dir, "store.recv-user4.tomb")
        code, doc, err = mailctl(dst.conf, "user", "move", "user4", src.name, "--via", back)
        assert code == 0 and valid("user move", doc)["step"] == "flipped", (doc, err)
        assert os.path.exists(tomb), "the cleared tombstone remembered until --finish"
        code, doc, err = mailctl(dst.conf, "user", "move", "user4", src.name, "--via", back,
                                 "--finish")
        assert code == 0 and valid("user move", doc)["step"] == "done", (doc, err)
        assert not os.path.exists(tomb), "the receiver's tombstone file left after the move"
        assert_eq(mailhost(cl, "user4"), src.name)
        assert_eq(sorted(digest(src)), sorted(full))
        code, doc, _ = mailctl(dst.conf, "user", "show", "user4")
        assert code == 67 and f"moved to {src.name}" in valid("error", doc)["error"], doc
        # and to dst again (--to), as the tests after this one expect it
        assert_eq(move(src, dst, "user4")["step"], "flipped")
        assert_eq(move(src, dst, "user4", "--finish")["step"], "done")

    def test_tombstone_after_finish():
        """user1 moved to store2 and finished: store1 keeps its tombstone. With the directory
        saying store1 again (what a stale replica or cache says), store1 refuses user1's mail
        for now and refers its logins to store2, and makes no account."""
        code, doc, _ = mailctl(h1.conf, "user", "show", "user1")
        assert code == 67 and "moved to store2.heron.test" in valid("error", doc)["error"], doc
        code, doc, _ = mailctl(h1.conf, "user", "list", "user1", "--source", "store")
        assert code == 0, doc
        assert_eq([(r["source"], r["moved_to"]) for r in valid("user list", doc)],
                  [("moved", "store2.heron.test")])
        code, doc, _ = mailctl(h1.conf, "user", "list", "user1")  # the directory's row
        assert_eq([(r["source"], r["moved_to"]) for r in valid("user list", doc)],
                  [("directory", "store2.heron.test")])
        set_mailhost(cl, "user1", "store1.heron.test")
        try:
            code, text = rcpt_answer(h1.addr, h1.smtp_port, "user1")
            assert code == 451 and text.startswith(b"4.2.0"), (code, text)
            code, text = rcpt_answer(h1.addr, h1.lmtp_port, "user1", lmtp=True)
            assert code == 451 and text.startswith(b"4.2.0"), (code, text)
            # another user of store1 is not affected
            assert_eq(rcpt_answer(h1.addr, h1.lmtp_port, "user3", lmtp=True)[0], 250)
            no = login_refusal(h1.addr, h1.imap_port, "user1")
            assert no is not None and \
                "[REFERRAL imap://user1;AUTH=*@store2.heron.test/]" in no, no
            no = login_refusal(cl.front.addr, cl.front.imap_port, "user1", cl.front.cert)
            assert no is not None and "[UNAVAILABLE]" in no, no
            assert re.search(r"imap refer user=user1 host=store2\.heron\.test",
                             h1.imapd.logtext())
            assert_eq(mailctl(h1.conf, "user", "show", "user1")[0], 67)  # no account made
        finally:
            set_mailhost(cl, "user1", "store2.heron.test")
        # user del removes the tombstone (only that is left here)
        code, doc, _ = mailctl(h1.conf, "user", "del", "user1")
        assert code == 0 and valid("user del", doc) == {"deleted": False,
                                                        "tombstone_cleared": True}, doc
        code, doc, _ = mailctl(h1.conf, "user", "show", "user1")
        assert code == 67 and "moved" not in valid("error", doc)["error"], doc
        code, doc, _ = mailctl(h1.conf, "user", "list", "user1", "--source", "store")
        assert_eq(valid("user list", doc), [])
        assert_eq(mailctl(h1.conf, "user", "del", "user1")[0], 67)  # nothing left to remove

    def test_abort_before_the_flip():
        send(h2, "user3", "three-1")
        wait_for(arrived(h1, "user3", "three-1"), 30, "user3's mail on store1")
        code, q0, _ = mailctl(h1.conf, "quota", "get", "user3")
        assert code == 0, q0
        move(h1, h2, "user3", "--provider", DEAD_PROVIDER, rc=75)
        code, q1, _ = mailctl(h1.conf, "quota", "get", "user3")
        assert q1["quota_bytes"] == 1 and q1["quota_messages"] == 1, q1  # frozen
        assert_eq(mailctl(h2.conf, "user", "show", "user3")[0], 0)  # the copy is there
        doc = move(h1, h2, "user3", "--abort")
        assert_eq(doc["step"], "aborted")
        assert_eq(mailctl(h1.conf, "quota", "get", "user3")[1], q0)
        assert_eq(mailctl(h2.conf, "user", "show", "user3")[0], 67)
        assert_eq(mailhost(cl, "user3"), "store1.heron.test")
        send(h2, "user3", "three-2")
        wait_for(arrived(h1, "user3", "three-2"), 30, "three-2 on store1 after the abort")

    def test_resume_after_a_crash_in_the_copy():
        """The journal as a crash in the copy step leaves it (the target's user made, half
        filled, the source's freeze not yet applied): running the move again freezes the
        source, drops the half copy, copies anew and flips."""
        code, q0, _ = mailctl(h1.conf, "quota", "get", "user3")
        assert code == 0, q0
        want = h1.subjects("user3")
        assert len(want) == 2, want
        d = os.path.join(h1.dir, "store.move-user3")
        os.mkdir(d, 0o700)
        with open(os.path.join(d, "journal"), "w") as f:
            f.write("heron-move 1\nuser user3\nhost store2.heron.test\n"
                    "from store1.heron.test\nquota_bytes %d\nquota_msgs %d\n"
                    "target_created 1\nstep frozen\nflipped_at 0\n"
                    % (q0["quota_bytes"], q0["quota_messages"]))
        with open(os.path.join(TMP, "half.mbox"), "wb") as f:
            f.write(b"From x Mon Jan  5 10:00:00 2026\nSubject: half-copied\n\nx\n")
        assert_eq(mailctl(h2.conf, "user", "add", "user3")[0], 0)
        assert_eq(mailctl(h2.conf, "import", "user3", os.path.join(TMP, "half.mbox"))[0], 0)
        doc = move(h1, h2, "user3")
        assert_eq((doc["step"], doc["messages"]), ("flipped", 2))
        assert_eq(h2.subjects("user3"), want)  # the half copy is gone
        assert_eq(mailhost(cl, "user3"), "store2.heron.test")
        code, q2, _ = mailctl(h2.conf, "quota", "get", "user3")
        assert_eq((q2["quota_bytes"], q2["quota_messages"]),
                  (q0["quota_bytes"], q0["quota_messages"]))
        assert_eq(move(h1, h2, "user3", "--finish")["step"], "done")
        assert_eq(mailctl(h1.conf, "user", "show", "user3")[0], 67)

    def test_refusals():
        err = move(h1, h2, "user1", rc=67)  # not on store1 any more
        assert "no such user" in err["error"], err
        err = move(h2, h2, "user2", rc=64)
        assert "one store" in err["error"], err
        err = move(h2, h1, "user2", "--finish", rc=1)
        assert "no move" in err["error"], err
        code, err, _ = mailctl(h2.conf, "user", "move", "user3", "store2.heron.test", "--to",
                               h1.conf)  # moved there by the test above
        assert code == 1 and "homed on store2.heron.test already" in valid("error", err)["error"]
        # a user of that name in the target's store: refused before anything changes
        assert_eq(mailctl(h2.conf, "user", "add", "user2")[0], 0)
        code, q0, _ = mailctl(h2.conf, "quota", "get", "user2")
        assert_eq(mailctl(h1.conf, "user", "add", "user2")[0], 0)
        err = move(h2, h1, "user2", rc=1)
        assert "exists in the target's store" in err["error"], err
        assert_eq(mailctl(h2.conf, "quota", "get", "user2")[1], q0)
        assert not os.path.exists(os.path.join(h2.dir, "store.move-user2"))
        assert_eq(mailhost(cl, "user2"), "store2.heron.test")
        move(h2, h1, "user2", "--abort", "--finish", rc=64)

    def test_verify_repair_drops_expired_tombstones():
        """user4's tombstone (the --via move finished) holds under the default
        tombstone_age and survives verify --repair; under an age of 1 s it expires, and
        verify --repair drops it."""
        src = [h for h in (h1, h2)
               if "moved to" in (mailctl(h.conf, "user", "show", "user4")[1] or {}).get(
                   "error", "")]
        assert len(src) == 1, "no tombstone of user4"
        h = src[0]
        code, doc, _ = mailctl(h.conf, "verify", "--repair")
        assert code == 0 and valid("verify", doc)["repaired"] == 0, doc
        assert "moved to" in mailctl(h.conf, "user", "show", "user4")[1]["error"]
        short = os.path.join(h.dir, "short-tombstones.conf")
        write_conf(short, {**h.sections, "store": {**h.sections["store"],
                                                   "tombstone_age": "1s"}})
        wait_for(lambda: "moved" not in mailctl(short, "user", "show", "user4")[1]["error"],
                 30, "user4's tombstone to expire under tombstone_age = 1s")
        code, doc, _ = mailctl(short, "verify", "--repair")
        assert code == 0 and valid("verify", doc)["repaired"] == 1, doc
        code, doc, _ = mailctl(h.conf, "user", "show", "user4")  # gone, not just expired
        assert code == 67 and "moved" not in valid("error", doc)["error"], doc

    def test_move_back_clears_the_tombstone():
        """user3 went to store2 (finished: a tombstone on store1). Moved back, store1's
        tombstone goes with the user's creation there and store2 gets one; user add on store2
        clears that."""
        code, doc, _ = mailctl(h1.conf, "user", "show", "user3")
        assert code == 67 and "moved to store2.heron.test" in valid("error", doc)["error"], doc
        # first a move back whose flip fails, aborted: the copy goes, the tombstone is back
        move(h2, h1, "user3", "--provider", DEAD_PROVIDER, rc=75)
        assert_eq(mailctl(h1.conf, "user", "show", "user3")[0], 0)  # the copy is there
        assert_eq(move(h2, h1, "user3", "--abort")["step"], "aborted")
        code, doc, _ = mailctl(h1.conf, "user", "show", "user3")
        assert code == 67 and "moved to store2.heron.test" in valid("error", doc)["error"], doc
        assert_eq(move(h2, h1, "user3")["step"], "flipped")
        assert_eq(mailctl(h1.conf, "user", "show", "user3")[0], 0)
        assert_eq(move(h2, h1, "user3", "--finish")["step"], "done")
        code, doc, _ = mailctl(h2.conf, "user", "show", "user3")
        assert code == 67 and "moved to store1.heron.test" in valid("error", doc)["error"], doc
        send(h2, "user3", "back-1")  # store2 routes it to store1 by LMTP
        wait_for(arrived(h1, "user3", "back-1"), 30, "back-1 on store1 after the move back")
        assert_eq(sorted(h1.subjects("user3")), ["back-1", "three-1", "three-2"])
        code, doc, _ = mailctl(h2.conf, "user", "add", "user3")
        assert code == 0 and valid("user add", doc)["tombstone_cleared"] is True, doc
        code, doc, _ = mailctl(h2.conf, "user", "list", "user3", "--source", "store")
        assert_eq([(r["source"], r["moved_to"]) for r in valid("user list", doc)],
                  [("store", None)])
        assert_eq(mailctl(h2.conf, "user", "del", "user3")[0], 0)

    def started(cl):
        nonlocal h1, h2
        h1, h2 = cl.hosts

    return run_cluster(cl, TMP, [test_move_keeps_uids_and_holds_mail,
                                 test_tombstone_after_finish, test_abort_before_the_flip,
                                 test_resume_after_a_crash_in_the_copy, test_refusals,
                                 test_move_via_a_stream_cut_and_killed,
                                 test_verify_repair_drops_expired_tombstones,
                                 test_move_back_clears_the_tombstone],
                       started)


if __name__ == "__main__":
    sys.exit(main())
