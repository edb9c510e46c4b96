"""heroncluster.py — two Heron store hosts on one machine for the scale-out tests: each host
has its own loopback address (127.0.0.2, 127.0.0.3), its own store, heron.conf, mtad (SMTP
and LMTP) and imapd (and managesieved, with msd=); both read one private slapd (scripts/ldap)
whose users are spread over the hosts by mailHost (user1 on store1, user2 on store2, ...).
With front=True a front host on 127.0.0.4 proxies to them: its imapd, and its managesieved
with msd=, over STARTTLS (proxy_tls's default) verifying each store host's self-signed
certificate for its name (Cluster.ca holds them, the front's proxy_ca_file). Every daemon is started and stopped by the test (by the pid it started), also on
failure.

  with Cluster(ROOT, MTAD, IMAPD, PEEK, tmp) as cl: cl.hosts[0].smtp_port ..."""
import imaplib
import os
import socket
import ssl
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (DOMAIN, Daemon, Slapd, Store, assert_eq, assert_in,  # noqa: E402
                      assert_raises, free_port, run_main, run_tests, tls_client_ctx,
                      wait_for, wait_workers_ready, write_conf)

NAMES = ("store1.heron.test", "store2.heron.test")
ADDRS = ("127.0.0.2", "127.0.0.3")
FRONT_ADDR = "127.0.0.4"
PROXY_SECRET = "front-to-store shared secret"
# connections between loopback addresses leave from 127.0.0.1: the fronts' address
FRONT_SOURCE = "127.0.0.1"


class HostDaemon(Daemon):
    """A daemon listening on one store host's own loopback address."""

    def __init__(self, exe, conf, log, port, host):
        super().__init__(exe, conf, log, port)
        self.host = host
        self.name = os.path.basename(exe)


class StoreHost:
    """One store host: its address, name (its users' mailHost), ports, heron.conf, daemons
    (msd: its managesieved, [sieve] on its own address, or None)."""

    def __init__(self, tmp, index, slapd, mtad_exe, imapd_exe, peek, lmtp_ports, secret,
                 extra=None, msd_exe=None):
        self.index, self.name, self.addr = index, NAMES[index], ADDRS[index]
        self.dir = os.path.join(tmp, f"host{index + 1}")
        os.makedirs(self.dir, exist_ok=True)
        self.smtp_port, self.imap_port = free_port(), free_port()
        self.lmtp_port = lmtp_ports[index]
        self.conf = os.path.join(self.dir, "heron.conf")
        # the front verifies it (proxy_tls = starttls): its name (the mailHost) and address
        self.cert, key = host_cert(self.dir, self.name, self.addr)
        cert = self.cert
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
                      "allow_root": "yes", "proxy_secret_file": secret,
                      "proxy_trusted": f"{FRONT_SOURCE}/32"},
            "log": {"target": "stderr", "level": "info"},
            "control": {"dir": self.dir},
            "dns": {"nameservers": "127.0.0.1@9", "dnssec": "off", "timeout": "1s",
                    "attempts": "1"},
        }
        self.msd, self.sieve_port = None, None
        if msd_exe is not None:  # the proxy credential trusted from the fronts
            self.sieve_port = free_port()
            self.sections["sieve"] = {"listen": f"{self.addr}:{self.sieve_port}", "user": "",
                                      "allow_root": "yes", "allow_plaintext_auth": "yes",
                                      "proxy_secret_file": secret,
                                      "proxy_trusted": f"{FRONT_SOURCE}/32"}
        for sec, kv in (extra or {}).items():
            self.sections.setdefault(sec, {}).update(kv)
        write_conf(self.conf, self.sections)
        self.mtad = HostDaemon(mtad_exe, self.conf, os.path.join(self.dir, "mtad.log"),
                               self.smtp_port, self.addr)
        self.imapd = HostDaemon(imapd_exe, self.conf, os.path.join(self.dir, "imapd.log"),
                                self.imap_port, self.addr)
        if msd_exe is not None:
            self.msd = HostDaemon(msd_exe, self.conf, os.path.join(self.dir, "managesieved.log"),
                                  self.sieve_port, self.addr)
        self.store = Store(peek, self.conf)

    def daemons(self):
        return [d for d in (self.mtad, self.imapd, self.msd) if d is not None]

    def start(self):
        self.mtad.start()
        wait_workers_ready(self.mtad, "mtad")
        self.imapd.start()
        if self.msd is not None:
            self.msd.start()
        return self

    def stop(self):
        if self.msd is not None:
            self.msd.stop()
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


