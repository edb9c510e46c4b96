#!/usr/bin/env python3
"""test_milter_clamav.py — mtad with Debian's clamav-milter in front of Debian's clamd, both
started by the test on loopback with private configs and a private signature database written
here (no freshclam, no download): an MD5 signature (.hdb) of the EICAR test file and a body
signature (.ndb) of a test string. With smtpd_milters = clamav-milter:

  - OnInfected Reject: a message with EICAR as a base64 attachment and one with the test
    string in its text are refused at the end of data with the milter's 5xx naming the
    signature, nothing is stored; a clean message is accepted with clamav-milter's
    X-Virus-Scanned / X-Virus-Status: Clean headers.
  - OnInfected Quarantine: the infected message is accepted (250) but held in the queue
    (mtad's quarantine), never delivered to the mailbox.

Skipped (77) where clamd or clamav-milter is not installed (scripts/bootstrap installs them).

  test_milter_clamav.py SOURCE_ROOT MTAD STORE_PEEK"""
import base64
import os
import shutil
import smtplib
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (Mtad, Store, assert_eq, assert_in, end_process,  # noqa: E402
                      free_port, run_main, run_tests, wait_for, wait_port, write_users)

ROOT, MTAD, PEEK = sys.argv[1:4]
CLAMD, MILTER = shutil.which("clamd"), shutil.which("clamav-milter")
if CLAMD is None or MILTER is None:
    print("clamd or clamav-milter not installed (scripts/bootstrap installs them): skipped")
    sys.exit(77)

