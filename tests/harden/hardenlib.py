"""hardenlib.py — shared by the tests in tests/harden: one heron.conf for mtad and imapd on one
store (users file backend, password = user name, free loopback ports)."""
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mtad"))
from mtadlib import DOMAIN, Mtad, check_sanitizers, free_port, write_users  # noqa: E402


def shared_conf(tmp, users, workers=1, partitions=1, map_size="16M"):
    """Writes tmp/users and tmp/heron.conf; returns (conf path, smtp port, imap port)."""
    users_file = os.path.join(tmp, "users")
    write_users(users_file, users)
    smtp_port, imap_port = free_port(), free_port()
    conf = os.path.join(tmp, "heron.conf")
    with open(conf, "w") as f:
        f.write(f"[store]\npath = {tmp}/store\npartitions = {partitions}\n"
                f"map_size = {map_size}\n"
                f"[directory]\nbackend = file\nusers_file = {users_file}\n"
                f"[mtad]\nlisten = 127.0.0.1:{smtp_port}\nsubmission =\n"
                f"workers = {workers}\nlocal_domains = {DOMAIN}\nhostname = mx.{DOMAIN}\n"
                f"[imapd]\nlisten = 127.0.0.1:{imap_port}\nworkers = {workers}\n"
                f"allow_plaintext_auth = yes\n[log]\ntarget = stderr\nlevel = info\n")
    return conf, smtp_port, imap_port


class Daemon(Mtad):
    """mtad or imapd on a config of ours: start, kill -9, stop by pid and the log come from
    mtadlib's Mtad, which only needs these fields."""

    def __init__(self, exe, conf, log, port):  # pylint: disable=super-init-not-called
        self.exe, self.conf, self.log, self.port = exe, conf, log, port
        self.proc = None


def finish(rc, tmp, *daemons):
    """The end of a test program: sanitizer reports of the (stopped) daemons fail it; on
    failure their log tails are printed and tmp is kept, else removed. Returns the status."""
    for d in daemons:
        rc |= check_sanitizers(d)
    if rc:
        for d in daemons:
            sys.stdout.write(d.logtext()[-6000:])
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return rc
