#!/usr/bin/env python3
"""test_managesieve.py — managesieved (RFC 5804) end to end: sieve-connect uploads, lists,
downloads and activates a script over STARTTLS with AUTHENTICATE PLAIN (users file, the same
ldapauth path as imapd); the script then files mail sent with smtplib, read back with
imaplib; a malformed script is refused by PUTSCRIPT with its line; the protocol corners
(capabilities before and after STARTTLS, no PLAIN in clear, HAVESPACE, quota, RENAMESCRIPT,
DELETESCRIPT of the active script, GETSCRIPT literal, CHECKSCRIPT, a 1 MB script, literals
split anywhere) with a raw TLS client; a session busy at SIGTERM is answered, then closed.

  test_managesieve.py SOURCE_ROOT MANAGESIEVED MTAD IMAPD"""
import base64
import imaplib
import os
import shutil
import smtplib
import socket
import ssl
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (HOST, Daemon, RelayTarget, free_port, make_cert, run_main,  # noqa: E402
                      run_tests, shared_conf, wait_for)

ROOT, MSD, MTAD, IMAPD = sys.argv[1:5]
TMP = tempfile.mkdtemp(prefix="heron-msieve-")
MS_PORT = free_port()
CERT, KEY = make_cert(TMP)
relay = RelayTarget()  # remote.test: where a redirect goes (no SRS in this mtad)
CONF, SMTP_PORT, IMAP_PORT = shared_conf(TMP, ["alice", "bob"], keys={
    "tls": {"cert": CERT, "key": KEY},
    "mtad": {"transport_map": f"remote.test=127.0.0.1:{relay.port}", "retry_schedule": "1s"},
    "sieve": {"listen": f"{HOST}:{MS_PORT}", "max_scripts": "3", "max_storage": "2M"},
})
msd = Daemon(MSD, CONF, os.path.join(TMP, "managesieved.log"), MS_PORT)
mtad = Daemon(MTAD, CONF, os.path.join(TMP, "mtad.log"), SMTP_PORT)
imapd = Daemon(IMAPD, CONF, os.path.join(TMP, "imapd.log"), IMAP_PORT)
SIEVE_CONNECT = shutil.which("sieve-connect")


def sc(user, *args):
    """sieve-connect with the password on a descriptor; (exit code, output)."""
    r = subprocess.run([SIEVE_CONNECT, "-s", HOST, "-p", str(MS_PORT), "-u", user,
                        "--passwordfd", "0", "--notlsverify", *args], input=user + "\n",
                       capture_output=True, text=True, timeout=60, cwd=TMP)
    return r.returncode, r.stdout + r.stderr


class Raw:
    def __init__(self):
        self.s = socket.create_connection((HOST, MS_PORT), timeout=15)
        self.f = self.s.makefile("rb")

    def send(self, data):
        self.s.sendall(data if isinstance(data, bytes) else data.encode())

    def response(self):
        """Lines up to and including the final OK/NO/BYE line."""
        lines = []
        while True:
            line = self.f.readline(1 << 21)
            if not line:
                raise EOFError("closed")
            lines.append(line.decode(errors="replace").rstrip("\r\n"))
            if lines[-1].startswith(("OK", "NO", "BYE")):
                return lines

    def starttls(self):
        self.send("STARTTLS\r\n")
        assert self.response()[-1].startswith("OK")
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        self.s = ctx.wrap_socket(self.s, server_hostname="localhost")
        self.f = self.s.makefile("rb")
        return self.response()  # the capabilities again

    def login(self, user):
        b = base64.b64encode(f"\0{user}\0{user}".encode()).decode()
        self.send(f'AUTHENTICATE "PLAIN" "{b}"\r\n')
        return self.response()[-1]


def tls_session(user="bob"):
    r = Raw()
    r.response()
    r.starttls()
    assert r.login(user).startswith("OK")
    return r


def test_sieve_connect_upload_activate_and_filter():
    path = os.path.join(TMP, "filter.sieve")
    with open(path, "w") as f:
        f.write('require ["fileinto", "imap4flags"];\n'
                'if header :contains "subject" "invoice" { fileinto :flags "\\\\Flagged" '
                '"Invoices"; }\n')
    rc, text = sc("alice", "--localsieve", path, "--remotesieve", "filter", "--upload")
    assert rc == 0, text
    rc, text = sc("alice", "--remotesieve", "filter", "--activate")
    assert rc == 0, text
    rc, text = sc("alice", "--list")
    assert rc == 0 and '"filter" ACTIVE' in text.replace("filter  <- active", '"filter" ACTIVE'), text
    back = os.path.join(TMP, "back.sieve")
    rc, text = sc("alice", "--remotesieve", "filter", "--localsieve", back, "--download")
    assert rc == 0 and open(back).read() == open(path).read(), text
    c = imaplib.IMAP4(HOST, IMAP_PORT)
    c.login("alice", "alice")
    c.create("Invoices")
    c.logout()
    with smtplib.SMTP(HOST, SMTP_PORT) as s:
        s.sendmail("shop@example.org", ["alice@heron.test"],
                   "From: shop@heron.test\r\nSubject: your invoice 42\r\n\r\npay\r\n")

    def filed():
        c = imaplib.IMAP4(HOST, IMAP_PORT)
        c.login("alice", "alice")
        typ, data = c.select("Invoices", readonly=True)
        n = int(data[0])
        flags = c.fetch("1", "(FLAGS)")[1][0] if n else b""
        c.logout()
        return n == 1 and b"\\Flagged" in flags
    wait_for(filed, what="the invoice filed and flagged")


