#!/usr/bin/env python3
"""test_sendmail.py — heron-sendmail end to end against a real mtad over its local
submission socket: a cron-like `-t` invocation (To/Cc/Bcc recipients, Bcc removed, bare names
qualified, From/Date/Message-ID added, a lone "." ending the input), `-i`/`-oi` keeping a lone
"." line, -bi/newaliases checking the aliases file, recipients as arguments with -f/-F, a bad recipient (non-zero exit, a clear message,
nothing sent to the good ones), -bs (SMTP on stdio), -v, -bp/mailq listing a deferred message
from mtad's control socket (and refusing a user outside the daemon's group), and the exit
codes of sysexits.h when mtad is down, the config names no socket, or the command line is
wrong.

  test_sendmail.py SOURCE_ROOT MTAD STORE_PEEK HERON_SENDMAIL"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Mtad, RelayTarget, Store, assert_eq, assert_in,  # noqa: E402
                      assert_not_in, assert_re, run_suite, wait_for, write_conf, write_users)

ROOT, MTAD, PEEK, SENDMAIL = sys.argv[1:5]
TMP = tempfile.mkdtemp(prefix="heron-sendmail-")
SOCK = os.path.join(TMP, "submit.sock")
EX_USAGE, EX_NOUSER, EX_TEMPFAIL, EX_CONFIG = 64, 67, 75, 78
relay = RelayTarget()
write_users(os.path.join(TMP, "users"), ["user1", "user2", "user3", "root"])
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"local_submission": SOCK,
             "transport_map": f"remote.test=127.0.0.1:{relay.port}"}, tls=False)
store = Store(PEEK, mtad.conf)


def sendmail(args, stdin, conf=None):
    return subprocess.run([SENDMAIL, "-C", conf or mtad.conf, *args], input=stdin.encode(),
                          capture_output=True, timeout=60)


def messages(user):
    """The bodies of user's INBOX, oldest first."""
    return [store.body(user, int(m[0])) for m in store.inbox(user)]


def last(user):
    return messages(user)[-1]


def test_cron_t():
    before = {u: len(messages(u)) for u in ("user1", "user2", "user3")}
    r = sendmail(["-t"], f"To: user1@{DOMAIN}\nCc: The Root <user2>\n"
                         f"Bcc: user3@{DOMAIN}\nSubject: cron job\n\n"
                         "output line 1\n..starts with a dot\n.\nnot part of it\n")
    assert_eq(r.returncode, 0, r.stderr)
    for u in ("user1", "user2", "user3"):
        assert_eq(len(messages(u)), before[u] + 1, u)
    m = last("user3")
    assert_not_in(b"Bcc:", m)
    assert_in(b"\r\nSubject: cron job\r\n", m)
    assert_re(m.decode(), rf"\r\nFrom: .*<root@{DOMAIN}>\r\n")  # tests run as root
    assert_re(m.decode(), r"\r\nDate: \w{3}, \d+ \w{3} \d{4} ")
    assert_re(m.decode(), rf"\r\nMessage-ID: <[^>]+@{DOMAIN}>\r\n")
    assert_in(f"(local submission from uid {os.getuid()})".encode(), m)
    # the lines as written (a leading dot is the line's own: stuffed on the wire only)
    assert m.endswith(b"\r\n\r\noutput line 1\r\n..starts with a dot\r\n"), m
    assert_not_in(b"not part of it", m)
    mid = re.search(rb"Message-ID: (<[^>]+>)", m).group(1).decode()
    assert_in(f"message-id={mid}", mtad.logtext())


def test_dot_kept_with_i():
    for flag in ("-i", "-oi"):
        n = len(messages("user1"))
        r = sendmail([flag, f"user1@{DOMAIN}"], f"Subject: dots {flag}\n\nbefore\n.\nafter\n")
        assert_eq(r.returncode, 0, r.stderr)
        assert_eq(len(messages("user1")), n + 1)
        assert last("user1").endswith(b"\r\nbefore\r\n.\r\nafter\r\n"), last("user1")


