"""SIGHUP makes imapd read heron.conf again (two workers): a smaller max_append_size refuses,
in new sessions, an APPEND that was accepted before (and APPENDLIMIT shows it); a new
certificate is served to new TLS connections; a key that needs a restart (workers) is only
reported; a config file with an error leaves the running config as it was.

Usage: test_imapd_reload.py IMAPD_BINARY DELIVER_BINARY"""
import os
import signal
import ssl
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import IMAP_PASSWORD as PASSWORD, Imapd, ImapRaw as Raw, make_cert  # noqa: E402
from heronlib import assert_eq, assert_in, assert_re, run_suite  # noqa: E402

D = None  # the imapd the tests talk to
WORKERS = 2
MESSAGE = (b"From: a@heron.test\r\nTo: alice@heron.test\r\nSubject: reload\r\n\r\n" +
           b"x" * 76 + b"\r\n") * 50  # about 4 KB


def full_log(d):
    return d.logtext()


def append(d):
    """The tagged reply of an APPEND of MESSAGE in a new session, and its APPENDLIMIT."""
    r = Raw(d.port)
    try:
        assert r.cmd("l", 'LOGIN alice "%s"' % PASSWORD)[-1].startswith("l OK")
        caps = r.cmd("c", "CAPABILITY")[0]
        limit = int(caps.split("APPENDLIMIT=")[1].split()[0])
        r.send("a APPEND INBOX {%d+}\r\n" % len(MESSAGE))
        r.send(MESSAGE + b"\r\n")
        return r.until_tag("a")[-1], limit
    finally:
        r.close()


def edit_conf(old, new):
    with open(D.conf) as f:
        text = f.read()
    assert_in(old, text)
    with open(D.conf, "w") as f:
        f.write(text.replace(old, new, 1))


def hup(what, count):
    """SIGHUP to the master; waits until what appears count more times in the log.
    Returns the log written since the signal."""
    before = full_log(D)
    n = before.count(what)
    D.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 20
    while time.time() < deadline:
        text = full_log(D)
        if text.count(what) >= n + count:
            return text[len(before):]
        time.sleep(0.05)
    raise AssertionError("no %r after SIGHUP: %s" % (what, full_log(D)[-3000:]))


def test_1_limit_reloaded():
    reply, limit = append(D)
    assert reply.startswith("a OK"), reply
    assert_eq(limit, 64 * 1024)
    edit_conf("max_append_size = 64k", "max_append_size = 2k")
    edit_conf("workers = %d" % WORKERS, "workers = %d" % (WORKERS + 1))
    log = hup("config reloaded", WORKERS)
    assert_in("[imapd] max_append_size = 2k", log)
    assert_re(log, r"\[imapd\] workers changed: .*restarted")
    for _ in range(2 * WORKERS):  # sessions on every worker
        reply, limit = append(D)
        assert_eq(reply, "a NO [TOOBIG] Message too large")
        assert_eq(limit, 2048)


def test_2_certificate_reloaded():
    cert, key = make_cert(D.dir, "reloaded")
    edit_conf("cert = %s\nkey = %s\n" % (D.cert, os.path.join(D.dir, "key.pem")),
              "cert = %s\nkey = %s\n" % (cert, key))
    hup("TLS certificate reloaded", WORKERS + 1)  # the master too
    ctx = ssl.create_default_context(cafile=cert)  # the new certificate only
    for _ in range(2 * WORKERS):
        r = Raw(D.tls_port, tls_ctx=ctx)
        try:
            assert r.greeting.startswith("* OK"), r.greeting
        finally:
            r.close()


def test_3_bad_config_keeps_the_old():
    with open(D.conf, "a") as f:
        f.write("[imapd]\nno_such_key = 1\n")
    hup("failed, the old config stays", WORKERS + 1)
    reply, limit = append(D)
    assert_eq(reply, "a NO [TOOBIG] Message too large")
    assert_eq(limit, 2048)


def main():
    global D
    D = Imapd(sys.argv[1], deliver=sys.argv[2], tls=True, workers=WORKERS,
              extra="max_append_size = 64k")
    return run_suite(D, [test_1_limit_reloaded, test_2_certificate_reloaded,
                         test_3_bad_config_keeps_the_old], D.dir)


if __name__ == "__main__":
    sys.exit(main())
