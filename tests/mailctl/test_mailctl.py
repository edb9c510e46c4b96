#!/usr/bin/env python3
"""test_mailctl.py — mailctl end to end: the real binary on a temporary store whose config the
test writes. Every noun, exit codes 0/1/2, --json parsed, import → export → import
byte-identical for mbox and Maildir (flags, keywords and dates kept), verify detecting and
repairing planted damage (deleted message file, orphan file, corrupted counters), backup and
restore, the queue, and the directory commands (auth test, lookup) on a users file.

Usage: test_mailctl.py MAILCTL MAILCTL_PLANT"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import heronlib  # noqa: E402
from heronlib import file_directory, run_tests, ssha  # noqa: E402

MAILCTL, PLANT = sys.argv[1], sys.argv[2]
TMP = tempfile.mkdtemp(prefix="heron-mailctl-")


def write_conf(name, store, partitions=2, more=None):
    """TMP/name: a [store] at store, plus the sections of more."""
    return heronlib.write_conf(os.path.join(TMP, name), {
        "store": {"path": store, "partitions": partitions, "map_size": "4M"}, **(more or {})})


CONF = write_conf("heron.conf", os.path.join(TMP, "store"))


def run(*args, conf=None, stdin=None):
    """(exit code, stdout bytes, stderr text)"""
    r = subprocess.run([MAILCTL, "-c", conf or CONF, *args], input=stdin,
                       capture_output=True, timeout=120)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def ok(*args, conf=None, stdin=None):
    rc, out, err = run(*args, conf=conf, stdin=stdin)
    assert rc == 0, (args, rc, out, err)
    return out


def js(*args, conf=None):
    """Runs with --json, expects exit 0, returns the parsed output."""
    return json.loads(ok("--json", *args, conf=conf))


def fails(code, *args, conf=None, stdin=None, says=None):
    rc, out, err = run(*args, conf=conf, stdin=stdin)
    assert rc == code, (args, rc, out, err)
    assert err.startswith("mailctl") or err.startswith("usage"), (args, err)
    if says:
        assert says in err, (args, says, err)
    return err


def raw(user, mailbox, uid, conf=None):
    return ok("message", "show", user, mailbox, str(uid), "--raw", conf=conf)


def messages(user, mailbox, conf=None):
    return js("message", "list", user, mailbox, conf=conf)


def bodies(user, mailbox, conf=None):
    """[(bytes, flags, date)] in UID order."""
    return [(raw(user, mailbox, m["uid"], conf), m["flags"], m["date"])
            for m in messages(user, mailbox, conf)]


# --------------------------------------------------------------------------------------
def test_usage():
    rc, out, _ = run("--help")
    assert rc == 0 and b"mailctl user add" in out and b"mailctl lookup" in out, out
    out = ok("user", "--help")
    assert b"user rename" in out and b"user show" in out and b"mailbox list" not in out, out
    out = ok("import", "--help")
    assert b"--mailbox" in out, out
    out = ok("message", "flags", "--help")
    assert b"add|remove|set" in out, out
    fails(78, "user", "list")                   # no store yet: says where it looked
    fails(64, "frobnicate")
    fails(64, "user", "frobnicate")
    fails(64, "user", "add", says="missing arguments")
    fails(64, "user", "add", "a", "b", says="too many arguments")
    fails(64, "user", "add", "a", "--bogus", says="unknown option")
    rc, _, err = run("-c", os.path.join(TMP, "nope.conf"), "stats", conf=CONF)
    assert rc == 78, rc
    bad = os.path.join(TMP, "bad.conf")
    with open(bad, "w") as f:
        f.write("[store]\nno_such_key = 1\n")
    fails(78, "stats", conf=bad, says="bad.conf:2")
    out = ok("-t").decode()
    assert "partitions" in out and "heron.conf:" in out, out   # values with their origin
    fails(78, "-t", conf=bad, says="bad.conf:2")


def test_users():
    out = ok("user", "add", "bob")
    assert b"created in partition" in out, out
    u = js("user", "add", "alice", "--partition", "1", "--quota-bytes", "10M")
    assert u["user"] == "alice" and u["partition"] == 1, u
    fails(1, "user", "add", "bob", says="already exists")
    fails(64, "user", "add", "x", "--partition", "9")
    fails(64, "user", "add", "bad\nname", says="invalid argument")
    users = {u["user"]: u for u in js("user", "list", "--source", "store")}
    assert set(users) == {"alice", "bob"}, users
    assert users["alice"]["quota_bytes"] == 10 << 20 and users["alice"]["partition"] == 1
    assert [u["user"] for u in js("user", "list", "al*", "--source", "store")] == ["alice"]
    show = js("user", "show", "bob")
    assert show["mailboxes"] == 1 and show["messages"] == 0, show
    fails(67, "user", "show", "nobody", says="user list")
    ok("user", "add", "tmp")
    ok("user", "rename", "tmp", "tmp2")
    fails(1, "user", "rename", "tmp2", "bob", says="already exists")
    fails(67, "user", "show", "tmp")
    ok("user", "del", "tmp2")
    fails(67, "user", "del", "tmp2")
    human = ok("user", "list", "--source", "store").decode()
    assert human.splitlines()[0].split()[:3] == ["user", "source", "partition"], human


def test_quota():
    q = js("quota", "set", "bob", "--messages", "3")
    assert q["quota_messages"] == 3 and q["quota_bytes"] == 0, q
    q = js("quota", "set", "bob", "--bytes", "1k")
    assert q["quota_messages"] == 3 and q["quota_bytes"] == 1024, q
    fails(64, "quota", "set", "bob")
    fails(64, "quota", "set", "bob", "--bytes", "lots")
    mbox = b"".join(b"From a Mon Jan  5 10:00:00 2026\nSubject: %d\n\nx\n\n" % i
                    for i in range(5))
    path = os.path.join(TMP, "quota.mbox")
    with open(path, "wb") as f:
        f.write(mbox)
    fails(1, "import", "bob", path, says="quota")
    q = js("quota", "get", "bob")
    assert q["messages"] == 0, q  # the batch was refused whole
    js("quota", "set", "bob", "--bytes", "0", "--messages", "0")


def test_mailboxes():
    ok("mailbox", "create", "bob", "Work/Projects/2026", "--special", "archive")
    fails(1, "mailbox", "create", "bob", "Work", says="already exists")
    fails(64, "mailbox", "create", "bob", "X", "--special", "nonsense")
    names = [m["mailbox"] for m in js("mailbox", "list", "bob")]
    assert names == ["INBOX", "Work", "Work/Projects", "Work/Projects/2026"], names
    assert [m["mailbox"] for m in js("mailbox", "list", "bob", "Work/%")] == ["Work/Projects"]
    ok("mailbox", "subscribe", "bob", "Work")
    subs = [m["mailbox"] for m in js("mailbox", "list", "bob", "--subscribed")]
    assert "Work" in subs, subs
    ok("mailbox", "unsubscribe", "bob", "Work")
    assert "Work" not in [m["mailbox"] for m in js("mailbox", "list", "bob", "--subscribed")]
    st = js("mailbox", "status", "bob", "Work/Projects/2026")
    assert st["special"] == "\\Archive" and st["messages"] == 0 and st["uidnext"] == 1, st
    assert len(js("mailbox", "status", "bob")) == 4
    ok("mailbox", "rename", "bob", "Work", "Job")
    names = [m["mailbox"] for m in js("mailbox", "list", "bob")]
    assert names == ["INBOX", "Job", "Job/Projects", "Job/Projects/2026"], names
    ok("mailbox", "delete", "bob", "Job/Projects/2026")
    fails(1, "mailbox", "status", "bob", "Job/Projects/2026", says="mailbox list")
    fails(1, "mailbox", "delete", "bob", "INBOX")
    fails(67, "mailbox", "list", "nobody")


# --------------------------------------------------------------------------------------
LONG = b"L" * 200000  # longer than mailctl's read buffer: comes in pieces
MBOX = (
    b"From alice@example.com Mon Jan  5 10:00:00 2026\n"
    b"From: alice@example.com\nSubject: one\nStatus: RO\nX-Status: AF\n"
    b"X-Keywords: $Label1 work\nX-UID: 7\n\n"
    b"Hello\n>From quoted once\n>>From quoted twice\nFrom unquoted mboxo line\n\n"
    b"From bob Tue Feb 10 11:30:00 2026\n"
    b"Subject: two\nX-Keywords: a,\n b\nX-Status: T\n\nline\r with a CR\n8bit \xe9\xff\n"
    + LONG + b"\n\n\n"
    b"From x Wed Mar 11 12:00:00 2026\nSubject: three\nX-Status: D\n\n"
    b"no newline at end")


def test_mbox_round_trip():
    src = os.path.join(TMP, "in.mbox")
    with open(src, "wb") as f:
        f.write(MBOX)
    ok("user", "add", "m1")
    ok("user", "add", "m2")
    r = js("import", "m1", src, "--mailbox", "Old/Mail")
    assert r["imported"] == 3 and r["first_uid"] == 1 and r["last_uid"] == 3, r
    first = bodies("m1", "Old/Mail")
    flags = [f for _, f, _ in first]
    dates = [d for _, _, d in first]
    assert flags == ["\\Seen \\Answered \\Flagged $Label1 work", "\\Draft a b", "\\Deleted"]
    assert dates == ["2026-01-05T10:00:00Z", "2026-02-10T11:30:00Z", "2026-03-11T12:00:00Z"]
    b1, b2, b3 = (b for b, _, _ in first)
    assert b1 == (b"From: alice@example.com\r\nSubject: one\r\n\r\nHello\r\n"
                  b"From quoted once\r\n>From quoted twice\r\nFrom unquoted mboxo line\r\n"), b1
    assert b2 == (b"Subject: two\r\n\r\nline\r with a CR\r\n8bit \xe9\xff\r\n" + LONG +
                  b"\r\n\r\n"), b2[:80]
    assert b3 == b"Subject: three\r\n\r\nno newline at end\r\n", b3

    out1, out2 = os.path.join(TMP, "out1.mbox"), os.path.join(TMP, "out2.mbox")
    r = js("export", "m1", "Old/Mail", out1)
    assert r["exported"] == 3 and r["format"] == "mbox", r
    fails(1, "export", "m1", "Old/Mail", out1, says="does not exist")
    data = open(out1, "rb").read()
    assert b"\n>From quoted once\n>>From quoted twice\n>From unquoted" in data, data[:400]
    assert b"\r" not in data.replace(b"line\r with", b""), "CRLF must be LF in mbox"
    ok("import", "m2", out1)
    assert bodies("m2", "INBOX") == first          # byte-identical, same flags and dates
    ok("export", "m2", "INBOX", out2)
    assert open(out2, "rb").read() == data

    # an mbox written with CRLF line ends imports to the same messages
    crlf = os.path.join(TMP, "crlf.mbox")
    with open(crlf, "wb") as f:
        f.write(data.replace(b"\n", b"\r\n"))
    ok("mailbox", "create", "m2", "FromCRLF")
    ok("import", "m2", crlf, "--mailbox", "FromCRLF")
    assert [b for b, _, _ in bodies("m2", "FromCRLF")] == [b for b, _, _ in first]

    # dates: a From_ line with a zone, and a Date: header when the From_ line has none
    dated = os.path.join(TMP, "dated.mbox")
    with open(dated, "wb") as f:
        f.write(b"From a@x Mon Jan  5 10:00:00 +0100 2026\nSubject: z\n\nzone\n\n"
                b"From nodate\nDate: Tue, 10 Feb 2026 11:30:00 -0500\nSubject: d\n\nb\n")
    ok("mailbox", "create", "m2", "Dated")
    ok("import", "m2", dated, "--mailbox", "Dated")
    assert [m["date"] for m in messages("m2", "Dated")] == ["2026-01-05T09:00:00Z",
                                                            "2026-02-10T16:30:00Z"]

    notmbox = os.path.join(TMP, "not.mbox")
    with open(notmbox, "wb") as f:
        f.write(b"Subject: hi\n\nbody\n")
    fails(65, "import", "m2", notmbox, says="not an mbox")
    fails(66, "import", "m2", os.path.join(TMP, "missing"))
    fails(67, "import", "nobody", src, says="user add")


def test_maildir_round_trip():
    md = os.path.join(TMP, "md-in")
    for sub in ("cur", "new", "tmp"):
        os.makedirs(os.path.join(md, sub))
    with open(os.path.join(md, "dovecot-keywords"), "w") as f:
        f.write("0 $Important\n1 project\n")
    files = [("cur", "1700000000.A.host:2,FRSa", b"Subject: a\n\nfirst\n", 1700000000),
             ("cur", "1700000100.B.host:2,DTb", b"Subject: b\r\n\r\nsecond\r\n", 1700000100),
             ("cur", "1700000150.P.host:2,P", b"Subject: p\n\npassed\n", 1700000150),
             ("new", "1700000200.C.host", b"Subject: c\n\nno final newline", 1700000200)]
    for sub, name, body, t in files:
        p = os.path.join(md, sub, name)
        with open(p, "wb") as f:
            f.write(body)
        os.utime(p, (t, t))
    ok("user", "add", "d1")
    ok("user", "add", "d2")
    assert js("import", "d1", md)["imported"] == 4
    first = bodies("d1", "INBOX")
    assert [b for b, _, _ in first] == [b"Subject: a\r\n\r\nfirst\r\n",
                                        b"Subject: b\r\n\r\nsecond\r\n",
                                        b"Subject: p\r\n\r\npassed\r\n",
                                        b"Subject: c\r\n\r\nno final newline"]
    assert [f for _, f, _ in first] == ["\\Seen \\Answered \\Flagged $Important",
                                        "\\Deleted \\Draft project", "$Forwarded", ""], first
    assert first[0][2] == "2023-11-14T22:13:20Z", first[0][2]

    out1, out2 = os.path.join(TMP, "md-out1"), os.path.join(TMP, "md-out2")
    assert js("export", "d1", "INBOX", out1, "--format", "maildir")["exported"] == 4
    names = sorted(os.listdir(os.path.join(out1, "cur")))
    assert len(names) == 4 and os.listdir(os.path.join(out1, "new")) == []
    assert names[0].endswith(":2,FRSa"), names
    st = os.stat(os.path.join(out1, "cur", names[0]))
    assert int(st.st_mtime) == 1700000000, st
    ok("import", "d2", out1)
    assert bodies("d2", "INBOX") == first          # byte-identical, same flags and dates
    ok("export", "d2", "INBOX", out2, "--format", "maildir")
    c1 = sorted(open(os.path.join(out1, "cur", n), "rb").read() for n in names)
    c2 = sorted(open(os.path.join(out2, "cur", n), "rb").read()
                for n in os.listdir(os.path.join(out2, "cur")))
    assert c1 == c2
    fails(64, "export", "d2", "INBOX", os.path.join(TMP, "x"), "--format", "mh")

    # Maildir++ folders: ".Sent", ".Work.Projects" become mailboxes, each with its keywords
    tree = os.path.join(TMP, "md-tree")
    for folder, body, kw in (("", b"Subject: root\n\n", None),
                             (".Sent", b"Subject: sent\n\n", "0 sentkw\n"),
                             (".Work.Projects", b"Subject: proj\n\n", None)):
        d = os.path.join(tree, folder)
        for sub in ("cur", "new", "tmp"):
            os.makedirs(os.path.join(d, sub))
        with open(os.path.join(d, "cur", "1700000000.X.host:2,Sa"), "wb") as f:
            f.write(body)
        os.utime(os.path.join(d, "cur", "1700000000.X.host:2,Sa"), (1700000000, 1700000000))
        if kw:
            with open(os.path.join(d, "dovecot-keywords"), "w") as f:
                f.write(kw)
    ok("user", "add", "d3")
    r = js("import", "d3", tree)
    assert r["imported"] == 3 and r["folders"] == 2 and r["first_uid"] == 1, r
    names = [m["mailbox"] for m in js("mailbox", "list", "d3")]
    assert names == ["INBOX", "Sent", "Work", "Work/Projects"], names
    assert bodies("d3", "Sent") == [(b"Subject: sent\r\n\r\n", "\\Seen sentkw",
                                     "2023-11-14T22:13:20Z")]
    assert messages("d3", "INBOX")[0]["flags"] == "\\Seen"  # no dovecot-keywords at root
    r = js("import", "d3", tree, "--mailbox", "Old")
    names = [m["mailbox"] for m in js("mailbox", "list", "d3", "Old*")]
    assert names == ["Old", "Old/Sent", "Old/Work", "Old/Work/Projects"], names
    assert raw("d3", "Old/Work/Projects", 1) == b"Subject: proj\r\n\r\n"

    # across formats: Maildir → mbox → store keeps the bytes of CRLF-terminated messages
    mb = os.path.join(TMP, "md.mbox")
    ok("export", "d2", "INBOX", mb)
    ok("mailbox", "create", "d2", "Again")
    ok("import", "d2", mb, "--mailbox", "Again")
    again = bodies("d2", "Again")
    assert [x for x in again[:3]] == first[:3], again


# --------------------------------------------------------------------------------------
def test_messages():
    ok("user", "add", "f1")
    src = os.path.join(TMP, "in.mbox")
    ok("import", "f1", src)
    ms = messages("f1", "INBOX")
    assert [m["uid"] for m in ms] == [1, 2, 3] and all(m["size"] > 0 for m in ms), ms
    assert [(m["from"], m["subject"]) for m in ms] == [("alice@example.com", "one"),
                                                      (None, "two"), (None, "three")], ms
    assert [m["uid"] for m in js("message", "list", "f1", "INBOX", "2:*")] == [2, 3]
    assert [m["uid"] for m in js("message", "list", "f1", "INBOX", "3,1")] == [1, 3]
    fails(64, "message", "list", "f1", "INBOX", "x:y")
    r = js("message", "flags", "f1", "INBOX", "1:2", "add", "\\Flagged", "todo")
    assert [m["flags"] for m in r] == ["\\Seen \\Answered \\Flagged $Label1 work todo",
                                       "\\Flagged \\Draft a b todo"], r
    r = js("message", "flags", "f1", "INBOX", "1", "remove", "\\Seen", "todo")
    assert r[0]["flags"] == "\\Answered \\Flagged $Label1 work", r
    r = js("message", "flags", "f1", "INBOX", "2", "set", "\\Seen")
    assert r[0]["flags"] == "\\Seen", r
    r = js("message", "flags", "f1", "INBOX", "3")
    assert r[0]["flags"] == "\\Deleted", r
    fails(64, "message", "flags", "f1", "INBOX", "1", "add", "\\Bogus")
    fails(64, "message", "flags", "f1", "INBOX", "1", "toggle", "\\Seen")
    st = js("mailbox", "status", "f1", "INBOX")
    assert st["messages"] == 3 and st["deleted"] == 1 and st["unseen"] == 2, st

    m = js("message", "show", "f1", "INBOX", "3")
    assert m["uid"] == 3 and m["message"] == "Subject: three\r\n\r\nno newline at end\r\n", m
    m2 = js("message", "show", "f1", "INBOX", "2")
    assert m2["message"].encode("utf-8", "surrogatepass").count(b"L") >= 200000
    human = ok("message", "show", "f1", "INBOX", "3")
    assert human.startswith(b"uid: 3\n") and human.endswith(b"no newline at end\r\n"), human
    fails(1, "message", "show", "f1", "INBOX", "99", says="message list")
    fails(64, "message", "show", "f1", "INBOX", "zero")

    r = js("expunge", "f1", "INBOX", "--deleted")
    assert r == {"expunged": 1, "uids": [3]}, r
    fails(64, "expunge", "f1", "INBOX", says="--deleted")
    fails(64, "expunge", "f1", "INBOX", "--before", "someday")
    r = js("expunge", "f1", "INBOX", "--before", "2026-02-01")
    assert r["uids"] == [1], r
    r = js("message", "delete", "f1", "INBOX", "1:*")
    assert r["uids"] == [2], r
    assert messages("f1", "INBOX") == []
    assert js("quota", "get", "f1")["messages"] == 0
    ok("import", "f1", src)
    assert js("expunge", "f1", "INBOX", "--all")["expunged"] == 3


def test_queue():
    ids = []
    for rcpts in (["r1@remote.test", "r2@remote.test"], ["r3@remote.test"]):
        r = subprocess.run([PLANT, CONF, "enqueue", "sender@heron.test", *rcpts],
                           input=b"Subject: q\r\n\r\nqueued\r\n", capture_output=True,
                           timeout=60)
        assert r.returncode == 0, r
        ids.append(r.stdout.decode().strip())
    q = js("queue", "list")
    assert [e["id"] for e in q] == ids, q
    assert q[0]["recipients"] == 2 and q[0]["pending"] == 2 and not q[0]["held"], q
    s = js("queue", "show", ids[0])
    assert s["entry"]["sender"] == "sender@heron.test", s
    assert [r["recipient"] for r in s["recipients"]] == ["r1@remote.test", "r2@remote.test"]
    assert s["recipients"][0]["state"] == "pending", s
    ok("queue", "hold", ids[0])
    assert js("queue", "list")[0]["held"] is True
    ok("queue", "release", ids[0])
    assert js("queue", "list")[0]["held"] is False
    ok("queue", "flush")
    ok("queue", "flush", ids[1])
    ok("queue", "delete", ids[1])
    fails(1, "queue", "show", ids[1], says="queue list")
    fails(64, "queue", "hold", "not-hex")
    assert [e["id"] for e in js("queue", "list")] == [ids[0]]
    human = ok("queue", "show", ids[0]).decode()
    assert "r2@remote.test" in human and "sender@heron.test" in human, human
    s = js("queue", "show", ids[0], "--message")
    assert s["message"] == "Subject: q\r\n\r\nqueued\r\n" and s["tries"] == [], s
    out = ok("queue", "show", ids[0], "--message").decode()
    assert out.endswith("*** message ***\nSubject: q\r\n\r\nqueued\r\n"), out


def plant_queue(*entries):
    """[(sender, [rcpts])] enqueued; their ids."""
    ids = []
    for sender, rcpts in entries:
        r = subprocess.run([PLANT, CONF, "enqueue", sender, *rcpts],
                           input=f"Subject: {sender}\r\n\r\nx\r\n".encode(),
                           capture_output=True, timeout=60)
        assert r.returncode == 0, r
        ids.append(r.stdout.decode().strip())
    return ids


def test_queue_select():
    ok("queue", "delete", "ALL")
    assert js("queue", "list") == []
    ids = plant_queue(("a@heron.test", ["x@one.test"]), ("b@heron.test", ["y@two.test"]),
                      ("", ["z@two.test", "w@one.test"]))
    # a selection that is refused changes nothing
    fails(64, "queue", "delete")
    fails(64, "queue", "delete", ids[0], "--to", "x@one.test", says="not both")
    fails(64, "queue", "delete", "--before", "yesterday-ish")
    fails(64, "queue", "flush", "--domain", "x@one.test")
    fails(1, "queue", "requeue", "00000000000000ff")
    assert len(js("queue", "list")) == 3
    # list filters: address, @domain, the null sender, before
    assert [e["id"] for e in js("queue", "list", "--to", "@two.test")] == ids[1:]
    assert [e["id"] for e in js("queue", "list", "--from", "<>")] == ids[2:]
    assert [e["id"] for e in js("queue", "list", "--from", "A@HERON.TEST")] == ids[:1]
    assert js("queue", "list", "--before", "2000-01-01") == []
    r = js("queue", "hold", "--to", "@one.test")
    assert r == {"done": "held", "count": 2, "ids": [ids[0], ids[2]]}, r
    assert [e["held"] for e in js("queue", "list")] == [True, False, True]
    r = js("queue", "release", "ALL")
    assert r["count"] == 3 and not any(e["held"] for e in js("queue", "list")), r
    r = js("queue", "flush", "--domain", "two.test")
    assert r["ids"] == ids[1:], r
    r = js("queue", "requeue", ids[1])
    assert r == {"done": "requeued", "count": 1, "ids": [ids[1]]}, r
    assert js("queue", "delete", "--to", "nobody@nowhere.test")["count"] == 0
    r = js("queue", "delete", "--from", "b@heron.test", "--to", "@two.test")
    assert r["ids"] == [ids[1]], r
    fails(1, "queue", "show", ids[1])
    assert ok("queue", "delete", "ALL").decode() == "queue: 2 entries deleted\n"
    assert js("queue", "list") == []
    assert js("verify")["status"] == "clean"


# --------------------------------------------------------------------------------------
def blob_path(store, user, mailbox, uid, conf=None):
    part = js("user", "show", user, conf=conf)["partition"]
    blob = [m for m in messages(user, mailbox, conf) if m["uid"] == uid][0]["blob"]
    return os.path.join(store, f"part{part}", "blobs", blob[:2], blob)


def test_verify():
    store = os.path.join(TMP, "vstore")
    conf = write_conf("verify.conf", store)
    ok("user", "add", "v1", conf=conf)
    ok("import", "v1", os.path.join(TMP, "in.mbox"), conf=conf)
    js("message", "flags", "v1", "INBOX", "1", "add", "kept", conf=conf)
    r = js("verify", conf=conf)
    assert r["status"] == "clean" and r["messages"] == 3 and r["users"] == 1, r
    flags_before = {m["uid"]: m["flags"] for m in messages("v1", "INBOX", conf)}

    # damage: message 2's file deleted, an orphan file (old enough), corrupted counters
    os.unlink(blob_path(store, "v1", "INBOX", 2, conf))
    part = js("user", "show", "v1", conf=conf)["partition"]
    orphan_id = "ab00000000000042"
    orphan = os.path.join(store, f"part{part}", "blobs", "ab", orphan_id)
    orphan_body = b"Subject: lost\r\n\r\nfound again\r\n"
    with open(orphan, "wb") as f:
        f.write(orphan_body)
    os.utime(orphan, (1600000000, 1600000000))
    young = os.path.join(store, f"part{part}", "blobs", "ac", "ac00000000000043")
    with open(young, "wb") as f:
        f.write(b"Subject: in flight\r\n\r\n")   # a delivery in progress: left alone
    r = subprocess.run([PLANT, conf, "counter", "v1", "INBOX"], capture_output=True)
    assert r.returncode == 0, r

    rc, out, err = run("--json", "verify", conf=conf)
    assert rc == 1 and "--repair" in err, (rc, err)
    r = json.loads(out)
    assert r["status"] == "problems", r
    assert r["missing_files"] == 1 and r["orphan_files"] == 1 and r["young_files"] == 1, r
    assert r["bad_counters"] >= 2, r   # the mailbox's and the user's
    rc, out, _ = run("--json", "verify", "v1", conf=conf)
    assert rc == 1 and json.loads(out)["missing_files"] == 1, out

    r = js("verify", "--repair", conf=conf)
    assert r["status"] == "repaired" and r["remaining_problems"] == 0, r
    assert r["moved_to_lost_found"] == 1, r
    assert not os.path.exists(orphan) and os.path.exists(young)
    r = js("verify", conf=conf)
    assert r["status"] == "clean", r
    # flags and UIDs of every readable message kept; the orphan is in postmaster's lost+found
    after = {m["uid"]: m["flags"] for m in messages("v1", "INBOX", conf)}
    assert after == {1: flags_before[1], 3: flags_before[3]}, (after, flags_before)
    st = js("mailbox", "status", "v1", "INBOX", conf=conf)
    assert st["messages"] == 2, st
    lf = messages("postmaster", "lost+found", conf)
    assert len(lf) == 1 and lf[0]["date"] == "2020-09-13T12:26:40Z", lf
    assert raw("postmaster", "lost+found", lf[0]["uid"], conf) == orphan_body
    fails(67, "verify", "nobody", conf=conf)


def test_backup_restore():
    store = os.path.join(TMP, "bstore")
    conf = write_conf("backup.conf", store)
    ok("user", "add", "b1", conf=conf)
    ok("user", "add", "b2", conf=conf)
    ok("import", "b1", os.path.join(TMP, "in.mbox"), conf=conf)
    ok("import", "b2", os.path.join(TMP, "md-in"), "--mailbox", "Sub/Box", conf=conf)
    want = {(u, mb): bodies(u, mb, conf) for u, mb in (("b1", "INBOX"), ("b2", "Sub/Box"))}
    bdir = os.path.join(TMP, "backup1")
    r = js("backup", bdir, conf=conf)
    # 7 messages: 6 of them under [store] inline_max are in the index's copy, 1 is a file
    assert r["files"] == 1 and r["partitions"] == 2, r
    fails(1, "backup", bdir, conf=conf, says="does not exist")
    assert os.path.exists(os.path.join(bdir, "heron-backup"))

    # restore into a fresh path
    conf2 = write_conf("restore.conf", os.path.join(TMP, "rstore"))
    r = js("restore", bdir, conf=conf2)
    assert r["replaced"] is None, r
    for (u, mb), b in want.items():
        assert bodies(u, mb, conf2) == b, u
    assert js("verify", conf=conf2)["status"] == "clean"
    # a damaged backup (65): the error names the file it could not read, the store is
    # unchanged and the partial copy removed
    broken = os.path.join(TMP, "backup-broken")
    shutil.copytree(bdir, broken)
    os.unlink(os.path.join(broken, "part1", "index.mdb"))
    err = fails(65, "restore", broken, "--force", conf=conf2)
    assert f"reading {broken}/part1/index.mdb: No such file" in err, err
    assert "the store at " + os.path.join(TMP, "rstore") + " is unchanged" in err, err
    assert "partial copy" not in err, err
    assert not [n for n in os.listdir(TMP) if n.startswith("rstore.restore-")], err
    for (u, mb), b in want.items():
        assert bodies(u, mb, conf2) == b, u
    # the store changes, then the backup is restored over it
    ok("user", "del", "b1", conf=conf)
    fails(1, "restore", bdir, conf=conf, says="--force")
    r = js("restore", bdir, "--force", conf=conf)
    assert r["replaced"] and os.path.isdir(r["replaced"]), r
    assert bodies("b1", "INBOX", conf) == want[("b1", "INBOX")]
    # a hot copy while an import writes: the restored store is consistent (every message it
    # lists has its file; verify clean) and holds a prefix of what the import committed
    big = os.path.join(TMP, "big.mbox")
    with open(big, "wb") as f:
        for i in range(3000):
            f.write(b"From a Mon Jan  5 10:00:00 2026\nSubject: m%d\n\nbody %d\n\n" % (i, i))
    ok("mailbox", "create", "b2", "Big", conf=conf)
    imp = subprocess.Popen([MAILCTL, "-c", conf, "import", "b2", big, "--mailbox", "Big"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        hot = os.path.join(TMP, "backup-hot")
        ok("backup", hot, conf=conf)
    finally:
        assert imp.wait(timeout=120) == 0, imp.stderr.read()
    conf4 = write_conf("restore4.conf", os.path.join(TMP, "r4"))
    ok("restore", hot, conf=conf4)
    assert js("verify", conf=conf4)["status"] == "clean"
    copied = messages("b2", "Big", conf4)
    live = messages("b2", "Big", conf)
    assert len(live) == 3000 and copied == live[:len(copied)], (len(copied), len(live))
    if copied:
        last = copied[-1]["uid"]
        assert raw("b2", "Big", last, conf4) == raw("b2", "Big", last, conf)

    fails(65, "restore", TMP, conf=conf2, says="not a Heron backup")
    conf3 = write_conf("restore3.conf", os.path.join(TMP, "r3"), partitions=3)
    fails(1, "restore", bdir, conf=conf3, says="partitions")


def test_stats():
    rows = {r["scope"] if r["partition"] is None else r["partition"]: r for r in js("stats")}
    assert set(rows) == {0, 1, "queue", "total"}, rows
    assert all(isinstance(r["users"], int) for r in rows.values()), rows
    users = len(js("user", "list", "--source", "store"))
    assert rows["total"]["users"] == users == rows[0]["users"] + rows[1]["users"]
    assert rows["queue"]["messages"] == len(js("queue", "list"))
    total_msgs = sum(u["messages"] for u in js("user", "list", "--source", "store"))
    assert rows["total"]["messages"] == total_msgs, (rows, total_msgs)
    assert b"total" in ok("stats")


def test_directory():
    users = os.path.join(TMP, "users")
    with open(users, "w") as f:
        f.write(f"carol:{ssha(b'secret')}:carol@heron.test,c@heron.test:1M\n")
    conf = write_conf("dir.conf", os.path.join(TMP, "store"),
                      more={"directory": file_directory(users)})
    out = ok("auth", "test", "carol", conf=conf, stdin=b"secret\n").decode()
    assert out.startswith("result=ok") and "user=carol" in out, out
    r = json.loads(ok("--json", "auth", "test", "carol", conf=conf, stdin=b"secret\n"))
    assert r["result"] == "ok" and r["user"] == "carol" and r["cached"] is False, r
    assert r["aliases"] == ["c@heron.test"] and r["quota"] == 1048576 and r["dn"] is None, r
    rc, out, _ = run("--json", "auth", "test", "carol", conf=conf, stdin=b"wrong\n")
    assert rc == 1 and json.loads(out)["result"] == "wrong credentials", out
    rc, _, _ = run("auth", "test", "nobody", conf=conf, stdin=b"x\n")
    assert rc == 67, rc
    r = json.loads(ok("--json", "lookup", "c@heron.test", conf=conf))
    assert r["user"] == "carol" and r["address"] == "carol@heron.test", r
    rc, _, _ = run("lookup", "nobody@heron.test", conf=conf)
    assert rc == 67, rc
    rc, _, _ = run("auth", "frob", conf=conf)
    assert rc == 64
    assert b"auth test" in ok("auth", "--help", conf=conf)


def test_upgrade():
    """A store of the first format (the fixture): every command refuses it naming `mailctl
    upgrade`; the upgrade brings it to this format; then it reads back and verifies."""
    fixture = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "store",
                           "fixtures", "store-format1.tar.gz")
    store = os.path.join(TMP, "old")
    os.mkdir(store)
    subprocess.run(["tar", "xzf", fixture, "-C", store], check=True)
    conf = write_conf("old.conf", store)
    rc, _, err = run("stats", conf=conf)
    assert rc == 1 and "has format 1" in err and "run `mailctl upgrade`" in err, (rc, err)
    out = ok("upgrade", conf=conf).decode()
    assert out.startswith("store at format "), out
    assert "fixture 4" in ok("message", "list", "alice", "INBOX", conf=conf).decode()
    assert js("verify", conf=conf)["status"] == "clean"
    assert ok("upgrade", conf=conf).decode() == out  # nothing left to do


def test_bulk():
    """import --bulk: users, mailboxes (UTF-8 names stored as modified UTF-7), subscriptions,
    messages with flags, keywords and dates; loading the same stream again adds nothing; one
    mailbox emptied is filled again; a malformed stream is refused naming its line, and what
    came before it stays."""
    conf = write_conf("bulk.conf", os.path.join(TMP, "bulk"))
    m1, m2 = b"Subject: one\r\n\r\nbody\r\n", b"Subject: two\r\n\r\n\r\n"
    stream = (b"heron-bulk 1\nuser bob\nmailbox subscribed INBOX\n"
              b"message %d 1735689600 \\Seen\n%s\n" % (len(m1), m1) +
              "mailbox subscribed Caf\u00e9/Notes\n".encode() +
              b"message %d 1735689700 \\Flagged $Label1\n%s\n" % (len(m2), m2) +
              b"user carol\nmailbox unsubscribed Archive\nmailbox subscribed INBOX\n"
              b"mailbox unsubscribed Archive\nmessage %d 1735689800\n%s\n" % (len(m1), m1))
    rc, o, err = run("--json", "import", "--bulk", "-", conf=conf, stdin=stream)
    assert rc == 0, (rc, o, err)
    r = json.loads(o)
    assert (r["users"], r["complete"], r["messages"]) == (2, 0, 3), r
    assert bodies("bob", "INBOX", conf)[0][0] == m1
    assert bodies("bob", "INBOX", conf)[0][1] == "\\Seen"
    assert messages("bob", "INBOX", conf)[0]["date"].startswith("2025-01-01T00:00:00"), \
        messages("bob", "INBOX", conf)
    notes = bodies("bob", "Caf&AOk-/Notes", conf)
    assert notes[0][0] == m2 and set(notes[0][1].split()) == {"\\Flagged", "$Label1"}, notes
    names = {b["mailbox"]: b for b in js("mailbox", "list", "bob", conf=conf)}
    assert names["Caf&AOk-/Notes"]["subscribed"] and names["INBOX"]["subscribed"], names
    carol = {b["mailbox"]: b for b in js("mailbox", "list", "carol", conf=conf)}
    assert carol["Archive"]["messages"] == 1 and not carol["Archive"]["subscribed"], carol
    r = json.loads(ok("--json", "import", "--bulk", "-", conf=conf, stdin=stream))
    assert (r["users"], r["complete"], r["messages"]) == (2, 2, 0), r
    ok("expunge", "carol", "Archive", "--all", conf=conf)
    r = json.loads(ok("--json", "import", "--bulk", "-", conf=conf, stdin=stream))
    assert (r["complete"], r["messages"]) == (1, 1), r
    for bad, line in ((b"mbox\n", 1), (b"heron-bulk 1\nmessage 1 0\nx\n", 2),
                      (b"heron-bulk 1\nuser dave\nmessage 1 0\nx\n", 3),
                      (b"heron-bulk 1\nuser dave\nmailbox subscribed INBOX\nmessage 9 0\nx\n", 4),
                      (b"heron-bulk 1\nuser dave\nmailbox subscribed INBOX\nmessage 1 0 \\Bogus\nx\n",
                       4),
                      (b"heron-bulk 1\nuser dave\nmailbox maybe INBOX\n", 3),
                      (b"heron-bulk 1\nuser erin\nmailbox subscribed INBOX\nmessage 1 0\nx\n"
                       b"user dave\nfrobnicate\n", 6)):
        fails(65, "import", "--bulk", "-", conf=conf, stdin=bad, says=f"line {line}:")
    assert messages("erin", "INBOX", conf)[0]["size"] == 1  # committed before the bad line
    fails(66, "import", "--bulk", os.path.join(TMP, "nonexistent"), conf=conf)


def test_user_add_password():
    """user add --password writes the login into the users file (which the directory then
    authenticates); a refused one changes nothing: neither the file nor the store."""
    users = os.path.join(TMP, "pwusers")
    with open(users, "w") as f:
        f.write(f"carol:{ssha(b'secret')}:carol@heron.test\n")
    before = open(users).read()
    conf = write_conf("pw.conf", os.path.join(TMP, "pwstore"),
                      more={"directory": file_directory(users),
                            "mtad": {"local_domains": "heron.test, other.test"}})
    r = json.loads(ok("--json", "user", "add", "dora", "--password", "--quota-bytes", "5M",
                      conf=conf, stdin=b"s3cret pw\n"))
    assert r["user"] == "dora" and r["login"] is True and isinstance(r["partition"], int), r
    text = open(users).read()
    assert text.startswith(before) and "\ndora:{SSHA512}" in text, text
    assert text.rstrip("\n").endswith(":dora@heron.test:5M"), text
    out = ok("auth", "test", "dora", conf=conf, stdin=b"s3cret pw\n").decode()
    assert out.startswith("result=ok") and "user=dora" in out, out
    rc, out, _ = run("auth", "test", "dora", conf=conf, stdin=b"wrong\n")
    assert rc == 1 and out.startswith(b"result=wrong credentials"), (rc, out)
    ok("user", "add", "eve", "--password", "--address", "eve@other.test", "--scheme", "ARGON2",
       conf=conf, stdin=b"pw eve\n")
    assert "\neve:{ARGON2}$argon2id$" in open(users).read()
    assert ok("auth", "test", "eve", conf=conf, stdin=b"pw eve\n").startswith(b"result=ok")
    # refusals, each leaving the file and the store as they were
    snapshot = open(users).read()
    fails(1, "user", "add", "Carol", "--password", conf=conf, stdin=b"x\n",
          says="in " + users)
    fails(64, "user", "add", "fay", "--password", conf=conf, stdin=b"\n", says="empty")
    fails(64, "user", "add", "fay", "--password", conf=conf, stdin=b"")
    fails(64, "user", "add", "fay", "--password", "--scheme", "MD5", conf=conf, stdin=b"x\n")
    fails(64, "user", "add", "fay", "--password", "--address", "a:b@c", conf=conf,
          stdin=b"x\n")
    fails(64, "user", "add", "fay", "--address", "f@heron.test", conf=conf)
    fails(1, "user", "add", "dora", "--password", conf=conf, stdin=b"x\n")
    assert open(users).read() == snapshot
    fails(67, "user", "show", "fay", conf=conf)
    fails(67, "user", "show", "carol", conf=conf)  # refused above: no store user either
    ldap = write_conf("pwldap.conf", os.path.join(TMP, "pwstore"))
    fails(78, "user", "add", "gil", "--password", conf=ldap, stdin=b"x\n", says="ldap")
    fails(67, "user", "show", "gil", conf=conf)
    # user list: the store's users and the directory's, merged, each saying where it is
    ok("user", "add", "zed", conf=conf)
    rows = {u["user"]: u for u in js("user", "list", conf=conf)}
    assert {k: v["source"] for k, v in rows.items()} == {
        "carol": "directory", "dora": "both", "eve": "both", "zed": "store"}, rows
    assert rows["carol"]["partition"] is None and rows["carol"]["address"] == "carol@heron.test"
    assert isinstance(rows["dora"]["partition"], int) and rows["zed"]["address"] is None
    assert [u["user"] for u in js("user", "list", "--source", "directory", conf=conf)] == [
        "dora", "eve", "carol"]
    assert [u["user"] for u in js("user", "list", "--source", "both", conf=conf)] == [
        "dora", "eve"] or sorted(u["user"] for u in js("user", "list", "--source", "both",
                                                        conf=conf)) == ["dora", "eve"]
    fails(64, "user", "list", "--source", "elsewhere", conf=conf)
    # a directory that does not answer: the store's users, said so, exit 75
    rc, out, err = run("--json", "user", "list", conf=ldap)
    assert rc == 75 and "directory" in err, (rc, err)
    assert {u["source"] for u in json.loads(out)} == {"store"}, out
    # pw: the scheme of the configuration, or the one asked for
    assert ok("pw", conf=conf, stdin=b"x\n").startswith(b"{SSHA512}")
    assert ok("pw", conf=ldap, stdin=b"x\n").startswith(b"{SSHA}")
    r = json.loads(ok("--json", "pw", "--scheme", "scram-sha-256", conf=conf, stdin=b"x\n"))
    assert r["scheme"] == "SCRAM-SHA-256" and r["hash"].count(",") == 3, r
    # a password SASLprep refuses (U+0221, unassigned in RFC 4013's tables): the password is
    # named as refused, not the scheme, which is right
    err = fails(64, "pw", "--scheme", "SCRAM-SHA-256", conf=conf, stdin=b"p\xc8\xa1w\n",
                says="SASLprep")
    assert "one of" not in err and "see --help" not in err and "usage" not in err, err
    assert err.startswith("mailctl: a SCRAM-SHA-256 hash of this password: "), err
    err = fails(64, "pw", "--scheme", "MD5", conf=conf, stdin=b"x\n", says="unknown scheme")
    assert "one of SSHA" in err and "see --help" in err, err


TESTS = [test_usage, test_upgrade, test_users, test_quota, test_mailboxes, test_mbox_round_trip,
         test_maildir_round_trip, test_messages, test_queue, test_queue_select, test_verify,
         test_backup_restore, test_stats, test_directory, test_bulk, test_user_add_password]

try:
    rc = run_tests(TESTS)
finally:
    shutil.rmtree(TMP, ignore_errors=True)
sys.exit(rc)
