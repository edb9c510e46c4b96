#!/usr/bin/env python3
"""A failing relay target under mtad: the sink (sink/, with its fault injection)
is the transport for remote.test. While it answers 4xx at the end of data, drops connections
in the middle of DATA, or answers every reply slowly, mail that mtad acknowledged stays in the
queue and arrives once the fault ends: every message exactly once (4xx, drops) or at least
once (slow). A permanent 5xx ends in a bounce (DSN) in the local sender's INBOX and an empty
queue. A hostile target's reply with a bare LF cannot inject lines into that bounce.

  test_relay_faults.py SOURCE_ROOT MTAD SINK STORE_PEEK"""
import os
import smtplib
import socket
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from heronlib import (DOMAIN, Mtad, Sink, SinkControl, Store, run_main,  # noqa: E402
                      run_tests, wait_for, write_users)

ROOT, MTAD, SINK, PEEK = sys.argv[1:5]


class HostileTarget:
    """A relay target whose RCPT reply carries a bare LF and a would-be header field."""

    def __init__(self):
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(8)
        self.port = self.lsock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            threading.Thread(target=self.session, args=(c,), daemon=True).start()

    def session(self, c):
        f = c.makefile("rb")
        try:
            c.sendall(b"220 evil.test ESMTP\r\n")
            for line in f:
                verb = line[:4].upper()
                if verb in (b"EHLO", b"HELO"):
                    c.sendall(b"250 evil.test\r\n")
                elif verb == b"RCPT":
                    c.sendall(b"550 5.1.1 no such user\nX-Injected: evil\r\n")
                elif verb == b"QUIT":
                    c.sendall(b"221 bye\r\n")
                    break
                else:
                    c.sendall(b"250 ok\r\n")
        except OSError:
            pass
        c.close()

    def close(self):
        self.lsock.close()


def main():
    tmp = tempfile.mkdtemp(prefix="heron-relayfault-")
    hostile = HostileTarget()
    sink = Sink(SINK, tmp, {"starttls": "no"})
    sink_port, ctl_port = sink.port, sink.control_port
    write_users(os.path.join(tmp, "users"), ["user1"])
    mtad = Mtad(MTAD, tmp, {"backend": "file", "users_file": os.path.join(tmp, "users")},
                {"transport_map": f"remote.test=127.0.0.1:{sink_port},"
                                  f"evil.test=127.0.0.1:{hostile.port}",
                 "trusted_networks": "127.0.0.1/32", "relay_timeout": "3s",
                 "retry_schedule": "1s"}, tls=False)
    store = Store(PEEK, mtad.conf)
    serial = [0]

    def send(n, tag):
        """n messages from user1 to far@remote.test, each acknowledged; their ids."""
        ids = []
        with smtplib.SMTP("127.0.0.1", mtad.port, timeout=30) as c:
            for _ in range(n):
                serial[0] += 1
                mid = f"<{tag}.{serial[0]}@{DOMAIN}>"
                c.sendmail(f"user1@{DOMAIN}", ["far@remote.test"],
                           f"From: <user1@{DOMAIN}>\r\nMessage-ID: {mid}\r\n"
                           f"X-Mailload-Sent: {int(time.time() * 1000)}\r\n"
                           f"Subject: {tag}\r\n\r\nrelay me\r\n")
                ids.append(mid)
        return ids

    def control():
        return SinkControl(ctl_port, check=True)  # every request must succeed

    def fault_then_heal(ctl, fault, heal, tag, exactly_once=True):
        ctl.req(cmd="faults", **fault)
        ids = send(5, tag)
        time.sleep(2.5)  # retries happen (retry_schedule 1s) and fail
        got = ctl.ids()
        assert not [i for i in ids if i in got], f"{tag}: delivered during the fault"
        assert len(store.queue()) >= 1, f"{tag}: nothing queued during the fault"
        ctl.req(cmd="faults", **heal)
        wait_for(lambda: not store.queue(), 90, f"{tag}: the queue to drain after the fault")
        got = ctl.ids()
        for i in ids:
            n = got.count(i)
            assert n >= 1, f"{tag}: {i} lost"
            assert n == 1 or not exactly_once, f"{tag}: {i} delivered {n} times"

    def test_4xx_at_end_of_data():
        fault_then_heal(control(), {"data_4xx": 1.0}, {"data_4xx": 0.0}, "tempfail")

    def test_drop_in_data():
        fault_then_heal(control(), {"drop_in_data": 1.0}, {"drop_in_data": 0.0},
                        "dropped")

    def test_slow_target():
        # every reply 5 s late, past relay_timeout: mtad gives up and retries; once the target
        # is quick again everything arrives (a timeout after the final dot may duplicate)
        fault_then_heal(control(), {"delay_ms": 5000}, {"delay_ms": 0}, "slow",
                        exactly_once=False)

    def test_permanent_failure_bounces():
        ctl = control()
        ctl.req(cmd="faults", rcpt_5xx=1.0)
        before = len(store.inbox("user1"))
        ids = send(1, "bounced")
        wait_for(lambda: not store.queue(), 60, "the queue to drain after a 5xx")
        ctl.req(cmd="faults", rcpt_5xx=0.0)
        assert ids[0] not in ctl.ids()
        wait_for(lambda: len(store.inbox("user1")) > before, 30, "the bounce")
        uid = store.inbox("user1")[-1][0]
        dsn = store.body("user1", uid)
        assert b"far@remote.test" in dsn and b"delivery-status" in dsn.lower(), dsn[:2000]

    def test_hostile_reply_cannot_inject_into_the_bounce():
        before = len(store.inbox("user1"))
        with smtplib.SMTP("127.0.0.1", mtad.port, timeout=30) as c:
            c.sendmail(f"user1@{DOMAIN}", ["victim@evil.test"],
                       f"From: <user1@{DOMAIN}>\r\nSubject: to evil\r\n\r\nhi\r\n")
        wait_for(lambda: len(store.inbox("user1")) > before, 60, "the bounce")
        dsn = store.body("user1", store.inbox("user1")[-1][0])
        assert b"victim@evil.test" in dsn, dsn[:2000]
        bare = [i for i in range(len(dsn)) if dsn[i:i + 1] in (b"\n", b"\r") and
                dsn[i - 1:i + 1] != b"\r\n" and dsn[i:i + 2] != b"\r\n"]
        assert not bare, f"bare CR/LF in the DSN at {bare[:5]}: {dsn[:1500]!r}"
        assert b"\r\nX-Injected:" not in dsn, dsn[:1500]

    def body():
        sink.start()
        mtad.start()
        return run_tests([test_4xx_at_end_of_data, test_drop_in_data, test_slow_target,
                          test_permanent_failure_bounces,
                          test_hostile_reply_cannot_inject_into_the_bounce], mtad)
    return run_main(body, tmp, [mtad], cleanup=[hostile.close, lambda: sink.stop(timeout=10)])


if __name__ == "__main__":
    sys.exit(main())