def host_cert(d, name, addr=None, base=None):
    """A self-signed certificate for name (and addr, and localhost/127.0.0.1 beside them):
    (d/BASE.pem, d/BASE.key), BASE the name unless given."""
    base = base or name
    cert, key = os.path.join(d, base + ".pem"), os.path.join(d, base + ".key")
    san = f"DNS:{name}" + (f",IP:{addr}" if addr else "") + ",DNS:localhost,IP:127.0.0.1"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days",
                    "2", "-subj", f"/CN={name}", "-addext", f"subjectAltName={san}"],
                   capture_output=True, check=True)
    return cert, key


def front_cert(d):
    """A self-signed certificate for the front (front.heron.test, FRONT_ADDR)."""
    return host_cert(d, "front.heron.test", FRONT_ADDR, base="front")


def fake_starttls(s, f, cert, key, tag=b""):
    """A fake store host's STARTTLS on socket s (f: its reader): reads the front's command
    (tag the IMAP one's, empty for ManageSieve), answers OK and runs the server handshake
    with cert/key; (the TLS socket, its reader)."""
    line = f.readline()
    assert_eq(line, (tag + b" " if tag else b"") + b"STARTTLS\r\n")
    s.sendall((tag + b" " if tag else b"") + b"OK Begin TLS negotiation now\r\n")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    t = ctx.wrap_socket(s, server_side=True)
    return t, t.makefile("rb")


