#!/usr/bin/env python3
"""test_stack_mailctl.py — mailctl against the running stack from scripts/stack (real slapd,
sink, mtad, imapd; mailctl opens the same store while the daemons serve it): user show and
mailbox status agree with what SMTP delivered and IMAP changed; the queue holds a message the
sink refuses for now (fault injection over its control port), queue list/show report it with
the sink's error, and after the fault is lifted queue flush delivers it; queue show --message,
hold/delete/requeue/flush by selection act on exactly what they select; the directory is
reachable through mailctl auth test / lookup.

  test_stack_mailctl.py SOURCE_ROOT BUILD_DIR"""
import imaplib
import json
import os
import smtplib
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Stack, run_tests, wait_for  # noqa: E402

ROOT, BUILD = sys.argv[1:3]


def main():
    with Stack(ROOT, BUILD, users=10) as st:
        e = st.env
        host = "127.0.0.1"

        def mailctl(*args, stdin=None):
            r = subprocess.run([e["MAILCTL"], "-c", e["HERON_CONF"], "--json", *args],
                               input=stdin, capture_output=True, text=True, timeout=60)
            return r.returncode, r.stdout, r.stderr

        def mailctl_json(*args):
            rc, out, err = mailctl(*args)
            assert rc == 0, (args, rc, out, err)
            return json.loads(out)

        def test_user_show_and_mailbox_status():
            with smtplib.SMTP(host, st.port("SMTP_PORT"), timeout=20) as s:
                for subj in ("one", "two", "three"):
                    s.sendmail("news@outside.example", ["user2@heron.test"],
                               f"From: news@outside.example\r\nSubject: {subj}\r\n\r\nbody\r\n")
            c = imaplib.IMAP4(host, st.port("IMAP_PORT"), timeout=20)
            c.login("user2", "user2")
            c.select("INBOX")
            c.store("1", "+FLAGS", "(\\Seen)")
            c.store("2", "+FLAGS", "(\\Deleted)")
            typ, data = c.status("INBOX", "(MESSAGES UNSEEN UIDNEXT UIDVALIDITY)")
            assert typ == "OK", data
            c.logout()
            u = mailctl_json("user", "show", "user2")
            assert u["user"] == "user2" and u["messages"] == 3, u
            m = mailctl_json("mailbox", "status", "user2", "INBOX")
            assert (m["messages"], m["unseen"], m["deleted"]) == (3, 2, 1), m
            status = data[0].decode()
            assert f"UIDVALIDITY {m['uidvalidity']}" in status, (status, m)
            assert f"UIDNEXT {m['uidnext']}" in status, (status, m)
            rc, out, err = mailctl("user", "show", "nosuchuser")
            assert rc == 67, (rc, out, err)

        def test_queue_list_show_flush():
            st.sink({"cmd": "faults", "rcpt_4xx": 1})
            token = uuid.uuid4().hex
            try:
                with smtplib.SMTP(host, st.port("SUBMISSION_PORT"), timeout=20) as s:
                    s.login("user1", "user1")
                    s.sendmail("user1@heron.test", [f"far-{token[:8]}@ext.heron.test"],
                               f"From: user1@heron.test\r\nMessage-ID: <{token}@stack.test>\r\n"
                               f"X-Mailload-Sent: {int(time.time() * 1000)}\r\n"
                               "Subject: queued\r\n\r\nbody\r\n")

                def deferred():
                    for q in mailctl_json("queue", "list"):
                        if q["sender"] == "user1@heron.test" and q["pending"] == 1:
                            d = mailctl_json("queue", "show", q["id"])
                            if d["recipients"][0].get("attempts", 0) >= 1:
                                return d
                    return None
                d = wait_for(deferred, 30, "the deferred message in mailctl queue list")
                r = d["recipients"][0]
                assert r["recipient"] == f"far-{token[:8]}@ext.heron.test", d
                assert r["state"] == "pending" and r["last_error"].startswith("4"), d
            finally:
                st.sink({"cmd": "faults", "rcpt_4xx": 0})
            rc, out, err = mailctl("queue", "flush", d["entry"]["id"])
            assert rc == 0, (rc, out, err)

            def at_sink():
                return any(x.get("id") == f"<{token}@stack.test>"
                           for x in st.sink({"cmd": "records", "since": 0}))
            wait_for(at_sink, 30, "the flushed message at the sink")
            wait_for(lambda: not any(q["id"] == d["entry"]["id"]
                                     for q in mailctl_json("queue", "list")),
                     30, "the delivered entry to leave the queue")

        def test_queue_select_show_message():
            """Three deferred messages: show --message has the envelope, the sink's refusal
            as a try and the message; hold/delete by --to, requeue, flush --domain and
            delete ALL act on exactly the entries they select."""
            token = uuid.uuid4().hex[:8]
            rcpts = [f"q{c}-{token}@ext.heron.test" for c in "abc"]
            st.sink({"cmd": "faults", "rcpt_4xx": 1})
            try:
                with smtplib.SMTP(host, st.port("SUBMISSION_PORT"), timeout=20) as s:
                    s.login("user1", "user1")
                    for r in rcpts:
                        s.sendmail("user1@heron.test", [r],
                                   f"From: user1@heron.test\r\nMessage-ID: <{r}>\r\n"
                                   f"X-Mailload-Sent: {int(time.time() * 1000)}\r\n"
                                   f"Subject: for {r}\r\n\r\nbody of {r}\r\n")

                def tried():
                    got = {}
                    for q in mailctl_json("queue", "list", "--to", "@ext.heron.test"):
                        d = mailctl_json("queue", "show", q["id"])
                        r = d["recipients"][0]["recipient"]
                        if r in rcpts and d["tries"]:
                            got[r] = d
                    return got if len(got) == 3 else None
                entries = wait_for(tried, 30, "three deferred entries with a try each")
                ids = {r: entries[r]["entry"]["id"] for r in rcpts}
                d = mailctl_json("queue", "show", ids[rcpts[0]], "--message")
                t = d["tries"][0]
                assert t["recipient"] == rcpts[0] and t["state"] == "pending", d
                assert t["reason"].startswith("4") and t["time"].endswith("Z"), d
                assert d["entry"]["sender"] == "user1@heron.test", d
                assert f"Message-ID: <{rcpts[0]}>\r\n" in d["message"], d
                assert d["message"].endswith(f"body of {rcpts[0]}\r\n"), d
                out = subprocess.run([e["MAILCTL"], "-c", e["HERON_CONF"], "queue", "show",
                                      ids[rcpts[0]], "--message"], capture_output=True,
                                     text=True, timeout=60, check=True).stdout
                assert "*** message ***\nReceived: " in out and "Fault injected" in out, out
                r = mailctl_json("queue", "hold", "--to", rcpts[0])
                assert r["ids"] == [ids[rcpts[0]]], r
                r = mailctl_json("queue", "delete", "--to", rcpts[1].upper())
                assert r["ids"] == [ids[rcpts[1]]], r
                rc, out, err = mailctl("queue", "show", ids[rcpts[1]])
                assert rc == 1, (rc, out, err)
                r = mailctl_json("queue", "requeue", ids[rcpts[2]])
                assert r["count"] == 1, r
            finally:
                st.sink({"cmd": "faults", "rcpt_4xx": 0})
            assert mailctl_json("queue", "flush", "--domain", "elsewhere.test")["count"] == 0
            # the requeued entry may have been sent already (it was due at once): the flush
            # selects what is left of the two, the held one included
            r = mailctl_json("queue", "flush", "--domain", "ext.heron.test")
            assert ids[rcpts[0]] in r["ids"], r
            assert set(r["ids"]) <= {ids[rcpts[0]], ids[rcpts[2]]}, r

            def at_sink():
                return {x.get("id") for x in st.sink({"cmd": "records", "since": 0})}
            wait_for(lambda: f"<{rcpts[2]}>" in at_sink(), 30, "the flushed entry at the sink")
            assert f"<{rcpts[0]}>" not in at_sink(), "a held entry was sent"
            r = mailctl_json("queue", "delete", "ALL")
            assert ids[rcpts[0]] in r["ids"], r
            assert not [q for q in mailctl_json("queue", "list")
                        if q["id"] in ids.values()]
            rc, out, err = mailctl("queue", "delete", "--before", "soon")
            assert rc == 64, (rc, out, err)
            time.sleep(2)
            seen = at_sink()
            assert f"<{rcpts[0]}>" not in seen and f"<{rcpts[1]}>" not in seen, seen

        def test_auth_and_lookup_through_directory():
            rc, out, err = mailctl("auth", "test", "user3", stdin="user3\n")
            assert rc == 0, (rc, out, err)
            rc, out, err = mailctl("auth", "test", "user3", stdin="wrong\n")
            assert rc == 1, (rc, out, err)
            rc, out, err = mailctl("lookup", "user4@heron.test")
            assert rc == 0 and "user4" in out, (rc, out, err)

        return run_tests([test_user_show_and_mailbox_status, test_queue_list_show_flush,
                          test_queue_select_show_message,
                          test_auth_and_lookup_through_directory])


if __name__ == "__main__":
    sys.exit(main())
