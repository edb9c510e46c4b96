#!/usr/bin/env python3
"""test_sieve_rspamd.py — spamtest (RFC 5235) on the verdict of a real scanner: rspamd's proxy
worker as mtad's milter (heronlib.Rspamd), with one rule of the test's own (a multimap on the
Subject scoring 9 of the 15 that reject), so a message is spam-scored but accepted. A user's
script stored with `mailctl sieve put` files what spamtest rates 5 or more into Junk; imaplib
reads the folders back. The score comes from rspamd's X-Spamd-Result field ("[9.x / 15.00]"),
the default [sieve] spam_header; a clean message stays in INBOX, a sender's forged verdict
(X-Spamd-Result or X-Spam-Score saying 0) does not keep spam out of Junk. virustest: with
Debian's clamd (a signature database of the test's own, so nothing is downloaded) behind
rspamd's antivirus module, rspamd writes its verdict as X-Virus-Scan: clean / infected, NAME
(the form [sieve] virus_header reads), and a virustest "eq 5" rule quarantines the infected
message; without clamd that part is skipped, said on the output. Skipped (77) where rspamd is
not installed.

  test_sieve_rspamd.py SOURCE_ROOT MTAD IMAPD MAILCTL"""
import imaplib
import os
import re
import shutil
import smtplib
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (HOST, Daemon, Rspamd, end_process, free_port, run_main,  # noqa: E402
                      run_tests, shared_conf, wait_for, wait_port)

ROOT, MTAD, IMAPD, MAILCTL = sys.argv[1:5]
if shutil.which("rspamd") is None or not os.path.isdir("/etc/rspamd"):
    print("rspamd not installed (scripts/bootstrap installs it): skipped")
    sys.exit(77)

TMP = tempfile.mkdtemp(prefix="heron-sieve-rspamd-")
os.chmod(TMP, 0o755)  # rspamd's workers run as its own user and read their config here
PORT = free_port()
SPAMMY = os.path.join(TMP, "spammy_subjects.map")
with open(SPAMMY, "w") as f:
    f.write("/cheap watches/i\n")
os.chmod(SPAMMY, 0o644)
CLAMD = "/usr/sbin/clamd" if os.access("/usr/sbin/clamd", os.X_OK) else None
CLAM_PORT = free_port()
MARKER = "HERON-SIEVE-VIRUSTEST-MARKER-6d1f"  # the test's own signature (no virus database)


class Clamd:
    """clamd in the foreground on 127.0.0.1:CLAM_PORT with one signature database of the
    test's (MARKER in any file); stop() ends the process it started."""

    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "clamd")
        os.makedirs(os.path.join(self.dir, "db"), exist_ok=True)
        with open(os.path.join(self.dir, "db", "heron.ndb"), "w") as f:
            f.write(f"Heron.Test.Marker:0:*:{MARKER.encode().hex()}\n")
        self.conf = os.path.join(self.dir, "clamd.conf")
        with open(self.conf, "w") as f:
            f.write(f"Foreground yes\nTCPSocket {CLAM_PORT}\nTCPAddr 127.0.0.1\n"
                    f"DatabaseDirectory {self.dir}/db\nLogFile {self.dir}/clamd.log\n")
        self.proc = None

    def start(self):
        with open(os.path.join(self.dir, "stdout.log"), "ab") as out:
            self.proc = subprocess.Popen([CLAMD, "-c", self.conf], stdout=out, stderr=out,
                                         stdin=subprocess.DEVNULL)
        wait_port(CLAM_PORT, 300, self.proc, "clamd")

    def stop(self):
        end_process(self.proc)
        self.proc = None


clamd = Clamd(TMP) if CLAMD else None
LOCAL = {"multimap.conf": (
    'HERON_TEST_SPAMMY_SUBJECT {\n  type = "header";\n  header = "Subject";\n'
    f'  regexp = true;\n  map = "{SPAMMY}";\n  score = 9.0;\n'
    '  description = "a subject the test calls spam";\n}\n')}
if clamd is not None:
    # rspamd asks clamd about the whole message and says what it found in X-Virus-Scan
    # ("clean", or "infected, NAME"), the form virustest reads by default
    LOCAL["antivirus.conf"] = (
        'clamav {\n  type = "clamav";\n  symbol = "CLAM_VIRUS";\n'
        f'  servers = "127.0.0.1:{CLAM_PORT}";\n  scan_mime_parts = false;\n'
        '  log_clean = true;\n}\n')
    LOCAL["milter_headers.conf"] = (
        'use = ["x-spamd-result", "x-rspamd-server", "x-rspamd-queue-id", "x-virus"];\n'
        'skip_local = false;\nskip_authenticated = false;\n'
        'routines {\n  x-virus {\n    header = "X-Virus-Scan";\n    remove = 1;\n'
        '    status_clean = "clean";\n    status_infected = "infected";\n'
        '    symbols = ["CLAM_VIRUS"];\n  }\n}\n')
