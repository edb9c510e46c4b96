"""test_mailctl_query.py — mailctl search, fetch, copy, move and expunge against a running
mtad + imapd: mail delivered over SMTP (smtplib), flags set over IMAP (imaplib); mailctl's
answers compared with what imapd answers the same query (UID SEARCH, UID FETCH), and its
writes seen by an IMAP session. Bad input: unknown users and mailboxes, queries that do not
parse, and nothing changed by a refused command.

usage: test_mailctl_query.py MTAD IMAPD MAILCTL
"""
import email.utils
import hashlib
import json
import os
import re
import smtplib
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (HOST, Daemon, imaplib, run_main, run_tests,  # noqa: E402
                      shared_conf)

MTAD, IMAPD, MAILCTL = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mcquery-")
CONF, SMTP_PORT, IMAP_PORT = shared_conf(TMP, ["alice", "bob"])
mtad = Daemon(MTAD, CONF, os.path.join(TMP, "mtad.log"), SMTP_PORT)
imapd = Daemon(IMAPD, CONF, os.path.join(TMP, "imapd.log"), IMAP_PORT)
# a second, fresh store (and its imapd) that an export of alice is imported into
FRESH = os.path.join(TMP, "fresh")
os.mkdir(FRESH)
CONF2, _, IMAP_PORT2 = shared_conf(FRESH, ["alice"])
imapd2 = Daemon(IMAPD, CONF2, os.path.join(FRESH, "imapd.log"), IMAP_PORT2)