class Front:
    """A front host on FRONT_ADDR (its own empty store; every user is homed on a store host,
    where their sessions are relayed): its imapd (imapd_exe; [imapd] proxy = yes, STARTTLS
    only) and its managesieved (msd_exe; [sieve] proxy = yes), each when given. directory:
    more [directory] keys; sieve_extra: more [sieve] proxy_hosts entries; sections: more
    keys by section ({"metrics": {...}})."""

    def __init__(self, tmp, slapd, hosts, secret, imapd_exe=None, msd_exe=None, directory=None,
                 sieve_extra=(), ca="", sections=None):
        self.addr, self.dir = FRONT_ADDR, os.path.join(tmp, "front")
        os.makedirs(self.dir, exist_ok=True)
        self.imap_port = free_port() if imapd_exe is not None else None
        self.sieve_port = free_port() if msd_exe is not None else None
        self.conf = os.path.join(self.dir, "heron.conf")
        self.cert, key = front_cert(self.dir)
        extra = sections
        imapd = {"hostname": "front.heron.test"}
        if imapd_exe is not None:
            imapd.update({
                "listen": f"{self.addr}:{self.imap_port}", "workers": "1",
                "allow_plaintext_auth": "no", "proxy": "yes",
                "proxy_hosts": ",".join(f"{h.name}={h.addr}:{h.imap_port}" for h in hosts),
                "proxy_secret_file": secret, "proxy_timeout": "5s", "user": "",
                "allow_root": "yes", "proxy_tls": "starttls", "proxy_ca_file": ca,
                "proxy_pool_max": "64", "proxy_pool_idle": "30s"})  # written for set_key
        sections = {
            "store": {"path": os.path.join(self.dir, "store"), "partitions": "1",
                      "map_size": "16M"},
            "directory": slapd.directory(timeout="2s", negative_cache_ttl="0s",
                                         auth_cache_ttl="0s", **(directory or {})),
            "tls": {"cert": self.cert, "key": key},
            "imapd": imapd,
            "log": {"target": "stderr", "level": "info"},
            "control": {"dir": self.dir},
        }
        if msd_exe is not None:
            sieve_hosts = [f"{h.name}={h.addr}:{h.sieve_port}" for h in hosts]
            sections["sieve"] = {"listen": f"{self.addr}:{self.sieve_port}", "user": "",
                                 "allow_root": "yes", "proxy": "yes",
                                 "proxy_hosts": ",".join(sieve_hosts + list(sieve_extra)),
                                 "proxy_secret_file": secret, "proxy_timeout": "5s",
                                 "proxy_tls": "starttls", "proxy_ca_file": ca}
        for sec, kv in (extra or {}).items():
            sections.setdefault(sec, {}).update(kv)
        write_conf(self.conf, sections)
        self.imapd = self.msd = None
        if imapd_exe is not None:
            self.imapd = HostDaemon(imapd_exe, self.conf, os.path.join(self.dir, "imapd.log"),
                                    self.imap_port, self.addr)
        if msd_exe is not None:
            self.msd = HostDaemon(msd_exe, self.conf,
                                  os.path.join(self.dir, "managesieved.log"), self.sieve_port,
                                  self.addr)

    def daemons(self):
        return [d for d in (self.imapd, self.msd) if d is not None]

    def set_key(self, key, value):
        """key = value in the front's heron.conf, where key is written once (a SIGHUP of
        the daemon applies it)."""
        lines = open(self.conf).read().split("\n")
        at = [i for i, line in enumerate(lines) if line.startswith(key + " = ")]
        assert_eq(len(at), 1)
        lines[at[0]] = f"{key} = {value}"
        with open(self.conf, "w") as f:
            f.write("\n".join(lines))

    def set_all(self, key, value):
        """key = value in every section of the front's heron.conf that has key (a SIGHUP of
        the daemons applies it)."""
        lines = open(self.conf).read().split("\n")
        lines = [f"{key} = {value}" if line.startswith(key + " = ") else line
                 for line in lines]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines))

    def login(self, user):
        """user logs in through the front's imapd (STARTTLS, LOGIN), selects INBOX, logs out."""
        c = imaplib.IMAP4(self.addr, self.imap_port, timeout=20)
        c.starttls(ssl_context=tls_client_ctx(self.cert))
        c.login(user, user)
        assert_eq(c.select("INBOX")[0], "OK")
        c.logout()

    def login_unavailable(self, user):
        """user's IMAP login through the front (STARTTLS, LOGIN) is refused: NO [UNAVAILABLE]."""
        c = imaplib.IMAP4(self.addr, self.imap_port, timeout=20)
        c.starttls(ssl_context=tls_client_ctx(self.cert))
        with assert_raises(imaplib.IMAP4.error) as ex:
            c.login(user, user)
        assert_in("[UNAVAILABLE]", str(ex.exception))
        c.logout()

    def start(self):
        for d in self.daemons():
            d.start()

    def stop(self):
        for d in self.daemons():
            d.stop()