def test_args_f_F():
    n = len(messages("user2"))
    r = sendmail(["-f", "ops@example.org", "-F", "Night Ops", "user2", "ext@remote.test"],
                 "Subject: from args\n\nhello\n")
    assert_eq(r.returncode, 0, r.stderr)
    assert_eq(len(messages("user2")), n + 1)
    assert_in(b"\r\nFrom: Night Ops <ops@example.org>\r\n", last("user2"))
    wait_for(lambda: relay.with_subject("from args"), what="the external recipient relayed")
    frm, rcpts, _ = relay.with_subject("from args")[0]
    assert_eq((frm, rcpts), ("ops@example.org", ["ext@remote.test"]))
    # an existing From: is kept; -f only sets the envelope
    r = sendmail(["-fbounces@heron.test", "user2"], "From: Someone <s@heron.test>\n"
                                                    "Subject: own from\n\nx\n")
    assert_eq(r.returncode, 0, r.stderr)
    assert_in(b"\r\nFrom: Someone <s@heron.test>\r\n", last("user2"))
    assert_eq(last("user2").count(b"\nFrom:"), 1)


def test_bad_recipient():
    n = len(messages("user1"))
    r = sendmail([f"user1@{DOMAIN}", f"nobody@{DOMAIN}"], "Subject: bad\n\nx\n")
    assert_eq(r.returncode, EX_NOUSER)
    err = r.stderr.decode()
    assert_in(f"<nobody@{DOMAIN}>: 550 5.1.1", err)
    assert_in("message not sent", err)
    assert_eq(len(messages("user1")), n)      # nothing sent, to no one
    for bad in ("a@b..c", "x@exa_mple.org", "x@-"):
        r = sendmail([bad], "x\n")
        assert_eq(r.returncode, 65, (bad, r))   # EX_DATAERR
        assert_in(b"bad address" if bad != "x@-" else b"553 5.1.3", r.stderr)


def test_no_header():
    """A message that starts with its body gets the header it lacks and its empty line."""
    n = len(messages("user3"))
    r = sendmail(["user3"], "just a body line\nand another\n")
    assert_eq(r.returncode, 0, r.stderr)
    assert_eq(len(messages("user3")), n + 1)
    assert last("user3").endswith(b">\r\n\r\njust a body line\r\nand another\r\n"), \
        last("user3")


def test_bs():
    n = len(messages("user3"))
    dialogue = (f"EHLO me\r\nMAIL FROM:<cron@{DOMAIN}>\r\nRCPT TO:<user3@{DOMAIN}>\r\n"
                "DATA\r\nSubject: bs\r\n\r\nvia -bs\r\n.\r\nQUIT\r\n")
    r = sendmail(["-bs"], dialogue)
    assert_eq(r.returncode, 0, r.stderr)
    out = r.stdout.decode()
    assert out.startswith("220 "), out
    assert_re(out, r"250 2\.0\.0 Ok: queued as [0-9a-f]{16}")
    assert_in("221 ", out)
    assert_eq(len(messages("user3")), n + 1)


def test_verbose():
    r = sendmail(["-v", "root"], "Subject: v\n\nx\n")
    assert_eq(r.returncode, 0, r.stderr)
    err = r.stderr.decode()
    assert_in(f">>> RCPT TO:<root@{DOMAIN}>", err)
    assert_re(err, r"<<< 250 2\.0\.0 Ok: queued as")


def test_usage_and_config():
    assert_eq(sendmail(["-X"], "").returncode, EX_USAGE)
    r = sendmail([], "Subject: nobody\n\nx\n")
    assert_eq(r.returncode, EX_USAGE)
    assert_in(b"no recipients", r.stderr)
    assert_eq(sendmail(["-bD"], "").returncode, EX_USAGE)
    # a config without a socket
    noconf = write_conf(os.path.join(TMP, "nosock.conf"), {"mtad": {"local_domains": DOMAIN}})
    r = sendmail(["user1"], "x\n", conf=noconf)
    assert_eq(r.returncode, EX_CONFIG)
    assert_in(b"local_submission", r.stderr)
    # mtad not listening there
    down = write_conf(os.path.join(TMP, "down.conf"), {"mtad": {
        "local_domains": DOMAIN, "local_submission": os.path.join(TMP, "none.sock")}})
    r = sendmail(["user1"], "x\n", conf=down)
    assert_eq(r.returncode, EX_TEMPFAIL)
    assert_in(b"cannot reach mtad", r.stderr)


