"""test_control.py — the daemons' control sockets through mailctl: `who` lists the sessions of
mtad (submission, after AUTH), imapd and managesieved with their users and addresses, `kick`
closes them as each protocol says (IMAP BYE, also in IDLE and after a running command; SMTP
421 between transactions; ManageSieve BYE), `stats --live`/`top` show counters that move,
and the errors: unknown daemons, no daemon running (75), a user with no session (0 kicked).

Every --json output is validated against docs/schema/mailctl.schema.json (python3 jsonschema).

usage: test_control.py MTAD IMAPD MANAGESIEVED MAILCTL SOURCE_ROOT
"""
import base64
import json
import os
import smtplib
import socket
import subprocess
import sys
import tempfile

import jsonschema

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (HOST, Daemon, free_port, imaplib, run_main, run_tests,  # noqa: E402
                      shared_conf, wait_for, wait_port)

MTAD, IMAPD, SIEVED, MAILCTL, ROOT = sys.argv[1:6]
with open(os.path.join(ROOT, "docs", "schema", "mailctl.schema.json")) as _f:
    SCHEMA = json.load(_f)


def valid(name, doc):
    """doc, checked against the schema's definition of the command name."""
    jsonschema.Draft202012Validator({**SCHEMA, "$ref": "#/$defs/" + name}).validate(doc)
    return doc
TMP = tempfile.mkdtemp(prefix="heron-control-")
SUB_PORT, SIEVE_PORT = free_port(), free_port()
CONF, SMTP_PORT, IMAP_PORT = shared_conf(
    TMP, ["alice", "bob", "carol"], workers=2,
    keys={"mtad": {"submission": f"{HOST}:{SUB_PORT}", "auth_require_tls": "no"},
          "sieve": {"listen": f"{HOST}:{SIEVE_PORT}", "allow_plaintext_auth": "yes",
                    "workers": "1"}})
mtad = Daemon(MTAD, CONF, os.path.join(TMP, "mtad.log"), SMTP_PORT)
imapd = Daemon(IMAPD, CONF, os.path.join(TMP, "imapd.log"), IMAP_PORT)
sieved = Daemon(SIEVED, CONF, os.path.join(TMP, "managesieved.log"), SIEVE_PORT)


