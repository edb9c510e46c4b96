#!/usr/bin/env python3
"""End-to-end test of sink: a real sink (2 workers, Maildir kept) on free loopback ports,
driven by smtplib and raw sockets, checked through its JSON control port.

Covers: delivery with several recipients and folded stamp headers (records and delivery
histogram), faults at MAIL/RCPT/end of data (the client sees the 4xx/5xx, counts stay exact),
drops mid-DATA, reply and greeting delays (functional only, no timing asserted), malformed
input answered 5xx while the sink keeps serving, STARTTLS with smtplib, BDAT over a raw
socket, JSON escaping of hostile Message-IDs, many concurrent connections over both workers,
reset, the Maildir copies, and the SIGUSR1 and exit summaries.

usage: test_sink.py PATH/TO/sink
"""
import os
import resource
import shutil
import signal
import smtplib
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Sink, SinkControl as Control, run_tests, tls_client_ctx  # noqa: E402

SINK = sys.argv[1]
STAMP = None  # unix ms put into X-Mailload-Sent


def message(mid, folded=False, sent=None, body="hello\r\n"):
    sent = STAMP if sent is None else sent
    if folded:
        head = ("Subject: folded\r\n test\r\nMessage-ID:\r\n %s\r\nFrom: a@x\r\n"
                "X-Mailload-Sent:\r\n\t%d\r\n" % (mid, sent))
    else:
        head = "X-Mailload-Sent: %d\r\nMessage-ID: %s\r\nSubject: t\r\n" % (sent, mid)
    return head + "\r\n" + body


def smtp(port):
    s = smtplib.SMTP("127.0.0.1", port, timeout=10)
    s.ehlo("client.test")
    return s


