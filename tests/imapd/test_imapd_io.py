"""imapd end to end: the output path seen from the kernel. strace is attached to every thread
of the worker for one exchange at a time (-e epoll_ctl and the socket reads and writes) and
the exchange is counted on the client's socket: a reply leaves in one write and arms no
EV_WRITE (no epoll_ctl for its socket), plain and under COMPRESS=DEFLATE; a new connection
costs one epoll_ctl (its read event) up to its LOGIN's reply; pipelined commands
read in one pass leave in one write; a body larger than the output's high mark still arrives
whole to a slow reader, through EV_WRITE (the one case that arms it). Skipped (77) without
strace or when ptrace is not allowed.

Usage: test_imapd_io.py IMAPD_BINARY DELIVER_BINARY"""
import os
import re
import signal
import socket
import subprocess
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import IMAP_PASSWORD as PASSWORD, Imapd, ImapRaw, need_strace  # noqa: E402
from heronlib import after_test, run_suite  # noqa: E402
from heronlib import assert_eq, assert_ge, assert_in, assert_le  # noqa: E402

D = None  # the imapd the running tests talk to
CALLS = "epoll_ctl,read,readv,recvfrom,write,writev,sendto,sendmsg"
# "TID call(FD<TCP:[a:p->b:q]>, ..." as strace -f -yy prints it, epoll_ctl's socket third (a
# resumed call is not counted twice: only the line that names the call and its socket)
LINE = re.compile(r"^\s*(?:\[pid\s+)?\d+\]?\s+(?P<call>\w+)\((?:\d+<[^>]*>, \w+, )?"
                  r"(?P<fd>\d+)<(?P<what>[^]]*\])>")
BIG = (b"From: a@heron.test\r\nSubject: big\r\n\r\n" +
       b"".join(b"line %07d of a body larger than the output's high mark\r\n" % i
                for i in range(40000)))


class Strace:
    """strace -f -yy of every thread of the worker, from start() to stop(); calls(port) are the
    traced calls on the worker's socket to the client's port."""

    n = 0  # traces made (one file each)

    def __init__(self, d):
        pids = d.worker_pids()
        assert_eq(len(pids), 1, "one worker")
        Strace.n += 1
        self.path = os.path.join(d.dir, "io%d.trace" % Strace.n)
        # -f with -p: every thread of the worker ("Process N attached with M threads")
        args = ["strace", "-f", "-yy", "-s", "64", "-e", "trace=" + CALLS, "-o", self.path,
                "-p", str(pids[0])]
        self.p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True)
        after_test(self.stop)
        line = self.p.stderr.readline()  # strace says so once it is attached
        assert "attached" in line, "strace: " + line
        self.lines = None

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
            self.p.wait(timeout=60)
        if self.lines is None:
            with open(self.path, errors="replace") as f:
                self.lines = f.read().splitlines()

    def calls(self, port):
        """[(call, line)] on the socket whose peer is 127.0.0.1:port."""
        self.stop()
        peer = "->127.0.0.1:%d]" % port
        out = []
        for ln in self.lines:
            m = LINE.match(ln)
            if m and peer in m.group("what"):
                out.append((m.group("call"), ln))
        return out


def kinds(calls):
    reads = [ln for c, ln in calls if c in ("read", "readv", "recvfrom") and " = -1" not in ln]
    writes = [ln for c, ln in calls if c in ("write", "writev", "sendto", "sendmsg")]
    ctl = [ln for c, ln in calls if c == "epoll_ctl"]
    return reads, writes, ctl


def session():
    r = ImapRaw(D.port)
    after_test(r.close)
    r.cmd("L", 'LOGIN bob "%s"' % PASSWORD)
    r.cmd("S", "SELECT INBOX")
    return r


def port_of(r):
    return r.s.getsockname()[1]


def test_fill_mailbox():
    D.raw("bob")  # the first login makes the user
    for i in range(5):
        D.deliver("bob", b"From: a@heron.test\r\nSubject: m%d\r\n\r\nbody %d\r\n" % (i, i))
    D.deliver("bob", BIG)


def test_reply_one_write_no_rearm():
    r = session()
    t = Strace(D)
    for i in range(30):
        assert_eq(r.cmd("n%d" % i, "NOOP"), ["n%d OK Completed" % i])
    reads, writes, ctl = kinds(t.calls(port_of(r)))
    assert_eq(len([x for x in reads if "NOOP" in x]), 30, "the commands were traced:\n" +
              "\n".join(reads[:8]))
    assert_eq(len(writes), 30, "one write per reply:\n" + "\n".join(writes[:8]))
    assert_eq(len(ctl), 0, "no EV_WRITE armed for a reply the kernel took:\n" +
              "\n".join(ctl[:4]))


