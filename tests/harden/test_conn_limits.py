#!/usr/bin/env python3
"""Connection caps with two workers: mtad, imapd and the sink count connections over
all their workers. Over max_connections a client is answered at once (421 for SMTP, BYE for
IMAP) and closed, and served again once a connection ends; max_connections_per_ip holds across
workers (the connections it counts are spread over both, as the connect lines in the log
show); imapd's failed-login penalty grows whichever worker a client reaches, and its
max_connections_per_user counts a user's sessions on both workers. Each client
address is its own loopback address (127.0.0.x), so the per-address counts of one step (and
the start-up probe from 127.0.0.1) do not touch another's.

  test_conn_limits.py SOURCE_ROOT MTAD IMAPD SINK"""
import os
import re
import socket
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import (Daemon, Sink, run_main, shared_conf, wait_for,  # noqa: E402
                      wait_workers_ready)

ROOT, MTAD, IMAPD, SINK = sys.argv[1:5]
TMP = tempfile.mkdtemp(prefix="heron-harden-limits-")
MAX, PER_IP, PER_USER = 4, 3, 2
HOST = "mx.heron.test"


def connect(port, source):
    return socket.create_connection(("127.0.0.1", port), timeout=20,
                                    source_address=(source, 0))


def line(s):
    """The first line the server sends (b"" when it closes first)."""
    data = b""
    while not data.endswith(b"\r\n"):
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def greeted(port, source, ok):
    s = connect(port, source)
    first = line(s)
    assert first.startswith(ok), first
    return s


def refused(port, source):
    """A client over a limit: its one line, and the server closes right after it."""
    with connect(port, source) as s:
        first = line(s)
        assert s.recv(4096) == b"", "not closed after the refusal"
    return first


def served_again(port, source, ok):
    """A slot frees once the server has seen a close (asynchronously): retry a few times."""
    for _ in range(100):
        s = connect(port, source)
        first = line(s)
        if first.startswith(ok):
            return s
        s.close()
        time.sleep(0.1)
    raise AssertionError(f"not served again: {first!r}")


def workers_of(d, connect_re):
    """The worker pids that logged a connect matching connect_re, with their counts."""
    pids = {}
    for pid in re.findall(r"\[(\d+)\] info: \S+ " + connect_re, d.logtext()):
        pids[pid] = pids.get(pid, 0) + 1
    return pids


def check_limits(d, ok, per_ip_line, total_line, connect_re):
    """max_connections_per_ip, then max_connections, of daemon d (MAX, PER_IP)."""
    held = [greeted(d.port, "127.0.0.5", ok) for _ in range(PER_IP)]
    try:
        spread = workers_of(d, connect_re % re.escape("127.0.0.5"))
        assert len(spread) == 2, f"connections not on both workers: {spread}"
        # per address, over both workers: the next one from 127.0.0.5 is refused
        assert refused(d.port, "127.0.0.5") == per_ip_line
        # another address takes the last slot; over the total, anyone is refused
        held.append(greeted(d.port, "127.0.0.2", ok))
        assert refused(d.port, "127.0.0.2") == total_line
        assert refused(d.port, "127.0.0.4") == total_line
        held.pop(0).close()
        held.append(served_again(d.port, "127.0.0.4", ok))
    finally:
        for s in held:
            s.close()


def test_mtad(mtad):
    wait_workers_ready(mtad, "mtad", 2)  # the connections spread over both
    check_limits(mtad, b"220 ",
                 b"421 4.7.0 %s Too many connections from your address\r\n" % HOST.encode(),
                 b"421 4.7.0 %s Too many connections, try again later\r\n" % HOST.encode(),
                 r"smtp connect addr=%s:")


def test_imapd(imapd):
    wait_workers_ready(imapd, "imapd", 2)
    check_limits(imapd, b"* OK", b"* BYE Too many connections from your address\r\n",
                 b"* BYE Too many connections\r\n", r"imap connect from=%s ")


def connect_pids(imapd):
    """The worker pid of each connection accepted from 127.0.0.3, in the order logged."""
    return re.findall(r"\[(\d+)\] info: \S+ imap connect from=127\.0\.0\.3 ",
                      imapd.logtext())


def test_imap_login_penalty_across_workers(imapd):
    # three clients from one address, on both workers; each fails a LOGIN in turn: the count
    # (and so the delay) grows over the workers: failures 1, 2, 3, never 1 twice
    # (the workers share the listening socket and take turns only as they wake, so on a busy
    # machine one may take several in a row; max_connections_per_ip is 3: while all three
    # are on one worker, the last is closed and another opened, twelve at most)
    conns = []  # (socket, worker pid)
    try:
        for made in range(1, 13):
            s = served_again(imapd.port, "127.0.0.3", b"* OK")
            pids = wait_for(lambda: connect_pids(imapd)[made - 1:] or None, 20,
                            "a connect line for the connection from 127.0.0.3")
            conns.append((s, pids[0]))
            if len(conns) == 3:
                if len({pid for _, pid in conns}) == 2:
                    break
                conns.pop()[0].close()
        spread = {pid for _, pid in conns}
        assert len(conns) == 3 and len(spread) == 2, f"connections not on both workers: {conns}"
        for i, (s, _) in enumerate(conns):
            s.sendall(b'f%d LOGIN alice "wrong"\r\n' % i)
            reply = line(s)
            assert reply.startswith(b"f%d NO [AUTHENTICATIONFAILED]" % i), reply
    finally:
        for s, _ in conns:
            s.close()
    fails = re.findall(r"imapd\[(\d+)\] info: \S+ imap login addr=127\.0\.0\.3 user=alice "
                       r".*? failures=(\d+) delay_ms=(\d+) ", imapd.logtext())
    assert sorted(int(n) for _, n, _ in fails) == list(range(1, len(conns) + 1)), fails
    assert len({pid for pid, _, _ in fails}) == 2, fails
    delays = dict((int(n), int(ms)) for _, n, ms in fails)
    assert {n: delays[n] for n in (1, 2, 3)} == {1: 500, 2: 1000, 3: 2000}, fails


