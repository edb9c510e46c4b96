#!/usr/bin/env python3
"""test_stack_export.py — mailctl export USER DIR / import USER DIR against the running stack
(scripts/stack: slapd, mtad, imapd): a user's mailboxes made through IMAP (hierarchy, a '.' in
a name, an empty one, flags, keywords, INTERNALDATEs, subscriptions including one without a
mailbox) are exported while imapd serves them and imported into another user; what IMAP shows
of both (LIST, LSUB, and per mailbox the FLAGS, INTERNALDATE and bytes of every message in
order) is the same. Refused commands (an existing DIR, unknown users, a missing DIR) exit with
their documented codes, name the path, and change nothing.

  test_stack_export.py SOURCE_ROOT BUILD_DIR"""
import imaplib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Stack, run_tests  # noqa: E402

ROOT, BUILD = sys.argv[1:3]
MAILBOXES = ["Work", "Work/Projects", "a.b", "Empty"]
# (mailbox, flags, internaldate, subject)
MESSAGES = [
    ("INBOX", r"(\Seen)", '"01-Jan-2020 10:00:00 +0000"', "first"),
    ("INBOX", r"(\Flagged $Label1 custom)", '"15-Mar-2021 23:59:59 +0000"', "second"),
    ("INBOX", "()", '"02-Feb-2019 01:02:03 +0000"', "third, older date, later uid"),
    ("Work/Projects", "(project $Forwarded)", '"30-Jun-2022 12:00:00 +0000"', "p1"),
    ("Work/Projects", r"(\Answered project)", '"30-Jun-2022 12:00:00 +0000"', "p2 same date"),
    ("a.b", r"(\Deleted \Answered \Draft)", '"07-Jul-2017 07:07:07 +0000"', "dotted"),
]
SUBSCRIBE = ["INBOX", "Work/Projects", "a.b", "Ghost"]


def main():
    tmp = tempfile.mkdtemp(prefix="heron-export-")
    try:
        with Stack(ROOT, BUILD, users=10) as st:
            return run(st, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(st, tmp):
    e = st.env
    host = "127.0.0.1"

    def mailctl(*args):
        r = subprocess.run([e["MAILCTL"], "-c", e["HERON_CONF"], "--json", *args],
                           capture_output=True, text=True, timeout=120)
        return r.returncode, r.stdout, r.stderr

    def imap(user):
        c = imaplib.IMAP4(host, st.port("IMAP_PORT"), timeout=30)
        c.login(user, user)
        return c

    def quoted(name):
        return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'

    def snapshot(user):
        """What IMAP shows of user's mail: mailboxes, subscriptions, messages in order."""
        c = imap(user)
        typ, data = c.list('""', "*")
        assert typ == "OK", data
        boxes = {}
        for line in data:
            m = re.match(rb'\((.*?)\) "(.)" (.*)$', line)
            assert m, line
            name = m.group(3).decode().strip('"')
            boxes[name] = sorted(a for a in m.group(1).decode().split()
                                 if a.lower() not in ("\\haschildren", "\\hasnochildren"))
        typ, data = c.lsub('""', "*")
        assert typ == "OK", data
        subs = sorted(re.match(rb'\(.*?\) "." (.*)$', x).group(1).decode().strip('"')
                      for x in data)
        mail = {}
        for name, attrs in boxes.items():
            if "\\Noselect" in attrs:
                continue
            typ, data = c.select(quoted(name), readonly=True)
            assert typ == "OK", (name, data)
            msgs = []
            if int(data[0]) > 0:
                typ, data = c.fetch("1:*", "(FLAGS INTERNALDATE BODY.PEEK[])")
                assert typ == "OK", data
                for part in data:
                    if not isinstance(part, tuple):
                        continue
                    meta = part[0].decode()
                    flags = sorted(f for f in re.search(r"FLAGS \((.*?)\)", meta).group(1)
                                   .split() if f != "\\Recent")
                    date = re.search(r'INTERNALDATE "(.*?)"', meta).group(1)
                    msgs.append((flags, date, part[1]))
            mail[name] = msgs
        c.logout()
        return {"list": boxes, "lsub": subs, "mail": mail}

    def setup_source(user):
        c = imap(user)
        for name in MAILBOXES:
            typ, data = c.create(quoted(name))
            assert typ == "OK", (name, data)
        for box, flags, date, subject in MESSAGES:
            msg = (f"From: someone@outside.example\r\nTo: {user}@heron.test\r\n"
                   f"Subject: {subject}\r\nMessage-ID: <{subject.split()[0]}@x>\r\n\r\n"
                   f"body of {subject}\r\nFrom the start of a line\r\n").encode()
            typ, data = c.append(quoted(box), flags, date, msg)
            assert typ == "OK", (box, data)
        for name in SUBSCRIBE:
            assert c.subscribe(quoted(name))[0] == "OK", name
        c.unsubscribe("Work")
        c.logout()

    def ensure_user(user):
        if mailctl("user", "show", user)[0] == 67:
            rc, out, err = mailctl("user", "add", user)
            assert rc == 0, (rc, out, err)

    def test_export_import_round_trip():
        setup_source("user5")
        before = snapshot("user5")
        assert before["mail"]["Work/Projects"] and before["mail"]["Empty"] == [], before
        assert "Ghost" in before["lsub"] and "Work" not in before["lsub"], before["lsub"]
        out_dir = os.path.join(tmp, "user5")
        rc, out, err = mailctl("export", "user5", out_dir)
        assert rc == 0, (rc, out, err)
        r = json.loads(out)
        assert r["exported"] == len(MESSAGES) and r["mailboxes"] == len(MAILBOXES) + 1, r
        assert os.path.isdir(os.path.join(out_dir, ".Work.Projects", "cur")), os.listdir(out_dir)
        assert os.path.isdir(os.path.join(out_dir, ".a%2Eb", "cur")), os.listdir(out_dir)
        ensure_user("user6")
        rc, out, err = mailctl("import", "user6", out_dir)
        assert rc == 0, (rc, out, err)
        after = snapshot("user6")
        assert after["list"] == before["list"], (before["list"], after["list"])
        assert after["lsub"] == before["lsub"], (before["lsub"], after["lsub"])
        for name in before["mail"]:
            assert after["mail"][name] == before["mail"][name], (name, before["mail"][name],
                                                                 after["mail"][name])
        # the source is what it was: export changed nothing
        assert snapshot("user5") == before

    def test_refused_change_nothing():
        out_dir = os.path.join(tmp, "user5")  # exists from the round trip
        listing = sorted(os.listdir(out_dir))
        rc, out, err = mailctl("export", "user5", out_dir)
        assert rc == 1 and out_dir in err, (rc, out, err)
        assert sorted(os.listdir(out_dir)) == listing
        rc, out, err = mailctl("export", "nosuchuser", os.path.join(tmp, "none"))
        assert rc == 67 and not os.path.exists(os.path.join(tmp, "none")), (rc, out, err)
        before = snapshot("user6")
        missing = os.path.join(tmp, "no", "such", "dir")
        rc, out, err = mailctl("import", "user6", missing)
        assert rc == 66 and missing in err, (rc, out, err)
        rc, out, err = mailctl("import", "nosuchuser", out_dir)
        assert rc == 67, (rc, out, err)
        rc, out, err = mailctl("export", "user5", os.path.join(tmp, "m"), "--format", "mbox")
        assert rc == 64, (rc, out, err)
        assert snapshot("user6") == before

    return run_tests([test_export_import_round_trip, test_refused_change_nothing])


if __name__ == "__main__":
    sys.exit(main())
