#!/usr/bin/env python3
"""test_srs.py — SRS in mtad end to end with smtplib: mail to an alias with an external target
reaches the relay target from an SRS0 address of ours, which Debian's python3-srs (an
independent implementation of the scheme) reverses to the original sender; a bounce to that
address (from <>, by a client that may not relay) reaches the original sender; a forged or
damaged SRS address gets 550 5.1.1; the null sender is never rewritten (a sender of our
own domain neither: tests/mtad/test_srs.c and rcpt_srs_sender).

  test_srs.py SOURCE_ROOT MTAD STORE_PEEK"""
import os
import re
import smtplib
import sys
import tempfile

import SRS

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Mtad, RelayTarget, assert_eq, assert_re,  # noqa: E402
                      run_suite, wait_for, write_users)

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-srs-")
SECRET = "srs-test-secret-of-heron"
relay = RelayTarget()
write_users(os.path.join(TMP, "users"), ["user1"])
with open(os.path.join(TMP, "aliases"), "w") as f:
    f.write("fwd: partner@remote.test\n")
with open(os.path.join(TMP, "srs.secret"), "w") as f:
    f.write(f"# the signing secret\n{SECRET}\n")
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"aliases": os.path.join(TMP, "aliases"),
             "srs_secret_file": os.path.join(TMP, "srs.secret"),
             "transport_map": f"remote.test=127.0.0.1:{relay.port},"
                              f"example.org=127.0.0.1:{relay.port}"}, tls=False)
other = SRS.new(secret=SECRET, maxage=21, hashlength=4)


def send(sender, rcpt, subject):
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=15) as c:
        c.ehlo("client.test")
        c.mail(sender)
        code, text = c.rcpt(rcpt)
        if code != 250:
            return code, text
        return c.data(f"From: <x@client.test>\r\nSubject: {subject}\r\n\r\nbody\r\n")


def relayed_from(subject):
    wait_for(lambda: relay.with_subject(subject), what=f"{subject} relayed")
    (frm, rcpts, _), = relay.with_subject(subject)
    return frm, rcpts


def test_forward_rewritten():
    assert_eq(send("alice@example.org", f"fwd@{DOMAIN}", "srs1")[0], 250)
    frm, rcpts = relayed_from("srs1")
    assert_eq(rcpts, ["partner@remote.test"])
    assert_re(frm, rf"^SRS0=[A-Za-z0-9+/]{{4}}=[A-Z2-7]{{2}}=example\.org=alice@{DOMAIN}$")
    assert_eq(other.reverse(frm), "alice@example.org")  # the other implementation agrees
    assert_eq(other.forward("alice@example.org", f"x@{DOMAIN}"), frm)


def test_bounce_reversed():
    frm, _ = relayed_from("srs1")
    # the bounce from the partner's side: a client that may not relay, the null sender
    assert_eq(send("", frm, "srs-bounce")[0], 250)
    bfrm, rcpts = relayed_from("srs-bounce")
    assert_eq((bfrm, rcpts), ("", ["alice@example.org"]))
    assert_re(mtad.logtext(), r"to=<alice@example\.org> srs=yes orig_to=<SRS0=")


def test_forged_refused():
    forged = other.forward("mallory@example.org", f"x@{DOMAIN}")
    forged = forged.replace("=mallory@", "=eve@")  # another sender under its hash
    code, text = send("", forged, "srs-forged")
    assert_eq(code, 550)
    assert_re(text.decode(), r"^5\.1\.1 ")
    wrong = SRS.new(secret="not-our-secret", maxage=21, hashlength=4)
    assert_eq(send("", wrong.forward("alice@example.org", f"x@{DOMAIN}"), "srs-f2")[0], 550)
    assert_eq(send("", f"SRS0=xx@{DOMAIN}", "srs-f3")[0], 550)


def test_never_rewritten():
    assert_eq(send("", f"fwd@{DOMAIN}", "srs-null")[0], 250)
    assert_eq(relayed_from("srs-null")[0], "")


if __name__ == "__main__":
    sys.exit(run_suite(mtad, [test_forward_rewritten, test_bounce_reversed, test_forged_refused,
                              test_never_rewritten], TMP, cleanup=[relay.close]))