def imap_reply(s, tag):
    """Reads up to the tagged reply of tag (untagged lines before it are skipped); returns
    that reply line."""
    data = b""
    while True:
        chunk = line(s)
        assert chunk, f"closed before {tag!r}: {data!r}"
        data += chunk
        for reply in data.split(b"\r\n"):
            if reply.startswith(tag + b" "):
                return reply + b"\r\n"


def test_imap_sessions_per_user_across_workers(imapd):
    # three clients (one address each, so the per-address cap stays out of it); the first
    # two logins of alice land on different workers: the third, on either, is over the
    # per-user cap of the whole daemon; once one logs out, it is served. The workers take
    # turns at a shared listener only as they happen to wake, so on a busy machine one may
    # take several in a row: while three are on one worker, the last is closed and another
    # client tried (twelve at most; max_connections is 4).
    conns, pid = {}, {}
    try:
        for k in range(12):
            if len(pid) == 3:
                last = list(pid)[-1]
                conns.pop(last).close()
                del pid[last]
            src = "127.0.0.%d" % (6 + k)
            conns[src] = served_again(imapd.port, src, b"* OK")
            got = {}
            for _ in range(50):  # the connect line is logged as the worker takes it
                got = workers_of(imapd, r"imap connect from=%s " % re.escape(src))
                if got:
                    break
                time.sleep(0.1)
            assert len(got) == 1, got
            pid[src] = next(iter(got))
            if len(pid) >= 3 and len(set(pid.values())) == 2:
                break
        assert len(set(pid.values())) == 2, f"connections not on both workers: {pid}"
        sources = list(pid)
        first = sources[0]
        second = next(src for src in sources[1:] if pid[src] != pid[first])
        third = next(src for src in sources if src not in (first, second))
        for i, src in enumerate((first, second)):
            conns[src].sendall(b"u%d LOGIN alice alice\r\n" % i)
            reply = imap_reply(conns[src], b"u%d" % i)
            assert reply.startswith(b"u%d OK " % i), reply
        conns[third].sendall(b"u2 LOGIN alice alice\r\n")
        assert imap_reply(conns[third], b"u2") == \
            b"u2 NO [LIMIT] Too many sessions for this user\r\n"
        conns[first].sendall(b"u3 LOGOUT\r\n")
        assert imap_reply(conns[first], b"u3").startswith(b"u3 OK "), "logout"
        # a session is counted off when it closes, before its LOGOUT reply leaves
        conns[third].sendall(b"u4 LOGIN alice alice\r\n")
        reply = imap_reply(conns[third], b"u4")
        assert reply.startswith(b"u4 OK "), reply
    finally:
        for s in conns.values():
            s.close()


def test_sink(sink):
    held = [greeted(sink.port, "127.0.0.1", b"220 ") for _ in range(MAX)]
    try:
        want = b"421 4.7.0 sink.heron.test Too many connections, try again later\r\n"
        assert refused(sink.port, "127.0.0.1") == want
        assert refused(sink.port, "127.0.0.2") == want
        held.pop().close()
        held.append(served_again(sink.port, "127.0.0.1", b"220 "))
    finally:
        for s in held:
            s.close()


def main():
    limits = {"max_connections": MAX, "max_connections_per_ip": PER_IP}
    conf, smtp_port, imap_port = shared_conf(
        TMP, ["alice"], workers=2,
        keys={"mtad": limits, "imapd": dict(limits, max_connections_per_user=PER_USER)})
    mtad = Daemon(MTAD, conf, os.path.join(TMP, "mtad.log"), smtp_port)
    imapd = Daemon(IMAPD, conf, os.path.join(TMP, "imapd.log"), imap_port)
    sink = Sink(SINK, TMP, {"workers": 2, "max_connections": MAX,
                            "hostname": "sink.heron.test", "starttls": "no"},
                {"log": {"target": "stderr", "level": "info"}})
    tests = [(test_mtad, mtad), (test_imapd, imapd),
             (test_imap_login_penalty_across_workers, imapd),
             (test_imap_sessions_per_user_across_workers, imapd), (test_sink, sink)]
    def body():
        rc = 0
        for d in (mtad, imapd, sink):
            d.start()
        for t, d in tests:
            try:
                t(d)
                print(f"ok {t.__name__}")
            except Exception as e:  # noqa: BLE001 — reported, and the run fails
                print(f"FAIL {t.__name__}: {e!r}")
                rc = 1
        return rc
    return run_main(body, TMP, [mtad, imapd, sink])


if __name__ == "__main__":
    sys.exit(main())
