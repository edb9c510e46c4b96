#!/usr/bin/env python3
"""test_mailctl_schema.py — every mailctl command with --json output, run against a real
temporary store, its output validated against docs/schema/mailctl.schema.json (python3
jsonschema, draft 2020-12); failures validated against the schema's "error". Every command
`mailctl --help` lists must be either run here (or, for who/kick/stats --live/top, in
tests/metrics/test_control.py against running daemons) or named in the schema's
x-text-only, so a new command cannot go without a schema.

Usage: test_mailctl_schema.py MAILCTL MAILCTL_PLANT SOURCE_ROOT"""
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

import jsonschema

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import heronlib  # noqa: E402
from heronlib import run_tests  # noqa: E402

MAILCTL, PLANT, ROOT = sys.argv[1], sys.argv[2], sys.argv[3]
TMP = tempfile.mkdtemp(prefix="heron-mailctl-schema-")
with open(os.path.join(ROOT, "docs", "schema", "mailctl.schema.json")) as f:
    SCHEMA = json.load(f)
jsonschema.Draft202012Validator.check_schema(SCHEMA)
CONF = heronlib.write_conf(os.path.join(TMP, "heron.conf"), {
    "store": {"path": os.path.join(TMP, "store"), "partitions": 2, "map_size": "4M"},
    "mtad": {"user": pwd.getpwuid(os.geteuid()).pw_name}})
# commands run against daemons by tests/metrics/test_control.py
WITH_DAEMONS = {"who", "kick", "stats --live", "top"}
# run between two store hosts and a slapd by test_mailctl_move.py (tests/cluster/meson.build)
WITH_CLUSTER = {"user move"}
checked = set()


def validate(name, doc):
    """doc valid against $defs[name]; raises jsonschema's error naming the member."""
    assert name in SCHEMA["$defs"], name
    v = jsonschema.Draft202012Validator({**SCHEMA, "$ref": "#/$defs/" + name})
    v.validate(doc)


def js(name, *args, stdin=None, rc=0):
    """Runs `mailctl --json ARGS`, expects exit rc, validates each line of its output."""
    r = subprocess.run([MAILCTL, "-c", CONF, "--json", *args], input=stdin,
                       capture_output=True, timeout=120)
    assert r.returncode == rc, (args, r.returncode, r.stdout, r.stderr)
    doc = json.loads(r.stdout)
    validate(name if rc == 0 else "error", doc)
    if rc == 0:
        checked.add(name)
    return doc


def plant(sender, rcpt):
    r = subprocess.run([PLANT, CONF, "enqueue", sender, rcpt],
                       input=b"Subject: q\r\n\r\nx\r\n", capture_output=True, timeout=60)
    assert r.returncode == 0, r
    return r.stdout.decode().strip()


def path(name):
    return os.path.join(TMP, name)


def test_schema_refuses_wrong_types():
    """The schema is strict: a number as a string, a missing or an extra member fail."""
    good = {"user": "bob", "id": "0000000000000001", "partition": 0, "login": False,
            "tombstone_cleared": False}
    validate("user add", good)
    for bad in ({**good, "partition": "0"}, {**good, "extra": 1},
                {k: v for k, v in good.items() if k != "login"}, {**good, "id": 1}):
        try:
            validate("user add", bad)
        except jsonschema.ValidationError:
            continue
        raise AssertionError(("accepted", bad))


