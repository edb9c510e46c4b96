#!/usr/bin/env python3
"""run_golden.py — golden dialogue tests of the session state machines: each NAME.in is a
client's side of a dialogue, sent line by line to a fresh mtad (smtp_*, submission_*,
lmtp_*) or imapd (imap_*); the whole transcript ("C: " lines sent, "S: " lines received) must
equal NAME.ref byte for byte, after the few values that differ from run to run are written as
placeholders (NORMALIZE below). A mismatch prints a unified diff and the transcript is kept
as NAME.out in the temporary directory named.

How a line is sent (the reply each waits for):
  SMTP   every line waits for one complete reply (its last line "NNN "); after a 354 the lines
         up to "." are the message, sent without waiting; in LMTP the "." waits for one
         reply per accepted recipient.
  IMAP   a line waits for the tagged reply of its tag, or for a "+" continuation (the next
         line then belongs to the same command: AUTHENTICATE data, DONE); a line ending in
         {N} sends the N bytes of the lines after it once "+" came, {N+} sends them at once;
         the line after those is the rest of the command line (empty: the command ends).
Lines starting with "#" are comments, not sent. A NAME.zones file beside NAME.in gives the
dialogue a private DNS world (scripts/dns): {"zones": SPEC, "conf": {section: {key: value}}}.

  run_golden.py SOURCE_ROOT MTAD IMAPD [--update]   (--update rewrites the .ref files)"""
import difflib
import glob
import json
import os
import re
import shutil
import socket
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (IMAP_PASSWORD, DnsWorld, Imapd, Mtad, run_tests,  # noqa: E402
                      sha256_hash, write_users)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT, MTAD, IMAPD = sys.argv[1:4]
UPDATE = "--update" in sys.argv[4:]
TMP = tempfile.mkdtemp(prefix="heron-golden-")
TIMEOUT = 30  # seconds for any one reply

# values that change from run to run
NORMALIZE = [
    (re.compile(rb"\b[0-9a-f]{16}\b"), b"<id>"),                       # queue and session ids
    (re.compile(rb"(UIDVALIDITY|APPENDUID|COPYUID) \d+"), rb"\1 <uidvalidity>"),
    (re.compile(rb"127\.0\.0\.1:\d+"), b"127.0.0.1:<port>"),
    (re.compile(rb"(MAILBOXID|EMAILID|THREADID) \([A-Za-z0-9_-]+\)"), rb"\1 (<objectid>)"),
]


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.buf = b""
        self.log = []

    def line(self):
        while b"\r\n" not in self.buf:
            data = self.s.recv(65536)
            if not data:
                raise AssertionError("connection closed; transcript so far:\n" +
                                     b"\n".join(self.log).decode(errors="replace"))
            self.buf += data
        ln, self.buf = self.buf.split(b"\r\n", 1)
        self.log.append(b"S: " + ln)
        return ln

    def send(self, ln):
        self.log.append(b"C: " + ln)
        self.s.sendall(ln + b"\r\n")

    def end(self, last):
        """After QUIT or LOGOUT the server must close the connection: "-- closed" ends the
        transcript (anything more it sent is shown)."""
        if not re.match(rb"(?i)^(\S+ )?(QUIT|LOGOUT)$", last):
            return
        while True:
            data = self.s.recv(65536)
            if not data:
                break
            self.buf += data
        for ln in self.buf.split(b"\r\n"):
            if ln:
                self.log.append(b"S: " + ln)
        self.log.append(b"-- closed")


def smtp_reply(c):
    """One reply; its code."""
    while True:
        ln = c.line()
        if len(ln) < 4 or ln[3:4] != b"-":
            return int(ln[:3]) if ln[:3].isdigit() else 0


def smtp_dialogue(port, lines, lmtp=False):
    c = Conn(port)
    smtp_reply(c)  # the greeting
    i, rcpts = 0, 0
    while i < len(lines):
        ln = lines[i]
        c.send(ln)
        i += 1
        code = smtp_reply(c)
        verb = ln.split(b" ")[0].upper()
        if verb in (b"MAIL", b"RSET", b"LHLO", b"EHLO", b"HELO"):
            rcpts = 0
        if verb == b"RCPT" and code == 250:
            rcpts += 1
        if code == 354:  # the message, then one reply (LMTP: one a recipient)
            while i < len(lines) and lines[i] != b".":
                c.send(lines[i])
                i += 1
            if i < len(lines):
                c.send(lines[i])
                i += 1
            for _ in range(rcpts if lmtp else 1):
                smtp_reply(c)
            rcpts = 0
    c.end(lines[-1] if lines else b"")
    return c.log


