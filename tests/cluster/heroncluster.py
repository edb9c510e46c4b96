"""heroncluster.py — two Heron store hosts on one machine for the scale-out tests: each host
has its own loopback address (127.0.0.2, 127.0.0.3), its own store, heron.conf, mtad (SMTP
and LMTP) and imapd; both read one private slapd (scripts/ldap) whose users are spread over
the hosts by mailHost (user1 on store1, user2 on store2, ...). Every daemon is started and
stopped by the test (by the pid it started), also on failure.

  with Cluster(ROOT, MTAD, IMAPD, PEEK, tmp) as cl: cl.hosts[0].smtp_port ..."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Daemon, Slapd, Store, free_port, make_cert,  # noqa: E402
                      wait_workers_ready, write_conf)

NAMES = ("store1.heron.test", "store2.heron.test")
ADDRS = ("127.0.0.2", "127.0.0.3")


class HostDaemon(Daemon):
    """A daemon listening on one store host's own loopback address."""

    def __init__(self, exe, conf, log, port, host):
        super().__init__(exe, conf, log, port)
        self.host = host
        self.name = os.path.basename(exe)


class StoreHost:
    """One store host: its address, name (its users' mailHost), ports, heron.conf, daemons."""

    def __init__(self, tmp, index, slapd, mtad_exe, imapd_exe, peek, lmtp_ports, extra=None):
        self.index, self.name, self.addr = index, NAMES[index], ADDRS[index]
        self.dir = os.path.join(tmp, f"host{index + 1}")
        os.makedirs(self.dir, exist_ok=True)
        self.smtp_port, self.imap_port = free_port(), free_port()
        self.lmtp_port = lmtp_ports[index]
        self.conf = os.path.join(self.dir, "heron.conf")
        cert, key = make_cert(self.dir)
        lmtp_map = ",".join(f"{NAMES[i]}=[{ADDRS[i]}]:{lmtp_ports[i]}"
                            for i in range(len(NAMES)))
        self.sections = {
            "store": {"path": os.path.join(self.dir, "store"), "partitions": "2",
                      "map_size": "16M"},
            "directory": slapd.directory(timeout="2s", negative_cache_ttl="0s",
                                         auth_cache_ttl="0s"),
            "tls": {"cert": cert, "key": key},
            "mtad": {"listen": f"{self.addr}:{self.smtp_port}", "submission": "",
                     "lmtp": f"{self.addr}:{self.lmtp_port}", "hostname": self.name,
                     "mailhost": self.name, "mailhost_lmtp": lmtp_map, "workers": "1",
                     "local_domains": DOMAIN, "relay_timeout": "10s",
                     "retry_schedule": "1s", "user": "", "allow_root": "yes"},
            "imapd": {"listen": f"{self.addr}:{self.imap_port}", "workers": "1",
                      "hostname": self.name, "allow_plaintext_auth": "yes", "user": "",
                      "allow_root": "yes"},
            "log": {"target": "stderr", "level": "info"},
            "control": {"dir": self.dir},
            "dns": {"nameservers": "127.0.0.1@9", "dnssec": "off", "timeout": "1s",
                    "attempts": "1"},
        }
        for sec, kv in (extra or {}).items():
            self.sections.setdefault(sec, {}).update(kv)
        write_conf(self.conf, self.sections)
        self.mtad = HostDaemon(mtad_exe, self.conf, os.path.join(self.dir, "mtad.log"),
                               self.smtp_port, self.addr)
        self.imapd = HostDaemon(imapd_exe, self.conf, os.path.join(self.dir, "imapd.log"),
                                self.imap_port, self.addr)
        self.store = Store(peek, self.conf)

    def start(self):
        self.mtad.start()
        wait_workers_ready(self.mtad, "mtad")
        self.imapd.start()
        return self

    def stop(self):
        self.imapd.stop()
        self.mtad.stop()

    def subjects(self, user):
        """The Subject: values of user's INBOX on this host, in UID order."""
        out = []
        for uid, _blob, _size in self.store.inbox(user):
            for line in self.store.body(user, uid).split(b"\r\n"):
                if line.startswith(b"Subject: "):
                    out.append(line[9:].decode())
                    break
        return out


class Cluster:
    """One slapd (users spread over the store hosts) and two store hosts."""

    def __init__(self, root, mtad_exe, imapd_exe, peek, tmp, users=8, extra=None):
        self.tmp = tmp
        self.slapd = Slapd(root, os.path.join(tmp, "slapd"), "--hosts", ",".join(NAMES),
                           users=users)
        self.args = (mtad_exe, imapd_exe, peek)
        self.extra = extra
        self.hosts = []

    def __enter__(self):
        try:
            self.slapd.start()
            lmtp_ports = [free_port() for _ in NAMES]
            self.hosts = [StoreHost(self.tmp, i, self.slapd, *self.args, lmtp_ports,
                                    self.extra) for i in range(len(NAMES))]
            for h in self.hosts:
                h.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for h in self.hosts:
            h.stop()
        self.slapd.stop()
        return False

    def daemons(self):
        return [d for h in self.hosts for d in (h.mtad, h.imapd)]

    @staticmethod
    def home(user):
        """The index of user's store host (scripts/ldap --hosts: round robin from user1)."""
        return (int(user[4:]) - 1) % len(NAMES)