def test_store_commands():
    with open(path("in.mbox"), "wb") as f:
        f.write(b"From a Mon Jan  5 10:00:00 2026\nFrom: a@x\nSubject: one\n\nhi\n\n"
                b"From b Mon Jan  5 10:00:00 2026\nSubject: two\n\nho\n")
    js("user add", "user", "add", "bob")
    js("user add", "user", "add", "alice", "--partition", "1", "--quota-bytes", "1M")
    assert {u["user"] for u in js("user list", "user", "list", "--source", "store")} == \
        {"alice", "bob"}
    js("user show", "user", "show", "bob")
    js("error", "user", "show", "nobody", rc=67)
    js("quota get", "quota", "get", "bob")
    js("quota set", "quota", "set", "bob", "--messages", "10")
    js("mailbox create", "mailbox", "create", "bob", "Work", "--special", "archive")
    js("mailbox subscribe", "mailbox", "subscribe", "bob", "Work")
    js("mailbox unsubscribe", "mailbox", "unsubscribe", "bob", "Work")
    js("mailbox rename", "mailbox", "rename", "bob", "Work", "Job")
    js("mailbox list", "mailbox", "list", "bob")
    js("mailbox status", "mailbox", "status", "bob", "Job")
    js("mailbox status", "mailbox", "status", "bob")
    js("import", "import", "bob", path("in.mbox"))
    js("message list", "message", "list", "bob", "INBOX")
    js("message show", "message", "show", "bob", "INBOX", "1")
    js("message flags", "message", "flags", "bob", "INBOX", "1", "add", "\\Seen", "\\Deleted")
    js("search", "search", "bob", "INBOX", "ALL")
    js("fetch", "fetch", "bob", "INBOX", "ALL", "uid flags modseq size.physical")
    js("copy", "copy", "bob", "INBOX", "Job", "ALL")
    js("move", "move", "bob", "Job", "INBOX", "1")
    js("expunge", "expunge", "bob", "Job", "ALL")
    js("expunge", "expunge", "bob", "INBOX", "--deleted")
    js("message delete", "message", "delete", "bob", "INBOX", "2")
    js("export", "export", "bob", "INBOX", path("out.mbox"))
    js("export", "export", "bob", path("outdir"))
    got = js("acl set", "acl", "set", "bob", "INBOX", "alice", "lrs")
    assert got["rights"] == "lrs", got
    got = js("acl set", "acl", "set", "bob", "INBOX", "alice", "-s")
    assert got["rights"] == "lr", got
    js("acl set", "acl", "set", "bob", "INBOX", "-anyone", "w")
    got = js("acl get", "acl", "get", "bob", "INBOX")
    assert got == [{"identifier": "bob", "rights": "lrswipkxtecda"},
                   {"identifier": "-anyone", "rights": "w"},
                   {"identifier": "alice", "rights": "lr"}], got
    js("acl delete", "acl", "delete", "bob", "INBOX", "alice")
    js("error", "acl", "set", "bob", "INBOX", "bob", "l", rc=1)
    js("error", "acl", "get", "bob", "Nosuch", rc=1)
    js("mailbox delete", "mailbox", "delete", "bob", "Job")
    with open(path("s.sieve"), "w") as f:
        f.write("keep;\n")
    js("sieve check", "sieve", "check", "bob", path("s.sieve"))
    js("sieve put", "sieve", "put", "bob", "s", path("s.sieve"))
    js("sieve put", "sieve", "put", "bob", "t", path("s.sieve"), "--activate")
    js("sieve put-all", "sieve", "put-all", "site", path("s.sieve"))
    js("sieve list", "sieve", "list", "bob")
    got = js("sieve get", "sieve", "get", "bob")
    assert (got["script"], got["active"], got["source"]) == ("t", True, "keep;\n"), got
    js("sieve get", "sieve", "get", "bob", "s")
    js("error", "sieve", "get", "bob", "nosuch", rc=1)
    js("sieve activate", "sieve", "activate", "bob", "s")
    js("sieve rename", "sieve", "rename", "bob", "t", "u")
    js("sieve delete", "sieve", "delete", "bob", "u")
    js("sieve deactivate", "sieve", "deactivate", "bob")
    js("upgrade", "upgrade")
    js("fts rebuild", "fts", "rebuild", "bob")
    js("fts stats", "fts", "stats", "bob")
    qid = plant("s@heron.test", "r@remote.test")
    js("queue list", "queue", "list")
    js("queue show", "queue", "show", qid)
    js("queue show", "queue", "show", qid, "--message")
    for verb in ("hold", "release", "flush", "requeue", "delete"):
        js("queue " + verb, "queue", verb, qid)
    js("error", "queue", "show", qid, rc=1)
    js("verify", "verify")
    js("backup", "backup", path("bk"))
    js("stats", "stats")
    js("pw", "pw", stdin=b"secret\n")
    js("pw", "pw", "--scheme", "scram-sha-256", stdin=b"secret\n")
    js("dkim keygen", "dkim", "keygen", "heron.test", "sel", "--type", "ed25519",
       "--out", path("k.pem"))
    js("user rename", "user", "rename", "alice", "carol")
    js("user del", "user", "del", "carol")
    js("acl delete", "acl", "delete", "bob", "INBOX", "-anyone")
    js("restore", "restore", path("bk"), "--force")
    # the access list is in the backup's index: the delete after it is undone
    got = js("acl get", "acl", "get", "bob", "INBOX")
    assert got[1:] == [{"identifier": "-anyone", "rights": "w"}], got