def test_newaliases():
    """-bi (and the name newaliases) checks [mtad] aliases as mtad reads it: 0 and the count
    for a good file, EX_DATAERR naming the line for a bad one, EX_CONFIG when none is set."""
    path = os.path.join(TMP, "aliases")
    with open(path, "w") as f:
        f.write("team: user1, user2\n# a comment\nouter: partner@remote.test\n")
    conf = write_conf(os.path.join(TMP, "al.conf"), {"mtad": {
        "local_domains": DOMAIN, "aliases": path, "local_submission": SOCK}})
    r = sendmail(["-bi"], "", conf=conf)
    assert_eq(r.returncode, 0, r.stderr)
    assert_in(f"{path}: 2 aliases".encode(), r.stdout)
    link = os.path.join(TMP, "newaliases")
    os.symlink(SENDMAIL, link)
    r = subprocess.run([link, "-C", conf], capture_output=True, timeout=60)
    assert_eq(r.returncode, 0, r.stderr)
    with open(path, "a") as f:
        f.write("bad: |/bin/sh\n")
    r = sendmail(["-bi"], "", conf=conf)
    assert_eq(r.returncode, 65)
    assert_in(f"{path}:4".encode(), r.stderr)
    r = sendmail(["-bi"], "", conf=mtad.conf)  # no aliases file set
    assert_eq(r.returncode, EX_CONFIG)


def test_mailq():
    """-bp and the name mailq list the queue from mtad's control socket: a message to a
    recipient the relay keeps deferring shows with its id, size, sender, the recipient and
    the relay's 4.3.0 as the last reason; who may not open the socket gets EX_NOPERM; no mtad
    running gets EX_UNAVAILABLE; an empty queue says so."""
    wait_for(lambda: b"Mail queue is empty" in sendmail(["-bp"], "").stdout,
             what="the relayed mail of the earlier tests gone from the queue")
    r = sendmail(["-f", "night@heron.test", "deferq@remote.test", "user1"],
                 "Subject: stuck\n\nstays queued\n")
    assert_eq(r.returncode, 0, r.stderr)
    wait_for(lambda: relay.attempts.get("deferq@remote.test", 0) >= 1, what="a first try")
    wait_for(lambda: b"4.3.0 try again" in sendmail(["-bp"], "").stdout,
             what="the reason recorded")
    r = sendmail(["-bp"], "")
    assert_eq(r.returncode, 0, r.stderr)
    out = r.stdout.decode()
    lines = out.splitlines()
    assert lines[0].startswith("-Queue ID-"), out
    m = re.match(r"([0-9a-f]{16})[ *!] +(\d+) (\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d) +"
                 r"night@heron\.test$", lines[1])
    assert m, out
    assert int(m.group(2)) > len("stays queued"), out
    assert_re(out, r"\n {48}\([^)]*4\.3\.0 try again later[^)]*\)\n"
                   r" {48}deferq@remote\.test\n")
    assert_not_in("user1@", out)  # delivered locally: not in the queue
    assert_re(out, r"\n-- \d+ Kbytes in 1 Request\.\n$")
    link = os.path.join(TMP, "mailq")
    os.symlink(SENDMAIL, link)
    r = subprocess.run([link, "-C", mtad.conf], capture_output=True, timeout=60)
    assert_eq(r.returncode, 0, r.stderr)
    assert_in(m.group(1).encode(), r.stdout)
    # mtad not running (no control socket in the directory)
    empty = os.path.join(TMP, "noctl")
    os.mkdir(empty)
    down = write_conf(os.path.join(TMP, "noctl.conf"), {"control": {"dir": empty}})
    r = sendmail(["-bp"], "", conf=down)
    assert_eq(r.returncode, 69, r)  # EX_UNAVAILABLE
    assert_in(b"not running", r.stderr)
    if os.getuid() == 0:
        # a user outside the daemon's user and group: the socket (0660, root's here) refuses
        os.chmod(TMP, 0o755)
        try:
            r = subprocess.run([SENDMAIL, "-C", mtad.conf, "-bp"], capture_output=True,
                               timeout=60, user="nobody", group="nogroup", extra_groups=[])
        finally:
            os.chmod(TMP, 0o700)
        assert_eq(r.returncode, 77, r)  # EX_NOPERM
        assert_in(b"shown to root, the heron user", r.stderr)
        assert_not_in(b"deferq", r.stdout)


if __name__ == "__main__":
    sys.exit(run_suite(mtad, [
        test_cron_t, test_dot_kept_with_i, test_args_f_F, test_bad_recipient, test_no_header, test_bs,
        test_verbose, test_usage_and_config, test_newaliases, test_mailq,
    ], TMP, cleanup=[relay.close]))
