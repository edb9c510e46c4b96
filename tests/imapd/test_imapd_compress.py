"""imapd end to end: COMPRESS=DEFLATE (RFC 4978). A raw client with zlib: the tagged OK is the
last clear byte, compressed commands pipelined right behind COMPRESS are read, responses come
flushed, a second COMPRESS is NO [COMPRESSIONACTIVE], LOGOUT's answer arrives before the close,
and a stream that is not deflate ends the connection. Then mbsync (isync), which compresses
when the server offers it, syncs a mailbox over it.

Usage: test_imapd_compress.py IMAPD_BINARY DELIVER_BINARY"""
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import IMAP_PASSWORD as PASSWORD, Imapd, after_test, run_suite  # noqa: E402
from heronlib import assert_eq, assert_in, assert_lt, assert_not_in  # noqa: E402

D = None  # the imapd the running tests talk to

BIG = b"From: a@heron.test\r\nSubject: big\r\n\r\n" + b"zebra line of text\r\n" * 5000


class Deflate:
    """Both directions of a raw client's connection through zlib (raw deflate)."""

    def __init__(self, r, co=None):
        self.r = r
        self.co = co or zlib.compressobj(6, zlib.DEFLATED, -15)
        self.do = zlib.decompressobj(-15)
        self.plain = self.do.decompress(r.buf)  # what arrived behind the tagged OK
        r.buf = b""
        self.wire = 0

    def send(self, data):
        self.r.s.sendall(self.co.compress(data) + self.co.flush(zlib.Z_SYNC_FLUSH))

    def until(self, tag):
        """The lines up to the tagged one, as text."""
        mark = b"\r\n" + tag.encode() + b" "
        while mark not in b"\r\n" + self.plain or not self.plain.endswith(b"\r\n"):
            chunk = self.r.s.recv(65536)
            if not chunk:
                raise EOFError(self.plain[-200:])
            self.wire += len(chunk)
            self.plain += self.do.decompress(chunk)
        i = (b"\r\n" + self.plain).index(mark)
        j = self.plain.index(b"\r\n", i) + 2
        out, self.plain = self.plain[:j], self.plain[j:]
        return out.decode().split("\r\n")[:-1]

    def cmd(self, tag, text):
        self.send(("%s %s\r\n" % (tag, text)).encode())
        return self.until(tag)


def test_fill_mailbox():
    D.raw("bob")  # the first login makes the user
    for _ in range(3):
        D.deliver("bob", BIG)


def test_dialogue():
    r = D.raw(login=False)
    assert_not_in("COMPRESS", r.greeting)  # offered after login only
    assert_eq(r.cmd("a", "COMPRESS DEFLATE"), ["a NO Log in first"])
    r.cmd("L", 'LOGIN bob "%s"' % PASSWORD)
    assert_eq(r.cmd("b", "COMPRESS GZIP"), ["b BAD Expected: COMPRESS DEFLATE"])
    co = zlib.compressobj(6, zlib.DEFLATED, -15)
    r.send(b"c COMPRESS DEFLATE\r\n" + co.compress(b"n NOOP\r\n") + co.flush(zlib.Z_SYNC_FLUSH))
    assert_eq(r.line(), "c OK DEFLATE active")
    z = Deflate(r, co)
    assert_eq(z.until("n"), ["n OK Completed"])
    caps = z.cmd("d", "CAPABILITY")[0]
    assert_not_in("COMPRESS=DEFLATE", caps)  # not again once active
    assert_eq(z.cmd("e", "COMPRESS DEFLATE"),
              ["e NO [COMPRESSIONACTIVE] DEFLATE is already active"])
    assert_eq(z.cmd("s", "SELECT INBOX")[-1], "s OK [READ-WRITE] SELECT completed")
    before = z.wire
    out = z.cmd("f", "FETCH 1:3 BODY.PEEK[]")
    assert_eq(out[-1], "f OK Fetch completed")
    assert_eq(sum(1 for line in out if " FETCH (BODY[] {%d}" % len(BIG) in line), 3)
    assert_eq(sum(1 for line in out if line == "zebra line of text"), 3 * 5000)
    assert_lt(z.wire - before, len(BIG))  # three bodies in less than one's size
    assert_eq(z.cmd("l", "LOGOUT"), ["* BYE Logging out", "l OK Logout completed"])


def test_not_deflate_closes():
    r = D.raw("bob")
    assert_eq(r.cmd("c", "COMPRESS DEFLATE"), ["c OK DEFLATE active"])
    r.send(b"\xff\xff\xff\xff not deflate at all\r\n")
    r.s.settimeout(20)
    data = b"x"
    while data:
        data = r.s.recv(4096)  # closed, nothing answered in clear
        assert_not_in(b" BAD ", data)


def test_mbsync():
    mbsync = shutil.which("mbsync")
    assert mbsync is not None, "mbsync (isync) is in scripts/bootstrap"
    t = tempfile.mkdtemp()
    after_test(shutil.rmtree, t, True)
    os.makedirs(os.path.join(t, "mail"))
    with open(os.path.join(t, "rc"), "w") as f:
        f.write(f"""IMAPAccount h
Host 127.0.0.1
Port {D.port}
User {"bob"}
Pass "{PASSWORD}"
SSLType None
AuthMechs LOGIN

IMAPStore h-remote
Account h

MaildirStore h-local
Path {t}/mail/
Inbox {t}/mail/INBOX

Channel h
Far :h-remote:
Near :h-local:
Patterns *
Create Near
SyncState *
""")
    p = subprocess.run([mbsync, "-D", "-c", os.path.join(t, "rc"), "-a"],
                       capture_output=True, text=True, timeout=120)
    log = p.stdout + p.stderr
    assert_eq(p.returncode, 0, log[-3000:])
    assert_in(">>> 2 COMPRESS DEFLATE", log)
    got = []
    for sub in ("cur", "new"):
        for name in os.listdir(os.path.join(t, "mail", "INBOX", sub)):
            with open(os.path.join(t, "mail", "INBOX", sub, name), "rb") as f:
                got.append(f.read())
    assert_eq(len(got), 3)
    body = BIG.split(b"\r\n\r\n", 1)[1]
    assert all(m.replace(b"\r\n", b"\n").endswith(body.replace(b"\r\n", b"\n")) for m in got)


def main():
    global D
    D = Imapd(sys.argv[1], deliver=sys.argv[2])
    return run_suite(D, [test_fill_mailbox, test_dialogue, test_not_deflate_closes,
                         test_mbsync], D.dir)


if __name__ == "__main__":
    sys.exit(main())
