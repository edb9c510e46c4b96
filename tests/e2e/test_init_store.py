#!/usr/bin/env python3
"""test_init_store.py — Heron's fast fill (scripts/fill-store: `mailload init --stream`, a bulk
stream loaded by `mailctl import --bulk` straight into the store) gives the same mailboxes as
the protocol init (SMTP to INBOX, IMAP APPEND to the others), for the same seed and profile. Two stacks from scripts/stack: A (users file) is filled over the
protocols, B (slapd, auth_mode = lookup on the {SSHA} LDIF of `mailload ldif`)
through the store while B's mtad and imapd serve it. Read back over IMAP
from both: the same folders and subscriptions, and per folder the same messages, in order, with
the same \\Seen flags and the same bytes (A's INBOX copies carry the Received: line mtad adds;
it is taken off before comparing). Resuming: B filled first for half the users, then for all,
and again after a folder was deleted: the same as A each time, and a rerun adds nothing.
`mailctl verify` finds B's store clean.

  test_init_store.py SOURCE_ROOT BUILD_DIR"""
import imaplib
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Stack, run_tests  # noqa: E402

ROOT, BUILD = sys.argv[1:3]
USERS = 6
SEED = "7"
PROFILE = "tiny"


def mailload_init(st, *extra, users=USERS):
    e = st.env
    r = subprocess.run([e["MAILLOAD"], "init", "--users", str(users), "--profile", PROFILE,
                        "--seed", SEED, "--domain", e["DOMAIN"], "--ext-domain",
                        e["EXT_DOMAIN"], "-q", *extra],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r.stderr


def protocol_init(st):
    e = st.env
    return mailload_init(st, "--target", e["HOST"], "--smtp-port", e["SMTP_PORT"],
                         "--submission-port", e["SUBMISSION_PORT"], "--imap-port",
                         e["IMAP_PORT"])


def store_init(st, users=USERS):
    e = st.env
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "fill-store"), "-c",
                        e["HERON_CONF"], "--build", BUILD, "--users", str(users), "--profile",
                        PROFILE, "--seed", SEED, "--domain", e["DOMAIN"], "--ext-domain",
                        e["EXT_DOMAIN"], "-q"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r.stderr


def strip_trace(msg):
    """The message without the Received: field mtad puts on top (with its folded lines)."""
    m = re.match(rb"Received:[^\r]*\r\n(?:[ \t][^\r]*\r\n)*", msg)
    return msg[m.end():] if m else msg


def names(lines):
    out = set()
    for line in lines:
        m = re.match(rb'\(([^)]*)\) (?:"[^"]*"|NIL) "?([^"]*)"?$', line)
        assert m, line
        if b"\\Noselect" not in m.group(1) and b"\\NonExistent" not in m.group(1):
            out.add(m.group(2).decode())
    return out


def snapshot(st, users=USERS):
    """{user: {"list": set, "lsub": set, "folders": {name: [(flags, size, bytes)]}}}"""
    out = {}
    for n in range(1, users + 1):
        c = imaplib.IMAP4("127.0.0.1", st.port("IMAP_PORT"), timeout=30)
        try:
            c.login(f"user{n}", f"user{n}")
            typ, lst = c.list('""', "*")
            assert typ == "OK", lst
            typ, lsub = c.lsub('""', "*")
            assert typ == "OK", lsub
            # MailloadFill: the protocol init's fill record (mailload run checks it), not part
            # of the mailboxes the two fills must agree on
            u = {"list": names(lst) - {"MailloadFill"}, "lsub": names(lsub), "folders": {}}
            for f in sorted(u["list"]):
                typ, data = c.select(f'"{f}"', readonly=True)
                assert typ == "OK", (f, data)
                msgs = []
                if int(data[0]) > 0:
                    typ, data = c.fetch("1:*", "(FLAGS RFC822.SIZE BODY.PEEK[])")
                    assert typ == "OK", data
                    for item in data:
                        if not isinstance(item, tuple):
                            continue
                        head, body = item
                        seen = b"\\Seen" in head
                        size = int(re.search(rb"RFC822\.SIZE (\d+)", head).group(1))
                        assert size == len(body), (f, size, len(body))
                        msgs.append((seen, strip_trace(body)))
                u["folders"][f] = msgs
            out[n] = u
        finally:
            try:
                c.logout()
            except (imaplib.IMAP4.error, OSError):
                pass
    return out


def compare(a, b):
    for n in a:
        ua, ub = a[n], b[n]
        assert ua["list"] == ub["list"], (n, ua["list"], ub["list"])
        assert ua["lsub"] == ub["lsub"], (n, ua["lsub"], ub["lsub"])
        for f, ma in ua["folders"].items():
            mb = ub["folders"][f]
            assert len(ma) == len(mb), (n, f, len(ma), len(mb))
            for i, (x, y) in enumerate(zip(ma, mb)):
                assert x[0] == y[0], (n, f, i, "\\Seen differs")
                assert x[1] == y[1], (n, f, i, "bytes differ", x[1][:300], y[1][:300])


def main():
    # B logs its users in through the real slapd in lookup mode (the LDIF of `mailload ldif`:
    # {SSHA} checked by the daemons), A through a users file
    with Stack(ROOT, BUILD, users=USERS, args=["--auth", "file"]) as a, \
            Stack(ROOT, BUILD, users=USERS, args=["--auth-mode", "lookup"]) as b:
        state = {}

        def test_protocol_init():
            protocol_init(a)
            state["a"] = snapshot(a)
            total = sum(len(m) for u in state["a"].values() for m in u["folders"].values())
            folders = sum(len(u["folders"]) for u in state["a"].values())
            print(f"protocol init: {total} messages in {folders} folders of {USERS} users")
            assert total > 0, state["a"]

        def want_a():
            assert "a" in state, "the protocol init did not complete"
            return state["a"]

        def test_store_init_resumes_to_the_same_mailboxes():
            want = want_a()
            store_init(b, users=USERS // 2)  # an interrupted init: half of the users
            out = store_init(b)
            assert f"{USERS // 2} already complete" in out, out
            compare(want, snapshot(b))

        def test_rerun_adds_nothing_and_restores_a_deleted_folder():
            want = want_a()
            out = store_init(b)
            assert f"{USERS} already complete" in out and " 0 messages" in out, out
            victim = next(((n, f) for n, u in want.items() for f, m in u["folders"].items()
                           if f not in ("INBOX", "Sent", "Drafts", "Trash") and m), None)
            assert victim is not None, "no personal folder with messages in this seed"
            n, f = victim
            c = imaplib.IMAP4("127.0.0.1", b.port("IMAP_PORT"), timeout=30)
            c.login(f"user{n}", f"user{n}")
            typ, data = c.delete(f'"{f}"')
            c.logout()
            assert typ == "OK", data
            out = store_init(b)
            assert f"{USERS - 1} already complete" in out, out
            compare(want, snapshot(b))

        def test_verify_clean():
            r = subprocess.run([b.env["MAILCTL"], "-c", b.env["HERON_CONF"], "verify"],
                               capture_output=True, text=True, timeout=120)
            assert r.returncode == 0, r.stdout + r.stderr
            assert re.search(r"remaining_problems\s+0\b", r.stdout), r.stdout

        return run_tests([test_protocol_init, test_store_init_resumes_to_the_same_mailboxes,
                          test_rerun_adds_nothing_and_restores_a_deleted_folder,
                          test_verify_clean])


if __name__ == "__main__":
    sys.exit(main())