class Raw:
    """A line-level SMTP client over a plain socket."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.f = self.sock.makefile("rb")
        self.expect("220")

    def reply(self):
        lines = []
        while True:
            line = self.f.readline()
            if not line:
                raise EOFError("connection closed")
            lines.append(line.decode("utf-8", "replace").rstrip("\r\n"))
            if line[3:4] != b"-":
                return lines[-1][:3], lines

    def expect(self, code):
        got, lines = self.reply()
        assert got == code, (code, lines)
        return lines

    def send(self, data):
        self.sock.sendall(data)

    def cmd(self, line, code):
        self.send(line + b"\r\n")
        return self.expect(code)

    def close(self):
        self.f.close()
        self.sock.close()


def test_delivery(ctl, port):
    s = smtp(port)
    s.sendmail("from@x", ["r1@ext.test", "r2@ext.test", "r3@ext.test"],
               message("<run.1@mailload>", folded=True))
    s.sendmail("from@x", ["r4@ext.test"], message("<run.2@mailload>"))
    # unstamped mail is counted but not recorded or timed
    s.sendmail("from@x", ["r5@ext.test"], "Subject: no stamp\r\n\r\nbody\r\n")
    s.quit()
    st = ctl.req(cmd="stats")
    assert st["ok"] and st["messages"] == 3 and st["recipients"] == 5, st
    assert st["stamped"] == 2 and st["records_dropped"] == 0, st
    count = int(st["delivery_histo"].split()[0])
    assert count == 2, st
    recs, nxt = ctl.records(0)
    assert [r["id"] for r in recs] == ["<run.1@mailload>", "<run.2@mailload>"], recs
    assert recs[0]["rcpts"] == ["r1@ext.test", "r2@ext.test", "r3@ext.test"], recs
    assert recs[0]["sent_ms"] == STAMP and recs[0]["arrival_ms"] >= STAMP, recs
    assert nxt == recs[-1]["seq"]
    again, nxt2 = ctl.records(nxt)
    assert again == [] and nxt2 == nxt
    tail, _ = ctl.records(recs[0]["seq"])
    assert [r["id"] for r in tail] == ["<run.2@mailload>"]


def expect_smtp_error(exc_type, code, fn):
    try:
        fn()
    except exc_type as e:
        got = e.smtp_code if hasattr(e, "smtp_code") else None
        if exc_type is smtplib.SMTPRecipientsRefused:
            got = list(e.recipients.values())[0][0]
        assert got == code, (got, code, e)
        return
    raise AssertionError("no %s" % exc_type.__name__)


def test_faults(ctl, port):
    base = ctl.req(cmd="stats")
    s = smtp(port)
    cases = [
        ({"mail_4xx": 1.0}, smtplib.SMTPSenderRefused, 451),
        ({"mail_4xx": 0.0, "mail_5xx": 1.0}, smtplib.SMTPSenderRefused, 550),
        ({"mail_5xx": 0.0, "rcpt_4xx": 1.0}, smtplib.SMTPRecipientsRefused, 451),
        ({"rcpt_4xx": 0.0, "rcpt_5xx": 1.0}, smtplib.SMTPRecipientsRefused, 550),
        ({"rcpt_5xx": 0.0, "data_4xx": 1.0}, smtplib.SMTPDataError, 451),
        ({"data_4xx": 0.0, "data_5xx": 1.0}, smtplib.SMTPDataError, 554),
    ]
    for settings, exc, code in cases:
        r = ctl.req(cmd="faults", **settings)
        assert r["ok"], r
        for k, v in settings.items():
            assert r["faults"][k] == v, r
        expect_smtp_error(exc, code, lambda: s.sendmail("f@x", ["t@y"], message("<f@x>")))
        s.rset()
    ctl.req(cmd="faults", data_5xx=0.0)
    st = ctl.req(cmd="stats")
    assert st["messages"] == base["messages"], st
    assert st["rejected"] == base["rejected"] + len(cases), st
    # half the transactions refused at end of data: counts stay exact
    ctl.req(cmd="faults", data_4xx=0.5)
    accepted = 0
    for i in range(60):
        try:
            s.sendmail("f@x", ["t@y"], message("<half.%d@x>" % i))
            accepted += 1
        except smtplib.SMTPDataError as e:
            assert e.smtp_code == 451, e
    ctl.req(cmd="faults", data_4xx=0.0)
    s.quit()
    st = ctl.req(cmd="stats")
    assert 0 < accepted < 60, accepted
    assert st["messages"] == base["messages"] + accepted, (st, accepted)
    assert st["rejected"] == base["rejected"] + len(cases) + 60 - accepted, st
    # bad fault requests change nothing
    for bad in ({"mail_4xx": 2}, {"delay_ms": -1}, {"delay_ms": 1.5}, {"nope": 0.1},
                {"mail_4xx": "0.1"}):
        r = ctl.req(cmd="faults", **bad)
        assert r["ok"] is False and r["error"], r
    assert ctl.req(cmd="stats")["faults"]["mail_4xx"] == 0


def test_drop_and_delays(ctl, port):
    base = ctl.req(cmd="stats")
    ctl.req(cmd="faults", drop_in_data=1.0)
    s = smtp(port)
    try:
        s.sendmail("f@x", ["t@y"], message("<drop@x>", body="x" * 100000 + "\r\n"))
        raise AssertionError("the sink did not drop the connection")
    except (smtplib.SMTPServerDisconnected, ConnectionError):
        pass
    ctl.req(cmd="faults", drop_in_data=0.0, delay_ms=50, greeting_delay_ms=100)
    s = smtp(port)
    s.sendmail("f@x", ["t@y"], message("<delayed@x>"))
    s.quit()
    r = ctl.req(cmd="faults", delay_ms=0, greeting_delay_ms=0)
    assert r["faults"]["delay_ms"] == 0 and r["faults"]["greeting_delay_ms"] == 0
    st = ctl.req(cmd="stats")
    assert st["dropped"] == base["dropped"] + 1, st
    assert st["messages"] == base["messages"] + 1, st


def test_malformed(ctl, port):
    c = Raw(port)
    c.cmd(b"MAIL FROM:<a@b>", "503")                  # before EHLO
    c.cmd(b"BOGUS command", "500")
    c.cmd(b"", "500")
    c.cmd(b"EHLO", "501")
    c.cmd(b"EHLO client.test", "250")
    c.cmd(b"RCPT TO:<x@y>", "503")
    c.cmd(b"DATA", "503")
    c.cmd(b"MAIL FROM:a@b", "501")
    c.cmd(b"MAIL FROM:<a@b> FROBNICATE=1", "555")
    c.cmd(b"MAIL FROM:<a@b> SIZE=999999999999", "552")
    c.cmd(b"MAIL FROM:<a@b>", "250")
    c.cmd(b"MAIL FROM:<a@b>", "503")
    c.cmd(b"RCPT TO:<>", "501")
    c.cmd(b"RCPT TO:<unterminated", "501")
    c.cmd(b"DATA", "554")                              # no valid recipients
    c.cmd(b"RCPT TO:<a\x00b@y>", "500")
    c.cmd(b"X" * 10000, "500")                          # line too long
    c.cmd(b"NOOP", "250")
    c.cmd(b"RCPT TO:<ok@y>", "250")
    c.cmd(b"DATA", "354")
    c.send(b"Message-ID: <after.errors@x>\r\nX-Mailload-Sent: %d\r\n\r\nbare\nlf\n.\nstill"
           b" data\r\n.\r\n" % STAMP)
    c.expect("250")
    c.cmd(b"QUIT", "221")
    c.close()
    # binary junk then a new, healthy session
    junk = socket.create_connection(("127.0.0.1", port), timeout=10)
    junk.sendall(bytes(range(256)) * 64)
    junk.close()
    recs, _ = ctl.records(0)
    assert "<after.errors@x>" in [r["id"] for r in recs]
    s = smtp(port)
    assert s.noop()[0] == 250
    s.quit()


def test_starttls(ctl, port):
    base = ctl.req(cmd="stats")
    s = smtp(port)
    assert s.has_extn("starttls")
    ctx = tls_client_ctx()
    s.starttls(context=ctx)
    s.ehlo("client.test")
    assert not s.has_extn("starttls")
    s.sendmail("f@x", ["tls@y"], message("<tls.1@mailload>"))
    s.quit()
    st = ctl.req(cmd="stats")
    assert st["tls"] == base["tls"] + 1 and st["messages"] == base["messages"] + 1, st
    # commands pipelined behind STARTTLS are thrown away, not run inside TLS
    c = Raw(port)
    c.cmd(b"EHLO x", "250")
    c.send(b"STARTTLS\r\nMAIL FROM:<injected@x>\r\n")
    c.expect("220")
    tls = ctx.wrap_socket(c.sock, server_hostname="sink")
    tls.sendall(b"EHLO x\r\n")
    f = tls.makefile("rb")
    while not f.readline().startswith(b"250 "):
        pass
    tls.sendall(b"RCPT TO:<x@y>\r\n")
    assert f.readline().startswith(b"503"), "MAIL from before STARTTLS was kept"
    tls.close()


def test_bdat(ctl, port):
    base = ctl.req(cmd="stats")
    body = message("<bdat.1@mailload>", body="line\r\n.\r\nnot the end\r\n").encode()
    c = Raw(port)
    lines = c.cmd(b"EHLO x", "250")
    assert any("CHUNKING" in l for l in lines) and any("PIPELINING" in l for l in lines)
    c.cmd(b"MAIL FROM:<f@x> BODY=8BITMIME", "250")
    c.cmd(b"RCPT TO:<b1@y>", "250")
    c.cmd(b"RCPT TO:<b2@y>", "250")
    half = len(body) // 2
    c.send(b"BDAT %d\r\n" % half + body[:half])
    c.expect("250")
    c.send(b"BDAT %d LAST\r\n" % (len(body) - half) + body[half:])
    c.expect("250")
    # everything pipelined in one write, and an empty last chunk
    c.send(b"MAIL FROM:<f@x>\r\nRCPT TO:<b3@y>\r\nBDAT %d\r\n" % len(body) +
           body.replace(b"bdat.1", b"bdat.2") + b"BDAT 0 LAST\r\n")
    for code in ("250", "250", "250", "250"):
        c.expect(code)
    # BDAT out of sequence: the chunk is read and refused, the session goes on
    c.send(b"BDAT 5\r\nhello")
    c.expect("503")
    c.cmd(b"MAIL FROM:<f@x>", "250")
    c.send(b"BDAT 3 LAST\r\nabc")
    c.expect("554")
    c.cmd(b"RSET", "250")
    c.cmd(b"QUIT", "221")
    c.close()
    st = ctl.req(cmd="stats")
    assert st["messages"] == base["messages"] + 2, st
    assert st["bytes"] == base["bytes"] + 2 * len(body), st
    recs, _ = ctl.records(0)
    byid = {r["id"]: r for r in recs}
    assert byid["<bdat.1@mailload>"]["rcpts"] == ["b1@y", "b2@y"]
    assert byid["<bdat.2@mailload>"]["rcpts"] == ["b3@y"]
    # a BDAT without a size cannot be delimited: 501 and the connection closes
    c = Raw(port)
    c.cmd(b"EHLO x", "250")
    c.cmd(b"BDAT lots", "501")
    assert c.f.readline() == b""
    c.close()


def test_hostile_ids(ctl, port):
    ids = ['<q"uote\\back@x>', "<tab\there@x>", "<caf\u00e9@x>"]
    s = smtp(port)
    for mid in ids:
        s.sendmail("f@x", ["t@y"], message(mid).encode("utf-8"))
    # invalid UTF-8 still gives valid JSON
    s.sendmail("f@x", ["t@y"], message("<bad\xffbyte@x>").encode("latin-1"))
    s.quit()
    recs, _ = ctl.records(0)
    got = [r["id"] for r in recs]
    assert '<q"uote\\back@x>' in got, got
    assert "<caf\u00e9@x>" in got, got
    assert "<bad\ufffdbyte@x>" in got, got


def test_many_connections(ctl, port):
    # a thousand open at once when this process may hold that many descriptors
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 1100
    if soft < want and (hard == resource.RLIM_INFINITY or hard >= want):
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        soft = want
    n = min(1000, soft - 100)
    base = ctl.req(cmd="stats")
    conns = []
    try:
        for _ in range(n):
            conns.append(Raw(port))
        for c in conns:
            c.send(b"EHLO x\r\nMAIL FROM:<f@x>\r\nRCPT TO:<m@y>\r\nDATA\r\n")
        for c in conns:
            for code in ("250", "250", "250", "354"):
                c.expect(code)
            c.send(b"Message-ID: <many@x>\r\nX-Mailload-Sent: %d\r\n\r\nx\r\n.\r\nQUIT\r\n"
                   % STAMP)
        for c in conns:
            c.expect("250")
            c.expect("221")
    finally:
        for c in conns:
            c.close()
    st = ctl.req(cmd="stats")
    assert st["messages"] == base["messages"] + n, st
    assert st["connections"] == base["connections"] + n, st
    assert st["stamped"] == base["stamped"] + n, st


def test_control_errors(ctl):
    for line in (b"nonsense", b'{"cmd":"bogus"}', b'{"nocmd":1}', b'{"cmd":1}',
                 b'{"cmd":"records","since":-1}', b'{"cmd":"records","since":"x"}',
                 b'{"cmd":"stats","extra":1}', b"{" + b"x" * 5000 + b"}"):
        r = ctl.raw(line)
        assert r["ok"] is False and r["error"], (line, r)
    assert ctl.req(cmd="stats")["ok"]


def main():
    global STAMP
    tmp = tempfile.mkdtemp(prefix="heron-sink-test-")
    keep = os.path.join(tmp, "maildir")
    # the ports as --listen and --control, the rest in the config
    sink = Sink(SINK, tmp, {"max_message_size": "1M"}, {"log": {"level": "info"}},
                args=["--workers", "2", "--keep", keep], cli_ports=True)
    port, cport = sink.port, sink.control_port
    ok = False
    try:
        sink.start(timeout=10)
        STAMP = int(time.time() * 1000) - 1500
        ctl = Control(cport)
        assert ctl.req(cmd="reset") == {"ok": True}
        checks = []
        for name, fn in [("delivery", lambda: test_delivery(ctl, port)),
                         ("faults", lambda: test_faults(ctl, port)),
                         ("drop_and_delays", lambda: test_drop_and_delays(ctl, port)),
                         ("malformed", lambda: test_malformed(ctl, port)),
                         ("starttls", lambda: test_starttls(ctl, port)),
                         ("bdat", lambda: test_bdat(ctl, port)),
                         ("hostile_ids", lambda: test_hostile_ids(ctl, port)),
                         ("many_connections", lambda: test_many_connections(ctl, port)),
                         ("control_errors", lambda: test_control_errors(ctl))]:
            fn.__name__ = name
            checks.append(fn)
        assert run_tests(checks) == 0, "a check failed (above)"
        st = ctl.req(cmd="stats")
        kept = os.listdir(os.path.join(keep, "new"))
        assert len(kept) == st["messages"], (len(kept), st["messages"])
        assert os.listdir(os.path.join(keep, "tmp")) == []
        with open(os.path.join(keep, "new", sorted(kept)[0]), "rb") as f:
            assert f.read().startswith(b"Return-Path: <")
        os.kill(sink.proc.pid, signal.SIGUSR1)
        assert ctl.req(cmd="reset")["ok"]
        st = ctl.req(cmd="stats")
        assert st["messages"] == 0 and st["delivery_histo"].startswith("0 "), st
        assert ctl.records(0)[0] == []
        ctl.close()
        ok = True
    finally:
        sink.stop()
        text = sink.logtext()
        if not ok:
            sys.stderr.write(text[-5000:])
        shutil.rmtree(tmp, ignore_errors=True)
    assert sink.returncode == 0, sink.returncode
    assert "sink summary why=SIGUSR1" in text, text[-2000:]
    assert "sink summary why=exit" in text, text[-2000:]
    # started as root with [sink] user empty: the master warns, once
    warn = "sink: workers keep root: set [sink] user"
    assert text.count(warn) == (1 if os.geteuid() == 0 else 0), text[:2000]
    return 0


if __name__ == "__main__":
    sys.exit(main())
