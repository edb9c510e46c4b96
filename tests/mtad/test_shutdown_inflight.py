#!/usr/bin/env python3
"""test_shutdown_inflight.py — SIGTERM while a relay is in flight (the remote server holds
the answer to the final dot): mtad exits 0 and, in the ASan build, LeakSanitizer reports
nothing (the queue runner frees its in-flight jobs, works and connections at shutdown; the
lease stays and another run retries the message). Without ASan the leak check is skipped
(the exit is still checked).

  test_shutdown_inflight.py SOURCE_ROOT MTAD STORE_PEEK"""
import os
import smtplib
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Mtad, RelayTarget, run_suite, wait_for,  # noqa: E402
                      write_users)

ROOT, MTAD, PEEK = sys.argv[1:4]
TMP = tempfile.mkdtemp(prefix="heron-mtad-shutdown-")
write_users(os.path.join(TMP, "users"), ["user1"])
relay = RelayTarget()
relay.data_delay = 30.0  # the answer to the dot never comes before the SIGTERM
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"workers": "1", "transport_map": f"remote.test=127.0.0.1:{relay.port}",
             "trusted_networks": "127.0.0.0/8"}, tls=False)
with open(MTAD, "rb") as f:
    ASAN = b"__asan_init" in f.read()


def test_sigterm_with_relay_in_flight():
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=30) as c:
        c.sendmail(f"user1@{DOMAIN}", ["someone@remote.test"],
                   "Subject: inflight\r\n\r\nbody\r\n")
    wait_for(lambda: relay.active >= 1, 30, "the relay connected")
    mtad.stop(timeout=20)
    assert mtad.returncode == 0, mtad.returncode
    log = mtad.logtext()
    if not ASAN:
        print("SKIP leak check: mtad is not an ASan build (meson -Db_sanitize=address)")
        return
    assert "LeakSanitizer" not in log and "AddressSanitizer" not in log, log[-4000:]


def main():
    return run_suite(mtad, [test_sigterm_with_relay_in_flight], TMP, cleanup=[relay.close])


if __name__ == "__main__":
    sys.exit(main())