rspamd = Rspamd(TMP, PORT, local=LOCAL)
CONF, SMTP_PORT, IMAP_PORT = shared_conf(TMP, ["ann"], keys={
    "milter": {"smtpd_milters": f"inet:127.0.0.1:{PORT}", "content_timeout": "60s",
               "command_timeout": "60s"},
})
mtad = Daemon(MTAD, CONF, os.path.join(TMP, "mtad.log"), SMTP_PORT)
imapd = Daemon(IMAPD, CONF, os.path.join(TMP, "imapd.log"), IMAP_PORT)
SCRIPT = ('require ["spamtest", "virustest", "relational", "comparator-i;ascii-numeric",\n'
          '         "fileinto", "mailbox"];\n'
          'if virustest :value "eq" :comparator "i;ascii-numeric" "5" {\n'
          '  fileinto :create "Quarantine";\n'
          '} elsif spamtest :value "ge" :comparator "i;ascii-numeric" "5" {\n'
          '  fileinto :create "Junk";\n}\n')


def send(subject, extra="", body="see you at the meeting tomorrow at ten."):
    msg = (f"From: Sender <sender@example.org>\r\nTo: ann@heron.test\r\n{extra}"
           f"Subject: {subject}\r\nMessage-ID: <{subject.replace(' ', '.')}@example.org>\r\n"
           f"Date: Thu, 03 Dec 2026 06:00:00 +0000\r\n\r\nHello Ann,\r\n\r\n"
           f"{body}\r\n")
    with smtplib.SMTP(HOST, SMTP_PORT, timeout=180) as c:
        c.ehlo("client.example.org")
        return c.sendmail("sender@example.org", ["ann@heron.test"], msg)


def folder(name):
    """{subject: header bytes} of mailbox name (None when it does not exist)."""
    c = imaplib.IMAP4(HOST, IMAP_PORT, timeout=20)
    c.login("ann", "ann")
    typ, data = c.select(f'"{name}"', readonly=True)
    out = None
    if typ == "OK":
        out = {}
        if int(data[0]) > 0:
            for item in c.fetch("1:*", "(BODY.PEEK[HEADER])")[1]:
                if isinstance(item, tuple):
                    m = re.search(rb"^Subject: (.*)\r$", item[1], re.M)
                    out[m.group(1).decode()] = item[1]
    c.logout()
    return out


def test_spam_scored_message_filed_to_junk():
    path = os.path.join(TMP, "ann.sieve")
    with open(path, "w") as f:
        f.write(SCRIPT)
    subprocess.run([MAILCTL, "-c", CONF, "sieve", "put", "ann", "main", path, "--activate"],
                   check=True, capture_output=True)
    send("cheap watches for you")
    send("the meeting")
    # a sender's own verdict does not count: rspamd removes a forged X-Spamd-Result, and
    # the one it adds outranks a forged X-Spam-Score (the default spam_header)
    send("cheap watches forged result", "X-Spamd-Result: default: False [0.00 / 15.00]\r\n")
    send("cheap watches forged score", "X-Spam-Score: 0\r\n")
    wait_for(lambda: "the meeting" in (folder("INBOX") or {}), timeout=120,
             what="the clean message")
    for subj in ("cheap watches for you", "cheap watches forged result",
                 "cheap watches forged score"):
        wait_for(lambda: subj in (folder("Junk") or {}), timeout=120,
                 what=f"{subj} in Junk")
    spam = folder("Junk")["cheap watches for you"].decode()
    # rspamd's verdict: not a reject, a score between 5/10 of 15 and 15
    m = re.search(r"^X-Spamd-Result: default: (True|False) \[([0-9.]+) / 15\.00\]", spam, re.M)
    assert m is not None, spam
    assert 9.0 <= float(m.group(2)) < 15.0, m.group(0)
    assert "HERON_TEST_SPAMMY_SUBJECT" in spam, spam
    clean = folder("INBOX")["the meeting"].decode()
    m = re.search(r"^X-Spamd-Result: default: False \[(-?[0-9.]+) / 15\.00\]", clean, re.M)
    assert m is not None and float(m.group(1)) < 4.0, clean
    assert not [s for s in folder("INBOX") if "cheap" in s], folder("INBOX")
    assert "the meeting" not in folder("Junk")


def test_infected_message_quarantined():
    if clamd is None:
        print("clamd not installed: virustest not checked")
        return
    # the marker makes clamd report it; a forged "clean" verdict is removed by rspamd
    send("the invoice", "X-Virus-Scan: clean\r\n", body=f"the attachment: {MARKER}")
    send("the minutes")
    wait_for(lambda: "the minutes" in (folder("INBOX") or {}), timeout=120,
             what="the clean message")
    wait_for(lambda: "the invoice" in (folder("Quarantine") or {}), timeout=120,
             what="the infected message in Quarantine")
    bad = folder("Quarantine")["the invoice"].decode()
    assert re.search(r"^X-Virus-Scan: infected, Heron\.Test\.Marker", bad, re.M), bad
    assert "X-Virus-Scan: clean" not in bad, bad
    good = folder("INBOX")["the minutes"].decode()
    assert re.search(r"^X-Virus-Scan: clean\r$", good, re.M), good
    assert "the invoice" not in folder("INBOX")


def main():
    def body():
        if clamd is not None:
            clamd.start()
        rspamd.start()
        mtad.start()
        imapd.start()
        subprocess.run([MAILCTL, "-c", CONF, "user", "add", "ann"], check=True,
                       capture_output=True)
        failed = run_tests([test_spam_scored_message_filed_to_junk,
                            test_infected_message_quarantined])
        if failed:
            sys.stdout.write(rspamd.logtext()[-6000:])
        return failed
    return run_main(body, TMP, [mtad, imapd],
                    cleanup=[rspamd.stop] + ([clamd.stop] if clamd else []))


if __name__ == "__main__":
    sys.exit(main())