def test_redirect_keeps_the_sender_without_srs():
    # RFC 5228 4.2 with [mtad] srs_secret_file unset: the copy leaves from the original
    # envelope sender (test_sieve_deliver checks the SRS form and <>)
    path = os.path.join(TMP, "fwd.sieve")
    with open(path, "w") as f:
        f.write('if header :contains "subject" "forward me" { redirect "far@remote.test"; }\n')
    rc, text = sc("alice", "--localsieve", path, "--remotesieve", "fwd", "--upload")
    assert rc == 0, text
    rc, text = sc("alice", "--remotesieve", "fwd", "--activate")
    assert rc == 0, text
    with smtplib.SMTP(HOST, SMTP_PORT) as s:
        s.sendmail("ext@example.org", ["alice@heron.test"],
                   "From: ext@example.org\r\nSubject: please forward me\r\n\r\nhi\r\n")
    wait_for(lambda: relay.with_subject("please forward me"), timeout=60,
             what="the redirected copy at remote.test")
    (frm, rcpts, data), = relay.with_subject("please forward me")
    assert (frm, rcpts) == ("ext@example.org", ["far@remote.test"]), (frm, rcpts)
    assert b"Delivered-To: alice@heron.test\r\n" in data, data[:300]
    r = tls_session("alice")  # back to alice's filter script, fwd deleted
    r.send('SETACTIVE "filter"\r\nDELETESCRIPT "fwd"\r\nLOGOUT\r\n')
    assert r.response() == ["OK"] and r.response() == ["OK"]


def test_putscript_refuses_malformed_with_line():
    path = os.path.join(TMP, "bad.sieve")
    with open(path, "w") as f:
        f.write('require "fileinto";\nif header :is "subject" "x" {\n  fileinto "y"\n}\n')
    rc, text = sc("alice", "--localsieve", path, "--remotesieve", "bad", "--upload")
    assert rc != 0 and "line 4, column 1" in text, text


def test_capabilities_and_plaintext_refused():
    r = Raw()
    caps = "\n".join(r.response())
    assert '"STARTTLS"' in caps and '"SASL" ""' in caps, caps
    assert '"SIEVE" "fileinto' in caps and "vacation-seconds" in caps and "regex" in caps
    assert "comparator-i;unicode-casemap" in caps, caps
    b = base64.b64encode(b"\0bob\0bob").decode()
    r.send(f'AUTHENTICATE "PLAIN" "{b}"\r\n')
    assert "ENCRYPT-NEEDED" in r.response()[-1]
    caps = "\n".join(r.starttls())
    assert '"SASL" "PLAIN"' in caps, caps
    assert '"STARTTLS"' not in caps, caps
    r.send("AUTHENTICATE \"PLAIN\"\r\n")
    assert r.f.readline().strip() == b'""'
    r.send(base64.b64encode(b"\0bob\0wrong").decode() + "\r\n")
    assert r.response()[-1].startswith("NO")
    assert r.login("bob").startswith("OK")


def test_script_commands():
    r = tls_session("bob")
    r.send('HAVESPACE "a" 1000\r\n')
    assert r.response() == ["OK"]
    r.send('HAVESPACE "a" 99999999\r\n')
    assert "QUOTA/MAXSIZE" in r.response()[-1]
    body = b'keep;\r\n'
    r.send(b'PUTSCRIPT "a" {%d+}\r\n%s\r\n' % (len(body), body))
    assert r.response() == ["OK"]
    r.send('CHECKSCRIPT {5+}\r\nkeep \r\n')
    assert r.response()[-1].startswith('NO "line 1, column 6')
    r.send('SETACTIVE "a"\r\nDELETESCRIPT "a"\r\n')
    assert r.response() == ["OK"]
    assert "(ACTIVE)" in r.response()[-1]
    r.send('RENAMESCRIPT "a" "b"\r\nLISTSCRIPTS\r\n')
    assert r.response() == ["OK"]
    assert r.response() == ['"b" ACTIVE', "OK"]
    r.send('GETSCRIPT "b"\r\n')
    assert r.response() == ["{7}", "keep;", "", "OK"]
    r.send('GETSCRIPT "nope"\r\n')
    assert "(NONEXISTENT)" in r.response()[-1]
    for n in ("c", "d"):
        r.send(b'PUTSCRIPT "%s" {%d+}\r\n%s\r\n' % (n.encode(), len(body), body))
        assert r.response() == ["OK"]
    r.send(b'PUTSCRIPT "e" {%d+}\r\n%s\r\n' % (len(body), body))
    assert "QUOTA/MAXSCRIPTS" in r.response()[-1]
    r.send('SETACTIVE ""\r\nDELETESCRIPT "b"\r\nNOOP "t1"\r\n')
    assert r.response() == ["OK"]
    assert r.response() == ["OK"]
    assert r.response() == ['OK (TAG "t1") "Done"']
    r.send("LOGOUT\r\n")
    assert r.response()[-1].startswith("OK")