def test_errors():
    """Refused commands under --json: one error object on stdout (error and hint), the exit
    code of mailctl(8), and nothing changed. A store of its own whose [sieve] quota is one
    script."""
    conf = heronlib.write_conf(path("err.conf"), {
        "store": {"path": path("err-store"), "partitions": 1, "map_size": "4M"},
        "sieve": {"max_scripts": 1}})

    def err(rc, words, *args, conf=conf, stdin=b""):
        r = subprocess.run([MAILCTL, "-c", conf, "--json", *args], capture_output=True,
                           input=stdin, timeout=120)
        assert r.returncode == rc, (args, r.returncode, r.stdout, r.stderr)
        lines = r.stdout.decode().splitlines()
        assert len(lines) == 1, (args, r.stdout)
        doc = json.loads(lines[0])
        validate("error", doc)
        assert words in doc["error"], (args, words, doc)
        assert doc["hint"], (args, doc)
        assert doc["error"] in r.stderr.decode(), (args, doc, r.stderr)
        return doc

    def ok(*args):
        r = subprocess.run([MAILCTL, "-c", conf, "--json", *args], capture_output=True,
                           timeout=120)
        assert r.returncode == 0, (args, r)
        return json.loads(r.stdout)

    with open(path("good.sieve"), "w") as f:
        f.write("keep;\n")
    with open(path("bad.sieve"), "w") as f:
        f.write('require "fileinto";\nif true {\n  fileinto "x"\n}\n')
    ok("user", "add", "dave")
    doc = err(1, "line 4, column 1", "sieve", "put", "dave", "bad", path("bad.sieve"))
    assert "RFC 5228" in doc["hint"], doc
    assert ok("sieve", "list", "dave") == []
    err(1, "line 4, column 1", "sieve", "check", "dave", path("bad.sieve"))
    err(1, "line 4, column 1", "sieve", "put-all", "bad", path("bad.sieve"))
    ok("sieve", "put", "dave", "one", path("good.sieve"), "--activate")
    doc = err(1, "quota: at most 1 scripts", "sieve", "put", "dave", "two",
              path("good.sieve"))
    assert "max_scripts" in doc["hint"], doc
    doc = err(1, "'one' is the active script", "sieve", "delete", "dave", "one")
    assert "sieve deactivate" in doc["hint"], doc
    assert [s["script"] for s in ok("sieve", "list", "dave")] == ["one"]
    doc = err(1, "no such script", "sieve", "get", "dave", "nosuch")
    assert "no such message" not in doc["error"] and "sieve list" in doc["hint"], doc
    err(1, "no such script", "sieve", "delete", "dave", "nosuch")
    err(1, "no such script", "sieve", "activate", "dave", "nosuch")
    ok("user", "add", "gina")
    doc = err(1, "'gina' has no active script", "sieve", "get", "gina")
    assert "(active)" not in doc["error"] and "sieve activate" in doc["hint"], doc
    for args in (("user", "show", "nobody"), ("sieve", "put", "nobody", "s",
                                              path("good.sieve")),
                 ("sieve", "list", "nobody"), ("message", "list", "nobody", "INBOX"),
                 ("quota", "get", "nobody"), ("mailbox", "create", "nobody", "X")):
        doc = err(67, "no such user", *args)
        assert "user list" in doc["hint"], doc
    for args in (("message", "list", "dave", "NoSuch"), ("mailbox", "status", "dave", "NoSuch"),
                 ("search", "dave", "NoSuch", "ALL"), ("export", "dave", "NoSuch",
                                                         path("x.mbox"))):
        doc = err(1, "no such mailbox", *args)
        assert "mailbox list" in doc["hint"], doc
    assert not os.path.exists(path("x.mbox"))
    err(64, "unknown command", "nosuch")
    err(64, "unknown verb", "sieve", "nosuch")
    err(64, "unknown option", "user", "show", "dave", "--nosuch")
    err(66, "No such file", "import", "dave", path("missing.mbox"))
    os.mkdir(path("exists"))
    err(1, "File exists", "backup", path("exists"))
    err(65, "not a Heron backup", "restore", path("exists"), "--force")
    # a bulk stream that does not parse, or is not there
    err(65, "import --bulk: line 1", "import", "--bulk", "-", stdin=b"not a stream\n")
    doc = err(65, "import --bulk: line 2", "import", "--bulk", "-",
              stdin=b"heron-bulk 1\n" + b"x" * 70000 + b"\n")
    assert "mailctl(8)" in doc["hint"], doc
    err(66, "No such file", "import", "--bulk", path("missing.bulk"))
    # the users file (backend = file): a login already in it is refused, the file unchanged;
    # --password with the ldap backend says where the login goes instead
    err(78, "backend is ldap", "user", "add", "erin", "--password", stdin=b"pw1\n")
    fconf = heronlib.write_conf(path("file.conf"), {
        "store": {"path": path("err-store"), "partitions": 1, "map_size": "4M"},
        "mtad": {"local_domains": "heron.test"},
        "directory": {"backend": "file", "users_file": path("users")}})
    r = subprocess.run([MAILCTL, "-c", fconf, "user", "add", "erin", "--password"],
                       input=b"pw1\n", capture_output=True, timeout=120)
    assert r.returncode == 0, r
    with open(path("users"), "ab") as f:  # a login in the file that the store does not have
        f.write(b"frank:{SSHA512}x:frank@heron.test\n")
    with open(path("users"), "rb") as f:
        before = f.read()
    assert before.startswith(b"erin:{"), before
    doc = err(1, "user 'frank' is in %s already" % path("users"), "user", "add", "frank",
              "--password", conf=fconf, stdin=b"pw2\n")
    assert "remove it first" in doc["hint"], doc
    with open(path("users"), "rb") as f:
        assert f.read() == before
    err(67, "no such user", "user", "show", "frank", conf=fconf)  # nor added to the store