class Cluster:
    """One slapd (users spread over the store hosts), two store hosts, and with front=True a
    front host (Front: its imapd unless front_imapd=False). With msd (managesieved) every
    host runs managesieved too. front_directory, front_sieve_extra and front_sections: Front's
    directory, sieve_extra and sections."""

    def __init__(self, root, mtad_exe, imapd_exe, peek, tmp, users=8, extra=None, front=False,
                 msd=None, front_imapd=True, front_directory=None, front_sieve_extra=(),
                 fake_names=(), front_sections=None):
        self.tmp = tmp
        self.want_front = front
        self.msd = msd
        self.front_opts = dict(imapd_exe=imapd_exe if front_imapd else None, msd_exe=msd,
                               directory=front_directory, sieve_extra=front_sieve_extra,
                               sections=front_sections)
        self.front = None
        # the CAs the front verifies the store hosts with: their self-signed certificates,
        # and one for each of fake_names (fake store hosts': fake_cert[name] = (cert, key))
        self.ca = os.path.join(tmp, "proxy-ca.pem")
        fakes = os.path.join(tmp, "fakes")
        os.makedirs(fakes, exist_ok=True)
        self.fake_cert = {n: host_cert(fakes, n) for n in fake_names}
        self.secret = os.path.join(tmp, "proxy.secret")
        with open(self.secret, "w") as f:
            f.write(PROXY_SECRET + "\n")
        os.chmod(self.secret, 0o600)
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
                                    self.secret, self.extra, self.msd)
                          for i in range(len(NAMES))]
            for h in self.hosts:
                h.start()
            with open(self.ca, "w") as out:
                for cert in [h.cert for h in self.hosts] + [c for c, _ in
                                                             self.fake_cert.values()]:
                    with open(cert) as f:
                        out.write(f.read())
            if self.want_front:
                self.front = Front(self.tmp, self.slapd, self.hosts, self.secret,
                                   ca=self.ca, **self.front_opts)
                self.front.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        if self.front is not None:
            self.front.stop()
        for h in self.hosts:
            h.stop()
        self.slapd.stop()
        return False

    def daemons(self):
        front = self.front.daemons() if self.front is not None else []
        return [d for h in self.hosts for d in h.daemons()] + front

    def ldapmodify(self, uid, attr, value):
        """Sets attr of user uid to value on the slapd (ldapmodify)."""
        e = self.slapd.env
        ldif = (f"dn: uid={uid},{e['LDAP_PEOPLE']}\nchangetype: modify\nreplace: {attr}\n"
                f"{attr}: {value}\n")
        subprocess.run(["ldapmodify", "-x", "-H", e["LDAP_URI"], "-D", e["LDAP_ADMIN_DN"],
                        "-w", e["LDAP_ADMIN_PASSWORD"]], input=ldif.encode(), check=True,
                       stdout=subprocess.DEVNULL)

    @staticmethod
    def home(user):
        """The index of user's store host (scripts/ldap --hosts: round robin from user1)."""
        return (int(user[4:]) - 1) % len(NAMES)


class IMAPFrom(imaplib.IMAP4):
    """imaplib from a chosen source address (the front's own is 127.0.0.1)."""

    def __init__(self, src, host, port):
        self.src = src
        super().__init__(host, port, timeout=20)

    def _create_socket(self, timeout):
        return socket.create_connection((self.host, self.port), timeout,
                                        source_address=(self.src, 0))

    def command(self, line):
        """Sends line (bytes, a tagged command) raw; its tagged response line, the untagged
        ones before it skipped."""
        self.send(line + b"\r\n")
        tag = line.split(b" ")[0] + b" "
        while not (got := self.readline()).startswith(tag):
            assert got, "the connection closed"
        return got


def sighup(daemon):
    """SIGHUP to daemon (its master), once its workers said "config reloaded"."""
    n = daemon.logtext().count("config reloaded")
    daemon.proc.send_signal(1)
    wait_for(lambda: daemon.logtext().count("config reloaded") > n, 10, "the reload")


def listener(addr):
    """A listening socket on addr (a fake store host's): (socket, port)."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    port = free_port()
    srv.bind((addr, port))
    srv.listen(4)
    return srv, port


def run_cluster(cl, tmp, tests, on_start):
    """Starts cl, calls on_start(cl), runs tests, and always stops every daemon (their logs
    shown on failure); the exit code."""
    daemons = []

    def body():
        with cl:
            daemons.extend(cl.daemons())
            on_start(cl)
            return run_tests(tests)

    return run_main(body, tmp, daemons, tail=20000)
