#!/usr/bin/env python3
"""test_delay.py — delay notices: a recipient that keeps getting 451 and asked NOTIFY=DELAY
makes the sender get one "delayed" DSN (multipart/report, Action: delayed, a 4.x.x Status,
Will-Retry-Until, the headers returned) once the message waited delay_warning, and only one
however many retries follow; a recipient that left DELAY out of NOTIFY gets none.

  test_delay.py SOURCE_ROOT MTAD STORE_PEEK"""
import email
import os
import smtplib
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Mtad, RelayTarget, Store, run_suite,  # noqa: E402
                      wait_for, write_users)

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-delay-")
write_users(os.path.join(TMP, "users"), ["user1", "user2"])
relay = RelayTarget()
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"transport_map": f"remote.test=127.0.0.1:{relay.port}",
             "trusted_networks": "127.0.0.0/8", "delay_warning": "2s",
             "retry_schedule": "1s"}, tls=False)
store = Store(PEEK, mtad.conf)


def send(sender, rcpt, subject, notify):
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=15) as c:
        c.ehlo("client.test")
        c.sendmail(sender, [rcpt], f"Subject: {subject}\r\n\r\nbody\r\n",
                   rcpt_options=[f"NOTIFY={notify}"])


def notices(user):
    out = []
    for uid, _b, _s in store.inbox(user):
        body = store.body(user, uid)
        if b"multipart/report" in body:
            out.append(email.message_from_bytes(body))
    return out


def test_one_delay_notice():
    send(f"user1@{DOMAIN}", "defer1@remote.test", "slow-one", "DELAY,FAILURE")
    dsn = wait_for(lambda: notices("user1"), 60, "a delay notice")[0]
    assert dsn.get_param("report-type") == "delivery-status"
    status = [p for p in dsn.walk() if p.get_content_type() == "message/delivery-status"]
    text = status[0].as_string()
    assert "Action: delayed" in text, text
    assert "Final-Recipient: rfc822; defer1@remote.test" in text, text
    assert "Status: 4." in text and "Will-Retry-Until:" in text, text
    headers = [p for p in dsn.walk() if p.get_content_type() == "text/rfc822-headers"]
    assert headers and "Subject: slow-one" in headers[0].as_string()
    # more retries, still one notice
    seen = relay.attempts["defer1@remote.test"]
    wait_for(lambda: relay.attempts["defer1@remote.test"] >= seen + 3, 60, "three more retries")
    assert len(notices("user1")) == 1
    assert mtad.logtext().count("sender delay notification") == 1


def test_no_notice_without_delay():
    send(f"user2@{DOMAIN}", "defer2@remote.test", "slow-two", "FAILURE")
    # well past delay_warning, several retries
    wait_for(lambda: relay.attempts.get("defer2@remote.test", 0) >= 4, 60, "four attempts")
    time.sleep(1)
    assert notices("user2") == []


def main():
    return run_suite(mtad, [test_one_delay_notice, test_no_notice_without_delay], TMP,
                     cleanup=[relay.close])


if __name__ == "__main__":
    sys.exit(main())