class FakeWorker:
    """A daemon worker's control socket at path: answers each request line found in
    answers, and "ERR ..." to any other, then closes (control.h's protocol)."""

    def __init__(self, path, answers):
        self.path, self.answers, self.done = path, answers, False
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.done:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            with c:
                c.settimeout(10)
                with c.makefile("rb") as f:
                    line = f.readline(1024).decode().strip()
                c.sendall(self.answers.get(line, "ERR not this worker\n").encode())

    def close(self):
        self.done = True
        self.thread.join(10)
        self.sock.close()
        os.unlink(self.path)


def run_json(conf, *args, stdin=b""):
    """exit code, the documents printed (one, or auth test's one a line), standard
    error"""
    r = subprocess.run([MAILCTL, "-c", conf, "--json", *args], capture_output=True,
                       input=stdin, timeout=120)
    out = r.stdout.decode()
    try:
        docs = [json.loads(out)]
    except json.JSONDecodeError:  # one document a line
        docs = [json.loads(line) for line in out.splitlines()]
    return r.returncode, docs, r.stderr.decode()


def test_reports_are_results():
    """A report that finds something wrong is a result: verify with problems, auth test and
    lookup whatever the directory answered print their own object (schema-valid) with the
    exit code of mailctl(8), never the error object; what produces no report (usage, a
    directory that cannot be set up, no daemon answering) prints the error object only."""
    users = path("dir-users")
    conf = heronlib.write_conf(path("rep.conf"), {
        "store": {"path": path("rep-store"), "partitions": 1, "map_size": "4M"},
        "control": {"dir": path("no-daemons")},
        "directory": {"backend": "file", "users_file": users}})
    os.mkdir(path("no-daemons"))
    rc, out, _ = run_json(conf, "pw", "--scheme", "SSHA", stdin=b"s3cret\n")
    assert rc == 0, out
    with open(users, "w") as f:
        f.write("hana:%s:hana@heron.test,h@heron.test:2M\n" % out[0]["hash"])
    assert run_json(conf, "user", "add", "hana")[0] == 0
    r = subprocess.run([PLANT, conf, "counter", "hana", "INBOX"], capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r
    rc, out, err = run_json(conf, "verify")
    assert rc == 1 and len(out) == 1 and "--repair" in err, (rc, out, err)
    validate("verify", out[0])
    assert out[0]["status"] == "problems" and out[0]["bad_counters"] >= 1, out
    checked.add("verify")

    rc, out, _ = run_json(conf, "auth", "test", "-n", "2", "hana", stdin=b"s3cret\n")
    assert rc == 0 and len(out) == 2, (rc, out)
    for doc in out:
        validate("auth test", doc)
    assert [d["result"] for d in out] == ["ok", "ok"], out
    assert out[0]["aliases"] == ["h@heron.test"] and out[0]["quota"] == 2 * 1024 * 1024, out
    assert out[0]["partition"] is None and out[0]["dn"] is None, out
    for pw, code, result in ((b"wrong\n", 1, "wrong credentials"),
                             (b"x\n", 67, "no such user")):
        user = "hana" if code == 1 else "nobody"
        rc, out, _ = run_json(conf, "auth", "test", user, stdin=pw)
        assert rc == code and len(out) == 1, (user, rc, out)
        validate("auth test", out[0])
        assert out[0]["result"] == result and out[0]["user"] is None, out
    checked.add("auth test")
    rc, out, _ = run_json(conf, "lookup", "h@heron.test")
    assert rc == 0 and len(out) == 1 and out[0]["user"] == "hana", (rc, out)
    validate("lookup", out[0])
    rc, out, _ = run_json(conf, "lookup", "nobody@heron.test")
    assert rc == 67 and out[0]["result"] == "no such user", (rc, out)
    validate("lookup", out[0])
    checked.add("lookup")

    def refused(code, words, *args, conf=conf, stdin=b""):
        rc, out, err = run_json(conf, *args, stdin=stdin)
        assert rc == code and len(out) == 1, (args, rc, out, err)
        validate("error", out[0])
        assert words in out[0]["error"] and out[0]["hint"], (args, out)
        assert out[0]["error"] in err, (args, out, err)

    refused(64, "-n takes a count", "auth", "test", "-n", "0", "hana")
    refused(64, "too many arguments", "lookup", "a@heron.test", "b@heron.test")
    bad = heronlib.write_conf(path("bad-dir.conf"), {
        "store": {"path": path("rep-store"), "partitions": 1, "map_size": "4M"},
        "directory": {"uri": "http://nowhere/"}})
    refused(78, "directory:", "auth", "test", "hana", conf=bad, stdin=b"x\n")
    # the daemons' commands with no daemon running: nothing answers in [control] dir
    for args in (("who",), ("kick", "hana"), ("top", "--count", "1"),
                 ("stats", "--live", "--count", "1")):
        refused(75, "no daemon is running", *args)
    # one worker answers, the other does not: the result from the one (exit 75), standard
    # error naming the other; a fake control socket each, in the protocol of control.h
    bad_sock = FakeWorker(os.path.join(path("no-daemons"), "imapd.0.sock"), {})
    ok_sock = FakeWorker(os.path.join(path("no-daemons"), "imapd.1.sock"), {
        "who": "imapd\t1\t4242\t00000000000000aa\thana\t127.0.0.1:40000\timap\t"
               "selected\t1767607200\t3000\tINBOX\n.\n",
        "kick hana": "OK 1\n",
        "metrics": "# TYPE heron_connections_open gauge\nheron_connections_open 3\n# EOF\n"})
    try:
        rc, out, err = run_json(conf, "who")
        assert rc == 75 and len(out) == 1, (rc, out, err)
        validate("who", out[0])
        assert [(w["user"], w["worker"], w["idle_seconds"], w["detail"]) for w in out[0]] == \
            [("hana", 1, 3, "INBOX")], out
        assert "imapd worker 0" in err, err
        rc, out, err = run_json(conf, "kick", "hana")
        assert rc == 75 and len(out) == 1, (rc, out, err)
        validate("kick", out[0])
        assert out[0]["kicked"] == 1 and "imapd worker 0" in err, (out, err)
        rc, out, err = run_json(conf, "top", "--count", "1")
        assert rc == 75 and len(out) == 1, (rc, out, err)
        validate("top", out[0])
        assert [d["daemon"] for d in out[0]["daemons"]] == ["imapd"], out
        assert out[0]["daemons"][0]["metrics"]["heron_connections_open"] == 3, out
        assert "imapd worker 0: ERR" in err, err
    finally:
        ok_sock.close()
        bad_sock.close()
    nodir = heronlib.write_conf(path("nodir.conf"), {
        "store": {"path": path("rep-store"), "partitions": 1, "map_size": "4M"},
        "control": {"dir": ""}})
    refused(78, "[control] dir is empty", "who", conf=nodir)


def test_restore_failure_names_real_paths():
    """A backup missing a partition's index: restore names that file of the backup, exits
    65, and changes nothing (the store in place, no partial copy left); a backup that is
    complete then restores over it."""
    conf = heronlib.write_conf(path("rs.conf"), {
        "store": {"path": path("rs-store"), "partitions": 2, "map_size": "4M"}})
    for u in ("ivan", "jill"):
        assert run_json(conf, "user", "add", u)[0] == 0
    assert run_json(conf, "backup", path("rs-bk"))[0] == 0
    assert run_json(conf, "user", "add", "kim")[0] == 0
    shutil.copytree(path("rs-bk"), path("rs-bad"))
    missing = os.path.join(path("rs-bad"), "part1", "index.mdb")
    os.unlink(missing)
    rc, out, err = run_json(conf, "restore", path("rs-bad"), "--force")
    assert rc == 65 and len(out) == 1, (rc, out, err)
    validate("error", out[0])
    assert out[0]["error"] == "restore: reading %s: No such file or directory" % missing, out
    assert path("rs-store") + " is unchanged" in out[0]["hint"], out
    left = [n for n in os.listdir(TMP) if n.startswith("rs-store.")]
    assert left == [], left
    rc, out, _ = run_json(conf, "user", "list", "--source", "store")
    assert rc == 0 and {u["user"] for u in out[0]} == {"ivan", "jill", "kim"}, out
    rc, out, _ = run_json(conf, "restore", path("rs-bk"), "--force")
    assert rc == 0 and os.path.isdir(out[0]["replaced"]), out
    rc, out, _ = run_json(conf, "user", "list", "--source", "store")
    assert rc == 0 and {u["user"] for u in out[0]} == {"ivan", "jill"}, out


def mount_tmpfs(where, size):
    """A tmpfs of size at where (made): True, or False when this process cannot mount."""
    os.makedirs(where, exist_ok=True)
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", where],
                          capture_output=True, timeout=60).returncode == 0