def imap_dialogue(port, lines):
    c = Conn(port)
    c.line()  # the greeting
    i, tag = 0, None
    while i < len(lines):
        ln = lines[i]
        i += 1
        if tag is None:  # a new command: its first word is the tag
            tag = ln.split(b" ", 1)[0]
        c.send(ln)
        m = re.search(rb"\{(\d+)(\+?)\}$", ln)
        if m:  # a literal: its bytes are the lines after it (CRLF counted), then the
            # command goes on with the line after those
            if not m.group(2):
                cont = c.line()
                assert cont.startswith(b"+"), cont
            need, data = int(m.group(1)), b""
            while len(data) < need and i < len(lines):
                c.log.append(b"C: " + lines[i])
                data += lines[i] + b"\r\n"
                i += 1
            assert len(data) == need, f"{need}-byte literal, {len(data)} bytes of lines"
            c.s.sendall(data)
            continue
        while True:  # the tagged reply, or a continuation (the command goes on)
            got = c.line()
            if got.startswith(b"+"):
                break
            if got.startswith(tag + b" "):
                tag = None
                break
    c.end(lines[-1] if lines else b"")
    return c.log


def normalize(text):
    for rx, rep in NORMALIZE:
        text = rx.sub(rep, text)
    return text


def check(name, log):
    got = normalize(b"\n".join(log) + b"\n")
    ref = os.path.join(HERE, name + ".ref")
    if UPDATE:
        with open(ref, "wb") as f:
            f.write(got)
        return
    with open(ref, "rb") as f:
        want = f.read()
    if got != want:
        out = os.path.join(TMP, name + ".out")
        with open(out, "wb") as f:
            f.write(got)
        diff = difflib.unified_diff(want.decode(errors="replace").splitlines(True),
                                    got.decode(errors="replace").splitlines(True),
                                    name + ".ref", out)
        raise AssertionError("transcript differs:\n" + "".join(diff))


def read_in(path):
    with open(path, "rb") as f:
        return [ln for ln in f.read().split(b"\n")[:-1] if not ln.startswith(b"#")]


def mtad_for(name):
    d = os.path.join(TMP, name)
    os.mkdir(d)
    users = os.path.join(d, "users")
    write_users(users, ["user1", "user2"])
    # AUTH without TLS on submission, so the dialogue stays in clear text; room for the
    # errors of smtp_errors before 421
    return Mtad(MTAD, d, {"backend": "file", "users_file": users},
                {"auth_require_tls": "no", "workers": "1", "max_errors": "30"}, tls=False)


def make_test(path):
    name = os.path.basename(path)[:-3]
    lines = read_in(path)

    def test():
        if name.startswith("imap_"):
            with Imapd(IMAPD) as d:
                check(name, imap_dialogue(d.port, lines))
            return
        m = mtad_for(name)
        world = None
        zones = path[:-3] + ".zones"
        if os.path.exists(zones):
            # a DNS world for the dialogue (scripts/dns) and the sections it names
            with open(zones) as f:
                spec = json.load(f)
            world = DnsWorld(ROOT, m.tmp, spec["zones"])
            m.sections["dns"] = world.conf()
            for sec, kv in spec.get("conf", {}).items():
                m.sections.setdefault(sec, {}).update(kv)
            m.write_conf()
        try:
            with m:
                port = {"smtp": m.port, "submission": m.sub_port, "lmtp": m.lmtp_port}[
                    name.split("_")[0]]
                check(name, smtp_dialogue(port, lines, lmtp=name.startswith("lmtp_")))
        finally:
            if world is not None:
                world.stop()
    test.__name__ = name
    return test


def main():
    tests = [make_test(p) for p in sorted(glob.glob(os.path.join(HERE, "*.in")))]
    assert tests, "no .in files"
    rc = run_tests(tests)
    if rc == 0:
        shutil.rmtree(TMP, ignore_errors=True)
    else:
        print(f"transcripts kept in {TMP}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