def mailctl(*args):
    p = subprocess.run([MAILCTL, "-c", CONF, *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def js(*args):
    rc, out, err = mailctl("--json", *args)
    assert rc == 0, (args, rc, out, err)
    return json.loads(out)


def imap(user="alice", port=IMAP_PORT):
    c = imaplib.IMAP4(HOST, port, timeout=20)
    c.login(user, user)
    return c


def uid_search(c, *query):
    typ, data = c.uid("SEARCH", *query)
    assert typ == "OK", data
    return [int(x) for x in data[0].split()]


def deliver():
    subjects = ["quarterly report", "lunch on friday", "Report: numbers", "re: lunch",
                "hello world", "invoice 42"]
    for i, subj in enumerate(subjects):
        msg = (f"From: Sender {i} <s{i}@example.org>\r\nTo: alice@heron.test\r\n"
               f"Subject: {subj}\r\nDate: {email.utils.formatdate(1700000000 + i * 86400)}\r\n"
               f"Message-ID: <m{i}@example.org>\r\n\r\nbody {i} {'x' * (i * 300)}\r\n")
        with smtplib.SMTP(HOST, SMTP_PORT, timeout=30) as s:
            s.sendmail(f"s{i}@example.org", ["alice@heron.test"], msg)
    c = imap()
    c.select("INBOX")
    c.uid("STORE", "1,3", "+FLAGS", "(\\Seen)")
    c.uid("STORE", "2", "+FLAGS", "(\\Flagged $Work)")
    c.logout()


QUERIES = [["ALL"], ["SEEN"], ["UNSEEN"], ["FLAGGED"], ["KEYWORD", "$Work"],
           ["SUBJECT", "report"], ["OR", "SUBJECT", "lunch", "FROM", "s5@example.org"],
           ["NOT", "SEEN", "SMALLER", "700"], ["LARGER", "500"], ["SENTSINCE", "16-Nov-2023"],
           ["SENTBEFORE", "16-Nov-2023"], ["BODY", "body 3"], ["UID", "2:4"], ["2:*"],
           ["HEADER", "Message-ID", "m4@"], ["(SEEN FLAGGED)"], ["SUBJECT", "hello world"]]


def test_search_answers_as_imapd():
    c = imap()
    c.select("INBOX", readonly=True)
    for q in QUERIES:
        want = uid_search(c, *[w if " " not in w or w.startswith("(") else f'"{w}"'
                               for w in q])
        got = js("search", "alice", "INBOX", *q)["uids"]
        assert got == want, (q, got, want)
    c.logout()
    rc, out, _ = mailctl("search", "alice", "INBOX", "SEEN")
    assert rc == 0 and out.split() == ["1", "3"], out


def test_fetch_fields_as_imapd():
    c = imap()
    c.select("INBOX", readonly=True)
    rows = js("fetch", "alice", "INBOX", "UID", "1:3",
              "uid seq flags size.physical imap.envelope hdr.subject guid date.sent.unixtime")
    assert [r["uid"] for r in rows] == [1, 2, 3] and [r["seq"] for r in rows] == [1, 2, 3]
    for r in rows:
        typ, data = c.uid("FETCH", str(r["uid"]), "(RFC822.SIZE ENVELOPE FLAGS EMAILID)")
        text = data[0][0].decode() if isinstance(data[0], tuple) else data[0].decode()
        assert f"RFC822.SIZE {r['size.physical']}" in text, (r, text)
        assert r["imap.envelope"] in text, (r["imap.envelope"], text)
        assert f"EMAILID ({r['guid']})" in text, (r, text)
        assert isinstance(r["date.sent.unixtime"], int)
    assert rows[1]["flags"] == "\\Flagged $Work" and rows[0]["flags"] == "\\Seen", rows
    assert rows[2]["hdr.subject"] == "Report: numbers", rows
    typ, data = c.uid("FETCH", "5", "(BODY.PEEK[TEXT])")
    body = js("fetch", "alice", "INBOX", "UID", "5", "body")[0]["body"]
    assert body.encode() == data[0][1], (body, data)
    c.logout()
    rc, out, _ = mailctl("fetch", "alice", "INBOX", "SUBJECT", "invoice", "uid,hdr.subject")
    assert rc == 0 and out == "uid: 6\nhdr.subject: invoice 42\n", out


def test_copy_move_expunge_seen_by_imap():
    c = imap()
    c.select("INBOX")
    r = js("copy", "alice", "INBOX", "Work", "SUBJECT", "report", "--create")
    assert r["copied"] == 2 and [u["from"] for u in r["uids"]] == [1, 3], r
    assert uid_search(c, "ALL") == [1, 2, 3, 4, 5, 6]  # a copy leaves the source
    typ, data = c.status("Work", "(MESSAGES)")
    assert b"MESSAGES 2" in data[0], data
    r = js("move", "alice", "INBOX", "Work", "SUBJECT", "lunch")
    assert r["moved"] == 2, r
    c.noop()
    assert uid_search(c, "ALL") == [1, 3, 5, 6]
    c.select("Work")
    assert uid_search(c, "SUBJECT", "lunch") == [3, 4]
    c.logout()
    r = js("expunge", "alice", "Work", "SUBJECT", "report")
    assert r["expunged"] == 2, r
    c = imap()
    c.select("Work", readonly=True)
    assert uid_search(c, "ALL") == [3, 4]
    c.logout()


def status(user, mailbox):
    return js("mailbox", "status", user, mailbox)


def test_bad_input_changes_nothing():
    before = status("alice", "INBOX")
    for args, code, says in [
            (("search", "nobody", "INBOX", "ALL"), 67, "no such user"),
            (("search", "alice", "Nope", "ALL"), 1, "no such mailbox"),
            (("search", "alice", "INBOX", "FROB"), 64, "Unknown search key"),
            (("search", "alice", "INBOX", "SINCE", "yesterday"), 64, "date"),
            (("search", "alice", "INBOX", "OR", "SEEN"), 64, "Missing"),
            (("search", "alice", "INBOX", "(SEEN"), 64, "query"),
            (("search", "alice", "INBOX"), 64, "missing"),
            (("fetch", "alice", "INBOX", "ALL", "uid,frobnicate"), 64, "unknown field"),
            (("copy", "alice", "INBOX", "Nope", "ALL"), 1, "no such mailbox"),
            (("move", "alice", "INBOX", "INBOX", "ALL"), 64, "one mailbox"),
            (("move", "alice", "INBOX", "Work", "NOT"), 64, "Missing"),
            (("expunge", "alice", "INBOX", "BOGUS", "1"), 64, "Unknown"),
            (("expunge", "alice", "INBOX", "ALL", "--all"), 64, "not both"),
            (("expunge", "nobody", "INBOX", "ALL"), 67, "no such user")]:
        rc, out, err = mailctl(*args)
        assert rc == code and says in err, (args, rc, err)
    assert status("alice", "INBOX") == before
    rc, out, err = mailctl("--json", "search", "alice", "INBOX", "FROB")
    assert rc == 64 and "error" in json.loads(out), out


def mailbox_state(port, mailbox):
    """(UIDVALIDITY, UIDNEXT, HIGHESTMODSEQ, [(uid, flags, MODSEQ, SHA-256 of its bytes)]) of
    mailbox as imapd says (CONDSTORE, RFC 7162)."""
    c = imap(port=port)
    typ, data = c.status(mailbox, "(UIDVALIDITY UIDNEXT HIGHESTMODSEQ)")
    assert typ == "OK", data
    words = data[0].decode().split("(")[1].rstrip(")").split()
    st = dict(zip(words[::2], (int(x) for x in words[1::2])))
    c.select(mailbox, readonly=True)
    typ, data = c.uid("FETCH", "1:*", "(UID FLAGS MODSEQ BODY.PEEK[])")
    assert typ == "OK", data
    msgs = []
    for item in data:
        if isinstance(item, tuple):
            meta = item[0].decode()
            uid = int(meta.split("UID ")[1].split()[0])
            flags = sorted(f for f in meta.split("FLAGS (")[1].split(")")[0].split()
                           if f != "\\Recent")  # a session's, not the mailbox's
            modseq = int(meta.split("MODSEQ (")[1].split(")")[0])
            msgs.append((uid, flags, modseq, hashlib.sha256(item[1]).hexdigest()[:16]))
    c.logout()
    return st["UIDVALIDITY"], st["UIDNEXT"], st["HIGHESTMODSEQ"], sorted(msgs)


imaplib.Commands.setdefault("GETMETADATA", ("AUTH", "SELECTED"))
imaplib.Commands.setdefault("SETMETADATA", ("AUTH", "SELECTED"))


def set_metadata(c, mailbox, entry, value):
    """SETMETADATA (RFC 5464) of one entry to a quoted string."""
    quoted = '"%s"' % value.replace("\\", "\\\\").replace('"', '\\"')
    typ, data = c._simple_command("SETMETADATA", '"%s"' % mailbox, "(%s %s)" % (entry, quoted))
    assert typ == "OK", (mailbox, entry, data)


def get_metadata(c, mailbox, *entries):
    """{entry: value} of GETMETADATA mailbox (entries...): those with a value."""
    typ, data = c._simple_command("GETMETADATA", '"%s"' % mailbox, "(%s)" % " ".join(entries))
    assert typ == "OK", (mailbox, data)
    _, data = c._untagged_response(typ, data, "METADATA")
    out = {}
    for item in data:
        head, lit = item if isinstance(item, tuple) else (item or b"", None)
        for m in re.finditer(rb'(/[^\s()"{]+) (NIL|"((?:[^"\\]|\\.)*)"|\{\d+\}$)', head):
            if m.group(2).startswith(b"{"):
                out[m.group(1).decode().lower()] = lit.decode()
            elif m.group(2) != b"NIL":
                out[m.group(1).decode().lower()] = re.sub(rb"\\(.)", rb"\1",
                                                          m.group(3)).decode()
    return out


META = {"INBOX": {"/private/comment": "inbox note", "/shared/vendor/heron/x": 'a "b" \\ c'},
        "Empty": {"/private/comment": "an empty one keeps its note"},
        "": {"/private/vendor/heron/server": "the user's server entry"}}


def metadata(port):
    c = imap(port=port)
    got = {box: get_metadata(c, box, *entries) for box, entries in META.items()}
    c.logout()
    return got


def test_export_import_keeps_uids():
    """export alice DIR, import into a fresh store: its imapd answers UID FETCH with the same
    UIDs (with the gaps expunges left), flags, MODSEQs and bytes, the same UIDVALIDITY,
    UIDNEXT and HIGHESTMODSEQ, and GETMETADATA with the same mailbox and server
    annotations; a second import into the now used mailboxes appends with new UIDs."""
    c = imap()
    c.create("Empty")
    c.select("INBOX")
    c.uid("STORE", "5", "+FLAGS", "(\\Answered $Later)")
    for box, entries in META.items():
        for entry, value in entries.items():
            set_metadata(c, box, entry, value)
    c.logout()
    before = {m: mailbox_state(IMAP_PORT, m) for m in ("INBOX", "Work", "Empty")}
    assert [m[0] for m in before["INBOX"][3]] == [1, 3, 5, 6], before["INBOX"]
    assert [m[0] for m in before["Work"][3]] == [3, 4], before["Work"]
    # MODSEQs an import numbering anew would not give
    assert before["INBOX"][2] > 6 and len({m[2] for m in before["INBOX"][3]}) == 4, before
    meta = metadata(IMAP_PORT)
    assert meta == META, meta
    out = os.path.join(TMP, "alice-export")
    assert js("export", "alice", out)["exported"] == 6
    r = subprocess.run([MAILCTL, "-c", CONF2, "user", "add", "alice"], capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r
    r = subprocess.run([MAILCTL, "-c", CONF2, "--json", "import", "alice", out],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r
    assert json.loads(r.stdout)["imported"] == 6, r.stdout
    imapd2.start()
    after = {m: mailbox_state(IMAP_PORT2, m) for m in before}
    assert after == before, (before, after)
    assert metadata(IMAP_PORT2) == META
    # imported again: the mailboxes are in use, so new UIDs after the kept ones
    r = subprocess.run([MAILCTL, "-c", CONF2, "--json", "import", "alice", out],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r
    again = mailbox_state(IMAP_PORT2, "INBOX")
    assert again[0] == before["INBOX"][0], again
    assert [m[0] for m in again[3]] == [1, 3, 5, 6, 7, 8, 9, 10], again
    assert again[2] > before["INBOX"][2], again  # HIGHESTMODSEQ goes on from the kept one


SCRIPTS = {"filing": 'require "fileinto";\r\nif header :contains "subject" "x" '
                      '{ fileinto "Work"; }\r\n',
           "my.spare": "keep;\r\n"}


def mailctl2(*args):
    p = subprocess.run([MAILCTL, "-c", CONF2, *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def test_export_import_carries_sieve():
    """export alice DIR writes her Sieve scripts (DIR/heron-sieve/NAME.sieve, the active
    one's name in DIR/heron-sieve-active); import USER DIR compiles and stores them, the
    active one active. A script that does not compile, or an active name with no script,
    fails the import, saying which."""
    for name, src in SCRIPTS.items():
        path = os.path.join(TMP, name + ".in")
        with open(path, "w", newline="") as f:
            f.write(src)
        js("sieve", "put", "alice", name, path, *(["--activate"] if name == "filing" else []))
    out = os.path.join(TMP, "alice-sieve-export")
    js("export", "alice", out)
    for name, src in SCRIPTS.items():
        with open(os.path.join(out, "heron-sieve", name + ".sieve"), newline="") as f:
            assert f.read() == src, name
    with open(os.path.join(out, "heron-sieve-active")) as f:
        assert f.read() == "filing\n"
    rc, o, e = mailctl2("user", "add", "carol")
    assert rc == 0, (o, e)
    rc, o, e = mailctl2("--json", "import", "carol", out)
    assert rc == 0, (o, e)
    assert json.loads(o)["sieve_scripts"] == 2, o
    for name, src in SCRIPTS.items():
        rc, o, e = mailctl2("--json", "sieve", "get", "carol", name)
        assert rc == 0, (name, o, e)
        got = json.loads(o)
        assert (got["source"], got["active"]) == (src, name == "filing"), got
    # broken exports: nothing said to be imported
    bad = os.path.join(TMP, "alice-sieve-bad")
    js("export", "alice", bad)
    with open(os.path.join(bad, "heron-sieve", "my.spare.sieve"), "w") as f:
        f.write("keep\n")  # no semicolon
    rc, o, e = mailctl2("user", "add", "dave")
    assert rc == 0, (o, e)
    rc, o, e = mailctl2("import", "dave", bad)
    assert rc != 0 and "my.spare.sieve" in e, (rc, o, e)
    rc, o, e = mailctl2("--json", "message", "list", "dave", "INBOX")
    assert rc == 0 and not json.loads(o), (o, e)  # refused before any mail went in
    os.unlink(os.path.join(bad, "heron-sieve", "my.spare.sieve"))
    os.unlink(os.path.join(bad, "heron-sieve", "filing.sieve"))
    rc, o, e = mailctl2("import", "dave", bad)
    assert rc != 0 and "no script 'filing'" in e, (rc, o, e)


def export_view(top):
    """What an export holds besides the bytes, per Maildir below top: dovecot-uidlist with
    the file names cut (they hold the exporting pid), and the annotations files."""
    out = {}
    for d, _, files in os.walk(top):
        for name in files:
            if name == "dovecot-uidlist" or name.startswith("heron-"):
                with open(os.path.join(d, name)) as f:
                    text = f.read()
                if name == "dovecot-uidlist":
                    text = re.sub(r" :.*", "", text)
                out[os.path.relpath(os.path.join(d, name), top)] = text
    return out


def test_backup_restore_keeps_modseqs_and_annotations():
    """A hot backup of the store (imapd running), restored elsewhere: an export of alice from
    the restored store lists the same UIDs, MODSEQs, HIGHESTMODSEQ and annotations as one
    from the store itself (the annot DBI is in the copied index)."""
    bk = os.path.join(TMP, "bk")
    js("backup", bk)
    conf3 = os.path.join(TMP, "restored.conf")
    with open(CONF) as f:
        text = f.read()
    store = re.search(r"^path = (.*)$", text, re.M).group(1)
    with open(conf3, "w") as f:
        f.write(text.replace("path = " + store, "path = " + store + "-restored", 1))
    r = subprocess.run([MAILCTL, "-c", conf3, "--json", "restore", bk], capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r
    mine, theirs = os.path.join(TMP, "exp-own"), os.path.join(TMP, "exp-restored")
    js("export", "alice", mine)
    r = subprocess.run([MAILCTL, "-c", conf3, "export", "alice", theirs], capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r
    own = export_view(mine)
    assert "heron-metadata" in own and "heron-server-metadata" in own, own
    assert " M" in own["dovecot-uidlist"], own
    assert export_view(theirs) == own


def body():
    mtad.start()
    imapd.start()
    deliver()
    return run_tests([test_search_answers_as_imapd, test_fetch_fields_as_imapd,
                      test_copy_move_expunge_seen_by_imap, test_bad_input_changes_nothing,
                      test_export_import_keeps_uids, test_export_import_carries_sieve,
                      test_backup_restore_keeps_modseqs_and_annotations])


sys.exit(run_main(body, TMP, [mtad, imapd, imapd2]))