# the EICAR test file, 68 bytes (written split so that this source is no test file itself)
EICAR = (b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$" + b"EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*")
TEST_STRING = b"HERON-VIRUS-" + b"TEST-STRING-6f1c"
TMP = tempfile.mkdtemp(prefix="heron-mtad-clamav-")
DB = os.path.join(TMP, "clamdb")


class Proc:
    """A program of the test in the foreground on a loopback port: started, waited for,
    stopped by its pid."""

    def __init__(self, argv, port, log):
        self.argv, self.port, self.log, self.proc = argv, port, log, None

    def start(self):
        with open(self.log, "ab") as f:
            self.proc = subprocess.Popen(self.argv, stdout=f, stderr=f,
                                         stdin=subprocess.DEVNULL)
        # clamd compiles its engine first: seconds on a loaded machine
        wait_port(self.port, 180, self.proc, os.path.basename(self.argv[0]))

    def stop(self):
        end_process(self.proc)

    def logtext(self):
        with open(self.log, errors="replace") as f:
            return f.read()


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def signatures():
    """The private database: EICAR by its MD5 and size, the test string anywhere."""
    import hashlib
    os.mkdir(DB)
    write(os.path.join(DB, "heron-test.hdb"),
          f"{hashlib.md5(EICAR).hexdigest()}:{len(EICAR)}:Heron.Test.EICAR\n")
    write(os.path.join(DB, "heron-test.ndb"), f"Heron.Test.String:0:*:{TEST_STRING.hex()}\n")


def clamd(port):
    conf = write(os.path.join(TMP, "clamd.conf"),
                 f"Foreground yes\nTCPSocket {port}\nTCPAddr 127.0.0.1\n"
                 f"DatabaseDirectory {DB}\nLogFile {TMP}/clamd.log\nLogTime yes\n"
                 f"PidFile {TMP}/clamd.pid\nSelfCheck 0\n")
    return Proc([CLAMD, "-c", conf], port, os.path.join(TMP, "clamd.out"))


def milter(name, port, clamd_port, on_infected):
    conf = write(os.path.join(TMP, f"{name}.conf"),
                 f"Foreground yes\nMilterSocket inet:{port}@127.0.0.1\n"
                 f"ClamdSocket tcp:127.0.0.1:{clamd_port}\nOnInfected {on_infected}\n"
                 f"OnFail Defer\nAddHeader Replace\nLogInfected Basic\nLogClean Basic\n"
                 f"LogFile {TMP}/{name}.log\nPidFile {TMP}/{name}.pid\n"
                 f"ReadTimeout 120\nRejectMsg Virus found: %v\n")
    return Proc([MILTER, "-c", conf], port, os.path.join(TMP, f"{name}.out"))


CLAMD_PORT, REJECT_PORT, QUARANTINE_PORT = free_port(), free_port(), free_port()
signatures()
scanner = clamd(CLAMD_PORT)
rejecting = milter("milter-reject", REJECT_PORT, CLAMD_PORT, "Reject")
quarantining = milter("milter-quarantine", QUARANTINE_PORT, CLAMD_PORT, "Quarantine")
write_users(os.path.join(TMP, "users"), ["user1"])
mtad = Mtad(MTAD, TMP, {"backend": "file", "users_file": os.path.join(TMP, "users")},
            {"workers": "1"}, tls=False)
mtad.sections["milter"] = {"smtpd_milters": f"inet:127.0.0.1:{REJECT_PORT}",
                           "content_timeout": "120s", "command_timeout": "120s"}
mtad.write_conf()
store = Store(PEEK, mtad.conf)


def message(subject, body, attachment=None):
    head = (f"From: Sender <sender@example.org>\r\nTo: user1@heron.test\r\n"
            f"Subject: {subject}\r\nMessage-ID: <{subject}@example.org>\r\n"
            f"Date: Thu, 03 Dec 2026 06:00:00 +0000\r\nMIME-Version: 1.0\r\n")
    if attachment is None:
        return f"{head}Content-Type: text/plain\r\n\r\n{body}\r\n".encode()
    b64 = base64.encodebytes(attachment).decode().replace("\n", "\r\n")
    return (f"{head}Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n"
            f"--b1\r\nContent-Type: text/plain\r\n\r\n{body}\r\n"
            f"--b1\r\nContent-Type: application/octet-stream\r\n"
            f"Content-Disposition: attachment; filename=\"test.com\"\r\n"
            f"Content-Transfer-Encoding: base64\r\n\r\n{b64}--b1--\r\n").encode()


def send(msg):
    with smtplib.SMTP("127.0.0.1", mtad.port, timeout=180) as c:
        c.ehlo("client.example.org")
        c.mail("sender@example.org")
        assert_eq(c.rcpt("user1@heron.test")[0], 250)
        code, text = c.data(msg)
        return code, text.decode()


def inbox_message(subject):
    for uid, *_ in store.inbox("user1"):
        body = store.body("user1", uid)
        if f"\r\nSubject: {subject}\r\n".encode() in body:
            return body
    return None


def test_eicar_attachment_rejected():
    code, text = send(message("eicar", "see the attachment", EICAR))
    assert code // 100 == 5, (code, text)
    assert_in("Heron.Test.EICAR", text)
    assert inbox_message("eicar") is None
    assert_in("result=reject", mtad.logtext())


def test_test_string_rejected():
    code, text = send(message("string", f"a line with {TEST_STRING.decode()} in it"))
    assert code // 100 == 5, (code, text)
    assert_in("Heron.Test.String", text)
    assert inbox_message("string") is None


def test_clean_message_passes():
    code, text = send(message("clean", "Hello,\r\n\r\nnothing to see here.", b"plain data\n"))
    assert_eq(code, 250, text)
    body = wait_for(lambda: inbox_message("clean"), 60, "the clean message")
    head = body.split(b"\r\n\r\n", 1)[0].decode(errors="replace")
    assert_in("X-Virus-Scanned: clamav-milter ", head)
    assert_in("X-Virus-Status: Clean", head)
    assert_in("nothing to see here.", body.decode(errors="replace"))


def test_quarantined():
    """OnInfected Quarantine: accepted, held in the queue, not in the mailbox."""
    mtad.stop()
    mtad.sections["milter"]["smtpd_milters"] = f"inet:127.0.0.1:{QUARANTINE_PORT}"
    mtad.write_conf()
    mtad.start()
    code, text = send(message("quarantined", "again", EICAR))
    assert_eq(code, 250, text)
    wait_for(lambda: "milter quarantine" in mtad.logtext(), 60, "the quarantine")
    held = [line for line in store.queue() if line.endswith(" held")]
    assert_eq(len(held), 1, store.queue())
    assert inbox_message("quarantined") is None
    assert_in('milter quarantine reason="quarantined by clamav-milter"', mtad.logtext())


def main():
    def body():
        scanner.start()
        rejecting.start()
        quarantining.start()
        mtad.start()
        failed = run_tests([test_eicar_attachment_rejected, test_test_string_rejected,
                            test_clean_message_passes, test_quarantined])
        if failed:
            for p in (scanner, rejecting, quarantining):
                sys.stdout.write(p.logtext()[-3000:])
            for name in ("clamd.log", "milter-reject.log", "milter-quarantine.log"):
                path = os.path.join(TMP, name)
                if os.path.exists(path):
                    with open(path, errors="replace") as f:
                        sys.stdout.write(f.read()[-3000:])
        return failed
    return run_main(body, TMP, [mtad],
                    cleanup=[quarantining.stop, rejecting.stop, scanner.stop])


if __name__ == "__main__":
    sys.exit(main())