def test_connect_one_epoll_ctl():
    t = Strace(D)
    r = ImapRaw(D.port)  # reads the greeting
    after_test(r.close)
    r.cmd("L", 'LOGIN bob "%s"' % PASSWORD)
    reads, writes, ctl = kinds(t.calls(port_of(r)))
    assert_eq(len(writes), 2, "the greeting, the LOGIN reply:\n" + "\n".join(writes))
    assert_eq(len(ctl), 1, "the socket's read event added, nothing more:\n" + "\n".join(ctl))
    assert_in("EPOLL_CTL_ADD", ctl[0])


def test_pipelined_one_pass_one_write():
    r = session()
    t = Strace(D)
    batch = "".join("p%d NOOP\r\n" % i for i in range(20)) + "f FETCH 1:5 (FLAGS UID)\r\n"
    r.send(batch)
    out = r.until_tag("f")
    assert_eq(out[-1], "f OK Fetch completed")
    assert_eq(len([x for x in out if " FETCH (FLAGS (" in x]), 5)
    assert_eq(len([x for x in out if x.endswith(" OK Completed")]), 20)
    reads, writes, ctl = kinds(t.calls(port_of(r)))
    assert_ge(len(reads), 1, "the batch was traced")
    # every pass of the loop that read input answers it in one write
    assert_le(len(writes), len(reads), "\n".join(writes))
    assert_eq(len(ctl), 0, "\n".join(ctl[:4]))


def test_compress_no_rearm():
    r = session()
    co, do = zlib.compressobj(6, zlib.DEFLATED, -15), zlib.decompressobj(-15)
    assert_eq(r.cmd("c", "COMPRESS DEFLATE"), ["c OK DEFLATE active"])
    plain = do.decompress(r.buf)
    r.buf = b""

    def cmd(tag):
        nonlocal plain
        r.s.sendall(co.compress(b"%s NOOP\r\n" % tag.encode()) + co.flush(zlib.Z_SYNC_FLUSH))
        want = b"%s OK Completed\r\n" % tag.encode()
        while not plain.endswith(want):
            chunk = r.s.recv(65536)
            assert chunk, "closed"
            plain += do.decompress(chunk)
        plain = b""

    cmd("w")  # the first reply settles EV_WRITE that the filter turned on
    t = Strace(D)
    for i in range(20):
        cmd("z%d" % i)
    reads, writes, ctl = kinds(t.calls(port_of(r)))
    assert_eq(len(reads), 20, "the commands were traced:\n" + "\n".join(reads[:8]))
    assert_eq(len(writes), 20, "one write per reply:\n" + "\n".join(writes[:8]))
    assert_eq(len(ctl), 0, "\n".join(ctl[:4]))


def test_big_body_to_a_slow_reader():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # the server's writes fill up
    s.settimeout(30)
    s.connect(("127.0.0.1", D.port))
    after_test(s.close)
    t = Strace(D)
    s.sendall(b'L LOGIN bob "%s"\r\nS SELECT INBOX\r\nB FETCH 6 BODY.PEEK[]\r\n' %
              PASSWORD.encode())
    data = b""
    end = b"\r\nB OK Fetch completed\r\n"
    while not data.endswith(end):
        chunk = s.recv(4096)
        assert chunk, "closed after %d bytes" % len(data)
        data += chunk
    head = b"* 6 FETCH (BODY[] {%d}\r\n" % len(BIG)
    i = data.index(head) + len(head)
    assert_eq(data[i:i + len(BIG)] == BIG, True, "the body arrived whole and in order")
    _, writes, ctl = kinds(t.calls(s.getsockname()[1]))
    assert_ge(len([x for x in ctl if "EPOLLOUT" in x]), 1, "the rest went through EV_WRITE")
    assert_ge(len(writes), 2)


def main():
    global D
    need_strace()
    D = Imapd(sys.argv[1], deliver=sys.argv[2])
    return run_suite(D, [test_fill_mailbox, test_reply_one_write_no_rearm,
                         test_connect_one_epoll_ctl, test_pipelined_one_pass_one_write,
                         test_compress_no_rearm, test_big_body_to_a_slow_reader], D.dir)


if __name__ == "__main__":
    sys.exit(main())