def test_bad_input():
    r = tls_session("bob")
    big = b"#" * (1 << 20) + b"\r\nkeep;\r\n"   # over max_script_size (1M)
    r.send(b'PUTSCRIPT "big" {%d+}\r\n' % len(big) + big + b"\r\n")
    assert "QUOTA/MAXSIZE" in r.response()[-1]
    r.send("NOOP\r\n")  # the session goes on after the dropped literal
    assert r.response()[-1].startswith("OK")
    r.send("FROB\r\n")
    assert r.response()[-1].startswith("NO")
    r.send('PUTSCRIPT "x\r\n')
    assert r.response()[-1].startswith("NO")
    # a literal split across many writes
    body = b'require "fileinto";\r\nfileinto "Split";\r\n'
    msg = b'PUTSCRIPT "split" {%d+}\r\n%s\r\n' % (len(body), body)
    for i in range(len(msg)):
        r.send(msg[i:i + 1])
    assert r.response() == ["OK"]
    deep = b"if true {" * 10000 + b"keep;" + b"}" * 10000
    r.send(b'PUTSCRIPT "deep" {%d+}\r\n%s\r\n' % (len(deep), deep))
    assert "nested too deeply" in r.response()[-1]
    r.send("A" * 20000 + "\r\n")
    assert "too long" in r.response()[-1]
    r.send("NOOP\r\n")
    assert r.response()[-1].startswith("OK")


def test_login_throttle():
    # two guesses at once from two sessions: the throttle mtad and imapd share counts the
    # first when it starts, so the second is spaced (and says so in the log)
    bad = base64.b64encode(b"\0alice\0wrong").decode()
    r1, r2 = Raw(), Raw()
    for r in (r1, r2):
        r.response()
        r.starttls()
    r1.send(f'AUTHENTICATE "PLAIN" "{bad}"\r\n')
    r2.send(f'AUTHENTICATE "PLAIN" "{bad}"\r\n')
    assert r1.response()[-1].startswith("NO")
    assert r2.response()[-1].startswith("NO")
    wait_for(lambda: "sieve throttle addr=127.0.0.1 user=alice decision=wait" in msd.logtext(),
             what="the throttle's log line")
    for _ in range(2):
        r1.send(f'AUTHENTICATE "PLAIN" "{bad}"\r\n')
        last = r1.response()
    assert last[-1].startswith("NO"), last
    assert r1.response()[-1].startswith("BYE")  # three failures end the session
    assert login_ok("alice")  # the right password still gets in


def test_drain_closes_a_busy_session_after_its_command():
    # last (it stops managesieved): the NO of a failed login waits for the throttle's hold,
    # the session busy meanwhile; a SIGTERM then still gets the NO out, then the BYE and the
    # close, and the worker exits (it served the session on before)
    user = "drainer"  # no such user: failures of its own pair
    bad = base64.b64encode(f"\0{user}\0wrong".encode()).decode()

    def failures():
        return msd.logtext().count(f"managesieve login user={user} result=fail")
    r = Raw()
    r.response()
    r.starttls()
    for _ in range(2):
        r.send(f'AUTHENTICATE "PLAIN" "{bad}"\r\n')
        assert r.response()[-1].startswith("NO")
    r.send("LOGOUT\r\n")
    r.response()
    r = Raw()
    r.response()
    r.starttls()
    r.send(f'AUTHENTICATE "PLAIN" "{bad}"\r\n')  # its NO held 2 s (the pair's third)
    wait_for(lambda: failures() == 3, what="the third failure, its NO held")
    msd.terminate()
    assert r.response()[-1].startswith("NO")
    assert r.response() == ['BYE "Server shutting down"']
    assert r.f.readline() == b""
    msd.proc.wait(timeout=30)


def login_ok(user):
    r = tls_session(user)
    r.send("LOGOUT\r\n")
    r.response()
    return True


TESTS = [test_sieve_connect_upload_activate_and_filter,
         test_redirect_keeps_the_sender_without_srs,
         test_login_throttle, test_putscript_refuses_malformed_with_line,
         test_capabilities_and_plaintext_refused, test_script_commands, test_bad_input,
         test_drain_closes_a_busy_session_after_its_command]


def main():
    if SIEVE_CONNECT is None:
        print("sieve-connect is not installed (scripts/bootstrap installs it)")
        return 1

    def body():
        msd.start()
        mtad.start()
        imapd.start()
        return run_tests(TESTS)
    return run_main(body, TMP, [msd, mtad, imapd], cleanup=[relay.close], tail=8000)


if __name__ == "__main__":
    sys.exit(main())