def mailctl(*args):
    p = subprocess.run([MAILCTL, "-c", CONF, *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def who(*args):
    rc, out, err = mailctl("--json", "who", *args)
    assert rc == 0, (rc, out, err)
    return valid("who", json.loads(out))


def submission(user):
    s = smtplib.SMTP(HOST, SUB_PORT, timeout=30)
    s.ehlo()
    s.login(user, user)
    return s


class Sieve:
    """A ManageSieve session, logged in with AUTHENTICATE PLAIN."""

    def __init__(self, user):
        self.s = socket.create_connection((HOST, SIEVE_PORT), timeout=20)
        self.f = self.s.makefile("rb")
        self.until_ok()
        cred = base64.b64encode(f"\0{user}\0{user}".encode()).decode()
        self.s.sendall(f'AUTHENTICATE "PLAIN" "{cred}"\r\n'.encode())
        assert self.until_ok().startswith(b"OK"), "sieve login"

    def until_ok(self):
        while True:
            line = self.f.readline()
            if not line or line.startswith((b"OK", b"NO", b"BYE")):
                return line

    def close(self):
        self.s.close()


def test_who_lists_every_daemon():
    i = imaplib.IMAP4(HOST, IMAP_PORT, timeout=20)
    i.login("alice", "alice")
    i.select("INBOX")
    s = submission("alice")
    v = Sieve("alice")
    try:
        def sessions():
            return {(w["daemon"], w["user"], w["state"]) for w in who("alice")}
        wait_for(lambda: {("imapd", "alice", "selected"), ("mtad", "alice", "ready"),
                          ("managesieved", "alice", "auth")} <= sessions(), 20,
                 "alice's three sessions listed")
        rows = who("alice")
        for w in rows:
            assert w["address"].startswith("127.0.0.1:"), w
            assert isinstance(w["worker"], int) and isinstance(w["pid"], int), w
            assert isinstance(w["idle_seconds"], int) and w["idle_seconds"] >= 0, w
        assert [w for w in rows if w["daemon"] == "imapd"][0]["detail"] == "INBOX"
        # filters: another user, one daemon
        assert all(w["user"] == "alice" for w in rows)
        assert {w["daemon"] for w in who("--daemon", "imapd")} == {"imapd"}
        rc, out, _ = mailctl("who")
        assert rc == 0 and "alice" in out and "selected" in out, out
    finally:
        i.logout()
        s.quit()
        v.close()


def test_kick_closes_every_protocol():
    i = imaplib.IMAP4(HOST, IMAP_PORT, timeout=20)
    i.login("bob", "bob")
    i.select("INBOX")
    idle = imaplib.IMAP4(HOST, IMAP_PORT, timeout=20)
    idle.login("bob", "bob")
    idle.select("INBOX")
    tag = idle._new_tag().decode()
    idle.send(f"{tag} IDLE\r\n".encode())
    assert idle.readline().startswith(b"+")
    s = submission("bob")
    v = Sieve("bob")
    other = imaplib.IMAP4(HOST, IMAP_PORT, timeout=20)
    other.login("carol", "carol")
    wait_for(lambda: len([w for w in who("bob") if w["user"] == "bob"]) == 4, 20,
             "bob's four sessions")
    rc, out, err = mailctl("--json", "kick", "bob")
    assert rc == 0, (rc, out, err)
    r = valid("kick", json.loads(out))
    assert r["user"] == "bob" and r["kicked"] == 4, r
    assert {d["daemon"] for d in r["daemons"]} == {"mtad", "imapd", "managesieved"}, r
    # IMAP: BYE, and the connection ends
    try:
        i.noop()
        raise AssertionError("the kicked IMAP session went on")
    except imaplib.IMAP4.abort as e:
        assert "Disconnected by the administrator" in str(e), e
    line = idle.readline()
    assert b"BYE" in line and b"administrator" in line, line
    # SMTP: 421 between transactions
    try:
        code, text = s.noop()
        assert code == 421 and b"administrator" in text, (code, text)
    except smtplib.SMTPServerDisconnected:
        pass
    except smtplib.SMTPResponseException as e:
        assert e.smtp_code == 421, e
    # ManageSieve: BYE
    assert v.until_ok().startswith(b"BYE"), "managesieve BYE"
    v.close()
    # carol was left alone
    assert other.noop()[0] == "OK"
    other.logout()
    wait_for(lambda: who("bob") == [], 20, "bob's sessions gone")
    # nobody: 0 kicked, not an error
    rc, out, err = mailctl("kick", "nobody")
    assert rc == 0 and "kicked 0 sessions of nobody" in out, (rc, out, err)


def test_live_counters_move():
    rc, out, err = mailctl("--json", "stats", "--live", "--count", "2", "--interval", "1",
                           "--daemon", "mtad")
    assert rc == 0, (rc, out, err)
    first, second = [valid("stats --live", json.loads(line)) for line in out.splitlines()]
    key = 'heron_deliveries_total{status="local"}'
    before = first["daemons"][0]["metrics"][key]
    with smtplib.SMTP(HOST, SMTP_PORT, timeout=30) as s:
        s.sendmail("x@example.org", ["carol@heron.test"], "Subject: l\r\n\r\nlive\r\n")
    rc, out, err = mailctl("--json", "top", "--count", "2", "--interval", "1",
                           "--daemon", "mtad")
    assert rc == 0, (rc, out, err)
    last = [valid("top", json.loads(line)) for line in out.splitlines()][-1]
    assert last["daemons"][0]["daemon"] == "mtad"
    assert last["daemons"][0]["metrics"][key] == before + 1, (before, last)
    assert "rates" in last["daemons"][0]
    rc, out, err = mailctl("top", "--count", "1")
    assert rc == 0, (rc, out, err)
    for d in ("mtad", "imapd", "managesieved"):
        assert f"\n{d}  workers" in out, out
    assert "deliveries   local" in out and "commands" in out, out


def test_errors():
    rc, _, err = mailctl("who", "--daemon", "postfix")
    assert rc == 64 and "not one of" in err, (rc, err)
    rc, _, err = mailctl("kick")
    assert rc == 64, (rc, err)
    rc, _, err = mailctl("kick", "bad\nname")
    assert rc == 64, (rc, err)
    rc, _, err = mailctl("stats", "--interval", "1")
    assert rc == 64 and "--live" in err, (rc, err)
    rc, _, err = mailctl("top", "--interval", "0", "--count", "1")
    assert rc == 64, (rc, err)
    # the sink is not running: nothing answers for it
    rc, _, err = mailctl("who", "--daemon", "sink")
    assert rc == 75 and "no sink running" in err, (rc, err)


def test_stopped_daemon_leaves_no_socket():
    sieved.stop()
    assert not [f for f in os.listdir(TMP) if f.startswith("managesieved.") and
                f.endswith(".sock")], os.listdir(TMP)
    rc, _, err = mailctl("who", "--daemon", "managesieved")
    assert rc == 75, (rc, err)


def body():
    for d in (mtad, imapd, sieved):
        d.start()
    wait_port(SUB_PORT, 20, mtad.proc, "submission")
    for ident, n in (("mtad", 2), ("imapd", 2), ("managesieved", 1)):
        for k in range(n):
            wait_for(lambda: os.path.exists(os.path.join(TMP, f"{ident}.{k}.sock")), 20,
                     f"{ident} worker {k}'s control socket")
    return run_tests([test_who_lists_every_daemon, test_kick_closes_every_protocol,
                      test_live_counters_move, test_errors,
                      test_stopped_daemon_leaves_no_socket])


sys.exit(run_main(body, TMP, [mtad, imapd, sieved]))