def umount(where):
    subprocess.run(["umount", "-l", where], capture_output=True, timeout=60)


def tree(top):
    """Every path below top with its size (files) or None (directories): what a failed
    restore must leave as it was."""
    out = {}
    for d, dirs, files in os.walk(top):
        for n in dirs:
            out[os.path.join(d, n)] = None
        for n in files:
            out[os.path.join(d, n)] = os.path.getsize(os.path.join(d, n))
    return out


def restore_fails(conf, code, bk, error, hint, *more):
    """restore BK with and without --json: exit code, the error naming the real path
    (error is its start: the pid in a partial copy's name varies), the hint saying where
    the store is; the text output says the same on standard error."""
    rc, out, err = run_json(conf, "restore", bk, *more)
    assert rc == code and len(out) == 1, (code, rc, out, err)
    validate("error", out[0])
    assert out[0]["error"].startswith(error), (error, out)
    assert hint in out[0]["hint"], (hint, out)
    assert out[0]["error"] in err, (out, err)
    r = subprocess.run([MAILCTL, "-c", conf, "restore", bk, *more], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == code and r.stdout == "", r
    assert "mailctl: " + error in r.stderr and hint in r.stderr, (error, hint, r.stderr)
    return out[0]


def test_restore_exit_codes():
    """mailctl(8)'s codes of a failed restore, each provoked for real, with and without
    --json; each changes nothing (the store in place or none made, no partial copy, nothing
    set aside) and names the path that failed: 73 the new copy cannot be made (its place
    below a file; a read-only filesystem), 74 a file of the backup that cannot be read (a
    directory where its index should be), 75 the disk is full (a 1 MiB tmpfs). The
    read-only and full cases need a tmpfs (root): said and skipped without one."""
    conf = heronlib.write_conf(path("rx.conf"), {
        "store": {"path": path("rx-store"), "partitions": 2, "map_size": "4M"}})
    big = b"".join(b"From a Mon Jan  5 10:00:00 2026\nSubject: big %d\n\n" % i +
                   (b"y" * 76 + b"\n") * 4000 for i in range(6))  # about 1.8 MB
    with open(path("rx.mbox"), "wb") as f:
        f.write(big)
    for u in ("lea", "max"):
        assert run_json(conf, "user", "add", u)[0] == 0
    assert run_json(conf, "import", "lea", path("rx.mbox"))[0] == 0
    bk = path("rx-bk")
    assert run_json(conf, "backup", bk)[0] == 0
    store = path("rx-store")

    # 73: [store] path below a regular file: the copy beside it cannot be made
    with open(path("rx-file"), "w") as f:
        f.write("not a directory\n")
    below = os.path.join(path("rx-file"), "store")
    c73 = heronlib.write_conf(path("rx73.conf"), {
        "store": {"path": below, "partitions": 2, "map_size": "4M"}})
    doc = restore_fails(c73, 73, bk, "restore: creating %s.restore-" % below,
                        "no store was made at " + below)
    assert doc["error"].endswith(": Not a directory"), doc
    assert doc["hint"].endswith("; %s is not a directory" % path("rx-file")), doc
    assert "partial copy" not in doc["hint"], doc  # none was made
    with open(path("rx-file")) as f:
        assert f.read() == "not a directory\n"

    # 74: the backup's index of partition 0 is a directory: reading it fails (not missing:
    # that is 65); --force over the store, which stays as it was
    bad = path("rx-bad")
    shutil.copytree(bk, bad)
    idx = os.path.join(bad, "part0", "index.mdb")
    os.unlink(idx)
    os.mkdir(idx)
    assert run_json(conf, "user", "add", "ned")[0] == 0  # the store differs from the backup
    before = tree(store)
    doc = restore_fails(conf, 74, bad, "restore: reading %s: Is a directory" % idx,
                        "the store at %s is unchanged" % store, "--force")
    assert doc["error"] == "restore: reading %s: Is a directory" % idx, doc
    assert tree(store) == before
    assert [n for n in os.listdir(TMP) if n.startswith("rx-store.")] == []
    # 66: no such backup
    restore_fails(conf, 66, "rx-none", "rx-none: No such file or directory",
                  "mailctl backup", "--force")
    assert tree(store) == before
    rc, out, _ = run_json(conf, "user", "list", "--source", "store")
    assert rc == 0 and {u["user"] for u in out[0]} == {"lea", "max", "ned"}, out

    mnt = path("rx-mnt")
    if not mount_tmpfs(mnt, "1m"):
        print("SKIP (in test_restore_exit_codes): 73 on a read-only filesystem and 75 "
              "need a tmpfs (root)", flush=True)
        return
    try:
        # 75: the disk fills during the copy; no store made, the partial copy removed
        full = os.path.join(mnt, "store")
        c75 = heronlib.write_conf(path("rx75.conf"), {
            "store": {"path": full, "partitions": 2, "map_size": "4M"}})
        doc = restore_fails(c75, 75, bk, "restore: writing %s.restore-" % full,
                            "no store was made at " + full)
        assert doc["error"].endswith(": No space left on device"), doc
        failed = doc["error"].split(": ")[1].split(" ", 1)[1]  # the file being written
        assert failed.startswith(full + ".restore-") and "/blobs/" in failed, doc
        tmp = failed.split("/part")[0]
        assert ("(the partial copy %s is removed); free space on the filesystem of %s"
                % (tmp, mnt)) in doc["hint"], doc
        assert os.listdir(mnt) == [], os.listdir(mnt)
        # 73: read-only (a store there, --force): nothing can be made beside it
        umount(mnt)
        assert mount_tmpfs(mnt, "64m")
        ro = os.path.join(mnt, "store")
        cro = heronlib.write_conf(path("rxro.conf"), {
            "store": {"path": ro, "partitions": 2, "map_size": "4M"}})
        assert run_json(cro, "user", "add", "ro")[0] == 0
        before = tree(mnt)
        r = subprocess.run(["mount", "-o", "remount,ro", mnt], capture_output=True,
                           timeout=60)
        assert r.returncode == 0, r
        doc = restore_fails(cro, 73, bk, "restore: creating %s.restore-" % ro,
                            "the store at %s is unchanged" % ro, "--force")
        assert doc["hint"].endswith("; %s is on a read-only filesystem" % mnt), doc
        assert tree(mnt) == before
    finally:
        umount(mnt)


def test_every_command_covered():
    """Each command of `mailctl --help` is checked here or by test_control, or is text-only."""
    out = subprocess.run([MAILCTL, "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    cmds = set()
    for line in out.splitlines():
        m = re.match(r"\s+mailctl ([a-z]+)(?: ([a-z][a-z-]*))?", line)
        if m:
            cmds.add(" ".join(x for x in m.groups() if x))
    assert len(cmds) > 40, cmds
    # `mailctl import`'s verb slot holds its arguments: nouns without a verb
    cmds = {c if c in SCHEMA["$defs"] or c in SCHEMA["x-text-only"] else c.split()[0]
            for c in cmds}
    missing = cmds - checked - WITH_DAEMONS - WITH_CLUSTER - set(SCHEMA["x-text-only"])
    assert not missing, ("commands neither checked nor text-only", sorted(missing))
    for name in WITH_DAEMONS | WITH_CLUSTER:
        assert name in SCHEMA["$defs"], name


TESTS = [test_schema_refuses_wrong_types, test_store_commands, test_errors,
         test_reports_are_results, test_restore_failure_names_real_paths,
         test_restore_exit_codes, test_every_command_covered]

try:
    rc = run_tests(TESTS)
finally:
    shutil.rmtree(TMP, ignore_errors=True)
sys.exit(rc)
