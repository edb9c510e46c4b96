"""heronlib.py — the one harness of Heron's Python tests: free loopback ports reserved across
test processes, a TLS certificate made at test time, users files, heron.conf written from a
dict, the real daemons (mtad, imapd, sink; or one under strace) started with a readiness wait
and always stopped by the pid we started, the private slapd of scripts/ldap, rspamd as a
milter, the whole stack of scripts/stack, the store read back (store_peek, mailctl verify),
in-test peers (a scripted relay target, the sink's control port), the raw SMTP/IMAP line
clients the tests share, and the running of a test program: named tests (run_tests,
run_suite, run_main), assert_* helpers, skip (77).

Tests put this folder on sys.path relative to their own file:
  sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
  from heronlib import Mtad, Imapd, ...
"""
import base64
import contextlib
import fcntl
import hashlib
import imaplib
import json
import os
import pwd
import re
import random
import shlex
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types

DOMAIN = "heron.test"
HOST = "127.0.0.1"

# ---- ports, waiting, processes ----

_PORT_LOCK_DIR = os.path.join(tempfile.gettempdir(), "heron-test-ports")
_held_ports = []  # open lock files: a port stays ours while this process lives


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _reserve(port):
    """Takes an exclusive lock on the port's file (no other test process, nor this one, gets
    the port while we live; the kernel drops the lock when we exit, so nothing goes stale)."""
    try:
        os.makedirs(_PORT_LOCK_DIR, exist_ok=True)
        os.chmod(_PORT_LOCK_DIR, 0o1777)
    except OSError:
        pass
    try:
        fd = os.open(os.path.join(_PORT_LOCK_DIR, str(port)), os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError:
        return True  # no lock directory: the bind check alone
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _held_ports.append(fd)
    return True


def free_port():
    """A free 127.0.0.1 port for a daemon to bind. Below the ephemeral range (a port the kernel
    hands out may become the local port of an outgoing connection before the daemon binds it,
    and tests restart daemons on the same ports), not bound by anyone now, and reserved by a
    lock file for this process' lifetime, so concurrent tests never pick the same one."""
    low = _ephemeral_low()
    for _ in range(500):
        port = random.randint(10000, low - 1) if low > 11000 else 0
        with socket.socket() as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            port = s.getsockname()[1]
        if _reserve(port):
            return port
    raise RuntimeError("no free port")


def wait_port(port, timeout=20.0, proc=None, what=None, host=HOST):
    """Returns once something accepts on host:port (127.0.0.1); raises after timeout, or at
    once when proc (a Popen) exited."""
    end = time.time() + timeout
    while time.time() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what or 'the daemon'} exited ({proc.returncode}) before "
                               f"listening on {port}")
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def wait_for(pred, timeout=30.0, what="condition"):
    """Polls pred until it returns something true (returned); AssertionError on timeout."""
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def wait_workers_ready(daemon, ident, n=1):
    """Waits until workers 0..n-1 of a daemon logged "<ident> worker N ready": its listeners
    answer before the workers are forked and attached, so a test that needs the workers
    themselves (or what the master logs before forking them) waits for this."""
    for i in range(n):
        wait_for(lambda: f"{ident} worker {i} ready" in daemon.logtext(), 30,
                 f"{ident} worker {i} ready in the log")


def root_warning_count(daemon, ident):
    """How often the master of a daemon started with an empty [ident] user logged that its
    workers keep root (the master warns before it forks worker 0)."""
    wait_workers_ready(daemon, ident)
    return daemon.logtext().count(f"{ident}: workers keep root: set [{ident}] user")


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def children(pid):
    """Pids whose parent is pid (a daemon's workers)."""
    out = []
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                with open(f"/proc/{e}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(e))
            except (OSError, ValueError, IndexError):
                pass
    return out


def processes_with(text):
    """Live pids whose command line mentions text (to prove nothing of ours is left)."""
    want = text.encode()
    out = []
    for e in os.listdir("/proc"):
        if not e.isdigit() or int(e) == os.getpid():
            continue
        try:
            with open(f"/proc/{e}/cmdline", "rb") as f:
                if want in f.read() and alive(int(e)):
                    out.append(int(e))
        except OSError:
            pass
    return out


def read_env(path, shell=False):
    """KEY=value lines (ldap.env, stack.env) as a dict; shell: values are shell-quoted."""
    env = {}
    with open(path) as f:
        for line in f:
            if shell:
                line = line.strip()
                if "=" in line and not line.startswith("#"):
                    k, v = line.split("=", 1)
                    env[k] = shlex.split(v)[0] if v else ""
            elif "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                env[k] = v
    return env


# ---- certificates, users, config ----

def make_cert(d, name=None):
    """A self-signed P-256 certificate for localhost and 127.0.0.1: (d/cert.pem, d/key.pem),
    or with a name (d/NAME.pem, d/NAME.key, CN=NAME) another one beside it."""
    cert, key = ((os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")) if name is None
                 else (os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")))
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "2", "-subj", "/CN=" + (name or "localhost"), "-addext",
                        "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("openssl req failed: " + r.stderr)
    return cert, key


def tls_client_ctx(cafile=None):
    """A client context: verifying against cafile, or (None) accepting any certificate."""
    import ssl
    if cafile is not None:
        return ssl.create_default_context(cafile=cafile)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def ssha(password, salt=None):
    """{SSHA} of password (str or bytes), random salt unless given."""
    if isinstance(password, str):
        password = password.encode()
    salt = os.urandom(8) if salt is None else salt
    return "{SSHA}" + base64.b64encode(hashlib.sha1(password + salt).digest() + salt).decode()


def sha256_hash(password):
    return "{SHA256}" + base64.b64encode(hashlib.sha256(password.encode()).digest()).decode()


def write_users(path, users, quotas=None):
    """A users file: each name gets name@DOMAIN and alias.name@DOMAIN, password = name;
    quotas: name -> "1k"."""
    quotas = quotas or {}
    with open(path, "w") as f:
        for u in users:
            q = f":{quotas[u]}" if u in quotas else ""
            f.write(f"{u}:{ssha(u)}:{u}@{DOMAIN},alias.{u}@{DOMAIN}{q}\n")


def conf_text(sections):
    """heron.conf text from {section: {key: value}} (a str section is written as it is)."""
    out = []
    for sec, kv in sections.items():
        if isinstance(kv, str):
            out.append(kv if kv.endswith("\n") else kv + "\n")
            continue
        out.append(f"[{sec}]\n")
        out.extend(f"{k} = {v}\n" for k, v in kv.items())
    return "".join(out)


def write_conf(path, sections):
    with open(path, "w") as f:
        f.write(conf_text(sections))
    return path


def file_directory(users_file):
    return {"backend": "file", "users_file": users_file}


# ---- daemons ----

SANITIZER_MARKS = ("Sanitizer", "runtime error:")


class Daemon:
    """A Heron daemon (mtad, imapd, sink) run in the foreground as `exe -c conf -f ARGS`, its
    stdout and stderr appended to log; start() returns once port accepts. Only the process
    we started and its own children (the workers) are ever signalled."""

    name = "daemon"
    fg = "-f"  # "-F": in the foreground as under systemd, logging as [log] says
    failure_marks = SANITIZER_MARKS  # log lines that fail the test (check_sanitizers)
    host = HOST  # the address start() waits on

    def __init__(self, exe, conf, log, port, args=()):
        self.exe, self.conf, self.log, self.port = exe, conf, log, port
        self.args = list(args)
        self.proc = None
        self.returncode = None

    def command(self):
        return [self.exe, "-c", self.conf, self.fg, *self.args]

    def environ(self):
        return None  # the test's own

    def start(self, timeout=30.0):
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(self.command(), stdout=logf, stderr=logf,
                                         stdin=subprocess.DEVNULL, env=self.environ())
        try:
            wait_port(self.port, timeout, self.proc, os.path.basename(self.exe), self.host)
        except RuntimeError as e:
            self.stop()
            raise RuntimeError(f"{e}\n{self.logtext()[-4000:]}") from None
        return self

    def worker_pids(self):
        return children(self.proc.pid) if self.proc is not None else []

    def kill9(self):
        """kill -9 of the master and its workers (none is restarted), reaped."""
        pids = self.worker_pids()
        os.kill(self.proc.pid, signal.SIGKILL)
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)
        for p in pids:
            for _ in range(100):
                if not os.path.exists(f"/proc/{p}"):
                    break
                time.sleep(0.05)
        self.proc = None

    def terminate(self):
        self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout=15):
        """SIGTERM to the master (terminate()), SIGKILL after timeout; workers left behind get
        SIGKILL. The master's exit status is kept in returncode. Safe to call again."""
        if self.proc is None:
            return
        # a master already reaped may have lost its pid to another process: no pid lookup
        pids = self.worker_pids() if self.proc.poll() is None else []
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.returncode = self.proc.returncode
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    def logtext(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def sanitizer_reports(self):
        """Lines of the log that fail the test: sanitizer reports (sanitizer builds write them
        to the daemon's stderr, which is the log) and what failure_marks adds."""
        return [line for line in self.logtext().splitlines()
                if any(m in line for m in self.failure_marks)]


def check_sanitizers(daemon):
    """After the daemon stopped: 1 (and the reports printed) when a sanitizer complained."""
    reports = daemon.sanitizer_reports()
    for line in reports[:50]:
        print(line)
    return 1 if reports else 0


class Traced(Daemon):
    """A daemon run under `strace -f -y -e trace=CALLS -o TRACE` (strings: strace's -s), for
    the tests that read what the kernel was asked to do; call need_strace() first. strace
    starts the master, so the workers are the master's children; stop() sends SIGTERM to
    the master (a signal to strace would only detach it) and waits for strace to end."""

    name = "traced"

    def __init__(self, exe, conf, log, port, trace, calls, strings=None):
        super().__init__(exe, conf, log, port)
        self.trace, self.calls, self.strings = trace, calls, strings

    def command(self):
        size = ["-s", str(self.strings)] if self.strings else []
        return ["strace", "-f", "-y", *size, "-o", self.trace, "-e", f"trace={self.calls}",
                *super().command()]

    def environ(self):
        # LeakSanitizer cannot run under ptrace (it says so, and fails, at exit); the
        # sanitizer build's other reports stay on, and the daemons' untraced tests check leaks
        env = dict(os.environ)
        asan = [env["ASAN_OPTIONS"]] if env.get("ASAN_OPTIONS") else []
        env["ASAN_OPTIONS"] = ":".join(asan + ["detect_leaks=0"])
        return env

    def worker_pids(self):
        if self.proc is None:
            return []
        return [w for master in children(self.proc.pid) for w in children(master)]

    def terminate(self):
        for master in children(self.proc.pid):
            os.kill(master, signal.SIGTERM)

    def stop(self, timeout=30):  # a traced daemon is slow to drain
        super().stop(timeout)


def need_strace():
    """Skips the test program (skip()) unless strace is installed and ptrace is allowed."""
    if shutil.which("strace") is None:
        skip("no strace")
    if subprocess.run(["strace", "-o", "/dev/null", "true"], capture_output=True).returncode:
        skip("ptrace not allowed here")


# mtad's checks of inbound mail, off where a test has no DNS world (they would wait for
# lookups that cannot be answered and add an Authentication-Results header to every message)
NO_MAILAUTH = {"spf": {"verify": "no"}, "dkim": {"verify": "no"}, "dmarc": {"verify": "no"}}


class Mtad(Daemon):
    """The real mtad on free loopback ports, configured by keyword overrides; tmp/heron.conf
    (sections kept in .sections: change them, write_conf(), SIGHUP)."""

    name = "mtad"

    def __init__(self, exe, tmp, directory, mtad_keys=None, tls=True):
        self.tmp = tmp
        self.sub_port, self.subs_port, self.lmtp_port = free_port(), free_port(), free_port()
        super().__init__(exe, os.path.join(tmp, "heron.conf"), os.path.join(tmp, "mtad.log"),
                         free_port())
        self.lmtp_path = os.path.join(tmp, "lmtp.sock")
        keys = {
            "listen": f"{HOST}:{self.port}",
            "submission": f"{HOST}:{self.sub_port}",
            "lmtp": f"{HOST}:{self.lmtp_port},{self.lmtp_path}",
            "hostname": "mx.heron.test",
            "workers": "2",
            "local_domains": DOMAIN,
            "max_message_size": "64k",
            "relay_timeout": "10s",
            "retry_schedule": "1s",
            "command_timeout": "30s",
            # tests run as root in CI, where no heron user exists
            "user": "", "allow_root": "yes",
        }
        sections = {"store": {"path": os.path.join(tmp, "store"), "partitions": "2",
                              "map_size": "16M"},
                    "directory": dict(directory),
                    "log": {"target": "stderr", "level": "info"},
                    # no lookup leaves the machine: a closed loopback port unless a test
                    # gives its own DNS world (scripts/dns, DnsWorld)
                    "dns": {"nameservers": "127.0.0.1@9", "dnssec": "off", "timeout": "1s",
                            "attempts": "1"}}
        # no DNS, so no sender authentication of port 25 mail unless a test turns it on
        # (tests/mtad/test_mailauth.py, with a DNS world)
        sections.update({sec: dict(kv) for sec, kv in NO_MAILAUTH.items()})
        # the workers' control sockets stay in the test's directory
        sections["control"] = {"dir": tmp}
        if tls:
            cert, key = make_cert(tmp)
            sections["tls"] = {"cert": cert, "key": key}
            keys["submissions"] = f"{HOST}:{self.subs_port}"
        keys.update(mtad_keys or {})
        sections["mtad"] = keys
        self.sections = sections
        self.write_conf()

    def write_conf(self):
        write_conf(self.conf, self.sections)

    def set_keys(self, mtad_keys):
        """More [mtad] keys, before start()."""
        self.sections["mtad"].update(mtad_keys)
        self.write_conf()


IMAP_PASSWORD = "s3cret pass"
IMAP_USERS = ["alice", "bob", "carol"]
IMAP_QUOTAS = {"carol": "1M"}
IMAP_FAILURE_MARKS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "worker exited",
                      "killed by signal")


class Imapd(Daemon):
    """The real imapd on a free 127.0.0.1 port in its own temporary directory: a users file
    (IMAP_USERS, password IMAP_PASSWORD, {SHA256}) or a given [directory] (dict or text), a
    fresh store, optional TLS (imap STARTTLS and imaps), extra [imapd] keys (a dict, or
    text put after them as it is). As a context manager it is stopped, its directory removed, and a
    crashed, leaking or sanitizer-flagged worker in its log fails the test.

      with Imapd(imapd_bin) as d: c = d.login('alice') ..."""

    name = "imapd"
    failure_marks = SANITIZER_MARKS + IMAP_FAILURE_MARKS

    def __init__(self, binary, plaintext=True, tls=False, workers=1, directory=None,
                 extra="", deliver=None):
        self.dir = tempfile.mkdtemp(prefix="heron-imapd-")
        super().__init__(binary, os.path.join(self.dir, "heron.conf"),
                         os.path.join(self.dir, "imapd.log"), free_port())
        self.binary = binary
        self.deliver_bin = deliver
        self.tls_port = free_port() if tls else None
        self.store = os.path.join(self.dir, "store")
        self.cert = None
        sections = {"store": {"path": self.store, "partitions": "2", "map_size": "16M"}}
        if directory is None:
            users = os.path.join(self.dir, "users")
            with open(users, "w") as f:
                for u in IMAP_USERS:
                    q = ":" + IMAP_QUOTAS[u] if u in IMAP_QUOTAS else ""
                    f.write(f"{u}:{sha256_hash(IMAP_PASSWORD)}:{u}@{DOMAIN}{q}\n")
            directory = file_directory(users)
        sections["directory"] = directory
        if tls:
            self.cert, key = make_cert(self.dir)
            sections["tls"] = {"cert": self.cert, "key": key}
        imapd = {"listen": f"{HOST}:{self.port}"}
        if tls:
            imapd["listen_tls"] = f"{HOST}:{self.tls_port}"
        imapd["workers"] = str(workers)
        imapd["allow_plaintext_auth"] = "yes" if plaintext else "no"
        imapd["user"], imapd["allow_root"] = "", "yes"  # root in CI, no heron user
        sections["imapd"] = imapd
        if isinstance(extra, str):
            sections["imapd+"] = extra + "\n"  # text: more [imapd] keys, maybe more sections
        else:
            imapd.update(extra)
        sections["log"] = {"level": "debug"}
        sections["control"] = {"dir": self.dir}
        write_conf(self.conf, sections)

    def __enter__(self):
        return self.start(timeout=15)

    def __exit__(self, *exc):
        self.stop(timeout=10)
        text = self.logtext()
        shutil.rmtree(self.dir, ignore_errors=True)
        # a worker that crashed or leaked under the sanitizers is restarted by the master:
        # its report in the log is the only trace, so it fails the test here
        bad = [m for m in self.failure_marks if m in text]
        if exc[0] is not None or bad:
            sys.stderr.write("--- imapd log ---\n" + text[-20000:])
        if bad and exc[0] is None:
            raise AssertionError("imapd log reports: %s" % ", ".join(bad))
        return False

    def connect(self):
        return imaplib.IMAP4(HOST, self.port, timeout=20)

    def login(self, user="alice"):
        c = self.connect()
        typ, _ = c.login(user, IMAP_PASSWORD)
        assert typ == "OK"
        return c

    def raw(self, user="alice", login=True, timeout=20):
        """An ImapRaw session, logged in as user unless login is False, closed when the
        running test ends (after_test)."""
        r = ImapRaw(self.port, timeout=timeout)
        after_test(r.close)
        if login:
            out = r.cmd("L", 'LOGIN %s "%s"' % (user, IMAP_PASSWORD))
            assert out[-1].startswith("L OK"), out
        return r

    def deliver(self, user, message, mailbox=None):
        """Delivers like mtad does, from another process (imap_deliver); returns the UID."""
        args = [self.deliver_bin, self.store, "2", user] + ([mailbox] if mailbox else [])
        out = subprocess.run(args, input=message, stdout=subprocess.PIPE, check=True)
        return int(out.stdout)


class Sink(Daemon):
    """The real sink on free ports (smtp .port, control .control_port) in tmp with its own
    config: the [sink] keys given plus listen and control (or, cli_ports, those two given as
    --listen and --control), other sections (default [log] target = stderr), more args."""

    name = "sink"

    def __init__(self, exe, tmp, sink_keys=None, sections=None, args=(), cli_ports=False):
        self.control_port = free_port()
        port = free_port()
        listen, control = f"{HOST}:{port}", f"{HOST}:{self.control_port}"
        ports = ["--listen", listen, f"--control={control}"] if cli_ports else []
        super().__init__(exe, os.path.join(tmp, "sink.conf"), os.path.join(tmp, "sink.log"),
                         port, ports + list(args))
        keys = {} if cli_ports else {"listen": listen, "control": control}
        keys.update(sink_keys or {})
        sections = dict(sections or {"log": {"target": "stderr"}})
        sections.setdefault("control", {"dir": tmp})
        write_conf(self.conf, {"sink": keys, **sections})

    def start(self, timeout=30.0):
        super().start(timeout)
        wait_port(self.control_port, timeout, self.proc, "sink")
        return self

    def control(self, check=False):
        return SinkControl(self.control_port, check)


def shared_conf(tmp, users, workers=1, partitions=1, map_size="16M", keys=None):
    """mtad and imapd on one store (users file, password = user name, free ports): writes
    tmp/users and tmp/heron.conf, with keys ({section: {key: value}}) added to its sections;
    returns (conf path, smtp port, imap port)."""
    users_file = os.path.join(tmp, "users")
    write_users(users_file, users)
    smtp_port, imap_port = free_port(), free_port()
    conf = os.path.join(tmp, "heron.conf")
    sections = {
        "store": {"path": f"{tmp}/store", "partitions": partitions, "map_size": map_size},
        "directory": file_directory(users_file),
        "mtad": {"listen": f"{HOST}:{smtp_port}", "submission": "", "workers": workers,
                 "local_domains": DOMAIN, "hostname": f"mx.{DOMAIN}",
                 "user": "", "allow_root": "yes"},  # tests run as root in CI, no heron user
        "imapd": {"listen": f"{HOST}:{imap_port}", "workers": workers,
                  "allow_plaintext_auth": "yes", "user": "", "allow_root": "yes"},
        "sieve": {"user": "", "allow_root": "yes"},
        "log": {"target": "stderr", "level": "info"},
        "control": {"dir": tmp},
        **{sec: dict(kv) for sec, kv in NO_MAILAUTH.items()},
    }
    for sec, kv in (keys or {}).items():
        sections.setdefault(sec, {}).update(kv)
    write_conf(conf, sections)
    return conf, smtp_port, imap_port


# ---- slapd (scripts/ldap) and the stack (scripts/stack) ----

def ldap_script(root, *args, timeout=120):
    """Runs scripts/ldap ARGS; raises (with its output) when it fails."""
    r = subprocess.run([sys.executable, os.path.join(root, "scripts", "ldap"), *args],
                       stdin=subprocess.DEVNULL, timeout=timeout, capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"scripts/ldap {' '.join(args)} failed ({r.returncode}):\n"
                           f"{r.stdout or ''}{r.stderr or ''}")
    return r


class Slapd:
    """The private slapd of scripts/ldap in directory path: start() (--users N, --tls, ...),
    stop(), restart(); .env holds ldap.env. As a context manager it always stops slapd."""

    def __init__(self, root, path, *args, users=None):
        self.root, self.path = root, path
        self.args = list(args) + (["--users", str(users)] if users is not None else [])
        self.env = None

    def start(self):
        try:
            ldap_script(self.root, "start", self.path, *self.args, timeout=180)
            self.env = read_env(os.path.join(self.path, "ldap.env"))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, check=False):
        """Stops slapd (scripts/ldap only signals the pid in its own pidfile); a failure
        raises only with check (cleanup paths never raise)."""
        if check:
            ldap_script(self.root, "stop", self.path, timeout=60)
        elif os.path.isdir(self.path):
            subprocess.run([sys.executable, os.path.join(self.root, "scripts", "ldap"), "stop",
                            self.path], stdin=subprocess.DEVNULL, timeout=60,
                           capture_output=True)

    def restart(self):
        ldap_script(self.root, "restart", self.path)

    @property
    def uri(self):
        return self.env["LDAP_URI"]

    @property
    def port(self):
        return int(self.env["LDAP_URI"].rsplit(":", 1)[1].strip("/"))

    def change(self, tool, ldif):
        """ldapmodify or ldapadd (tool) of ldif as the directory's admin; raises on failure."""
        r = subprocess.run([tool, "-x", "-H", self.uri, "-D", self.env["LDAP_ADMIN_DN"],
                            "-y", self.env["LDAP_ADMIN_PASSWORD_FILE"]], input=ldif,
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"{tool} failed ({r.returncode}):\n{r.stdout}{r.stderr}")

    def set_password(self, user, password):
        """userPassword of uid=user replaced by password (cleartext: slapd's bind takes it)."""
        self.change("ldapmodify", f"dn: uid={user},{self.env['LDAP_PEOPLE']}\n"
                    "changetype: modify\nreplace: userPassword\n"
                    f"userPassword: {password}\n")

    def directory(self, **more):
        """[directory] keys for this slapd, admin bind for lookups; more adds or overrides."""
        keys = {"backend": "ldap", "uri": self.env["LDAP_URI"], "base": self.env["LDAP_PEOPLE"],
                "bind_dn": self.env["LDAP_ADMIN_DN"],
                "bind_password_file": self.env["LDAP_ADMIN_PASSWORD_FILE"]}
        keys.update(more)
        return keys

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


# ---- rspamd (a real milter) ----


def end_process(proc, grace=20):
    """Ends a helper server the test started: SIGTERM, then SIGKILL after grace seconds."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)

class Rspamd:
    """rspamd -f (Debian's package) as a milter: its proxy worker with milter = yes scanning
    itself on 127.0.0.1:port, a private configuration under tmp/rspamd (the package's rules,
    a DNS server that is a closed loopback port so nothing leaves the machine, its headers
    added for loopback clients); local: more local.d files {name: text}. stop() ends the
    process it started. tmp must be readable by rspamd's user (chmod 0755)."""

    def __init__(self, tmp, port, local=None):
        self.dir = os.path.join(tmp, "rspamd")
        self.port = port
        self.proc = None
        for d in ("local/local.d", "db", "run", "log"):
            os.makedirs(os.path.join(self.dir, d), exist_ok=True)
        with open(os.path.join(self.dir, "rspamd.conf"), "w") as f:
            f.write('.include "$CONFDIR/common.conf"\n'
                    'options {\n'
                    '  pidfile = "$RUNDIR/rspamd.pid";\n'
                    '  .include "$CONFDIR/options.inc"\n'
                    '  dns { nameserver = ["127.0.0.1:9"]; timeout = 1s; retransmits = 1; }\n'
                    '}\n'
                    'logging { type = "file"; filename = "$LOGDIR/rspamd.log"; '
                    'level = "info"; }\n'
                    'worker "rspamd_proxy" {\n'
                    f'  bind_socket = "127.0.0.1:{port}";\n'
                    '  milter = yes;\n  timeout = 60s;\n  count = 1;\n'
                    '  upstream "local" { default = yes; self_scan = yes; }\n'
                    '}\n')
        with open(os.path.join(self.dir, "local/local.d/milter_headers.conf"), "w") as f:
            # loopback is a "local" network: have the headers added anyway
            f.write('use = ["x-spamd-result", "x-rspamd-server", "x-rspamd-queue-id"];\n'
                    'skip_local = false;\nskip_authenticated = false;\n')
        for name, text in (local or {}).items():
            with open(os.path.join(self.dir, "local/local.d", name), "w") as f:
                f.write(text)
        self.user = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("_rspamd")
                self.user = "_rspamd"
            except KeyError:
                pass
            if self.user is not None:
                for d in ("db", "run", "log"):
                    shutil.chown(os.path.join(self.dir, d), self.user, self.user)

    def start(self):
        args = [shutil.which("rspamd") or "rspamd", "-f", "-c",
                os.path.join(self.dir, "rspamd.conf")]
        if self.user is not None:
            args += ["-u", self.user, "-g", self.user]
        elif os.geteuid() == 0:
            args += ["--insecure"]
        for var, sub in (("LOCAL_CONFDIR", "local"), ("DBDIR", "db"), ("RUNDIR", "run"),
                         ("LOGDIR", "log")):
            args += ["--var", f"{var}={os.path.join(self.dir, sub)}"]
        with open(os.path.join(self.dir, "stdout.log"), "ab") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=out,
                                         stdin=subprocess.DEVNULL)
        # it compiles its rules first: allow a slow, shared machine
        wait_port(self.port, 540, self.proc, "rspamd")

    def stop(self):
        end_process(self.proc)
        self.proc = None

    def logtext(self):
        try:
            with open(os.path.join(self.dir, "log", "rspamd.log"), errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""


class Stack:
    """The real stack of scripts/stack (private slapd, sink, mtad, imapd on free 127.0.0.1
    ports) in a temporary directory, its stack.env in .env; always brought down, checking
    that no process of it is left.

      with Stack(root, build, users=20) as st: st.env["IMAP_PORT"] ..."""

    def __init__(self, root, build, users=20, args=()):
        self.root, self.build = root, build
        self.script = os.path.join(root, "scripts", "stack")
        self.dir = tempfile.mkdtemp(prefix="heron-stack-")
        self.users, self.args = users, list(args)
        self.env = None

    def __enter__(self):
        try:
            r = subprocess.run([sys.executable, self.script, "up", self.dir, "--users",
                                str(self.users), "--build-dir", self.build, "--no-build",
                                *self.args],
                               stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=180)
            if r.returncode != 0:
                raise RuntimeError("scripts/stack up failed:\n" + r.stdout + r.stderr)
            self.env = read_env(os.path.join(self.dir, "stack.env"), shell=True)
        except BaseException:
            self.down()
            raise
        return self

    def pids(self):
        return [int(self.env[k]) for k in ("SLAPD_PID", "SINK_PID", "MTAD_PID", "IMAPD_PID")
                if self.env and self.env.get(k, "").isdigit()]

    def down(self):
        """Stops the stack; raises if any of its processes survives."""
        pids = self.pids()
        r = subprocess.run([sys.executable, self.script, "down", self.dir],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=120)
        left = [p for p in pids if alive(p)] + processes_with(self.dir)
        if r.returncode != 0 or left:
            raise RuntimeError(f"scripts/stack down left {left}: {r.stderr}")

    def __exit__(self, *exc):
        try:
            self.down()
        finally:
            if exc[0] is not None:
                for name in ("mtad", "imapd", "sink"):
                    p = os.path.join(self.dir, "logs", name + ".log")
                    if os.path.exists(p):
                        with open(p, errors="replace") as f:
                            sys.stderr.write(f"--- {name}.log (end) ---\n" + f.read()[-3000:])
            shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def port(self, key):
        return int(self.env[key])

    def sink(self, req):
        """One request to the sink's control port; returns the reply lines as JSON objects."""
        ctl = SinkControl(self.port("SINK_CONTROL_PORT"))
        try:
            return ctl.lines(req)
        finally:
            ctl.close()


# ---- the store read back ----

class Store:
    """The store as tests/mtad's store_peek reads it."""

    def __init__(self, peek, conf):
        self.peek, self.conf = peek, conf

    def inbox(self, user):
        r = subprocess.run([self.peek, self.conf, "inbox", user], capture_output=True,
                           text=True)
        if r.returncode != 0:
            return []
        return [line.split() for line in r.stdout.splitlines()]

    def body(self, user, uid):
        return subprocess.run([self.peek, self.conf, "body", user, str(uid)],
                              capture_output=True, check=True).stdout

    def queue(self):
        return subprocess.run([self.peek, self.conf, "queue"], capture_output=True,
                              text=True, check=True).stdout.splitlines()


def mtad_records_swept(mtad):
    """mtad's queue runner drops at worker 0's start the local delivery records (and the Sieve
    redirect and reply records) of finished recipients: restarted up to three times, each
    start must find every record it reads finished, and the last none left."""
    sweep = r"queue: (\d+) local delivery records, (\d+) of finished entries dropped"
    seen = []
    for _ in range(3):
        mtad.stop()
        mark = len(mtad.logtext())
        mtad.start()
        line = wait_for(lambda: re.search(sweep, mtad.logtext()[mark:]), what="the sweep")
        assert line.group(1) == line.group(2), line.group(0)
        seen.append(int(line.group(1)))
        if seen[-1] == 0:
            break
    assert seen[-1] == 0, seen


def mailctl_verify(mailctl, conf):
    """`mailctl --json verify` must exit 0 and find the store clean; returns its JSON."""
    r = subprocess.run([mailctl, "-c", conf, "--json", "verify"], capture_output=True,
                       text=True)
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    v = json.loads(r.stdout)
    assert v["status"] == "clean", v
    return v


# ---- peers and clients ----

def serve(handler, port=0):
    """A threaded TCP server with handler on 127.0.0.1 (port 0: bound and held at once),
    serving in a daemon thread; shutdown() and server_close() it."""
    srv = ThreadingServer((HOST, port), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


class ThreadingServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class RelayTarget(ThreadingServer):
    """A small SMTP server that records what it receives. Recipients whose local part starts
    with "temp" get 451 on their first attempt and 250 later; "reject" ones get 550; "defer"
    ones always 451."""

    def __init__(self, tls=None, port=None, host=HOST, greeting="220 relay.test ESMTP test",
                 mail_reply="250 2.1.0 ok", requiretls=False):
        """tls: (cert, key) to offer STARTTLS; port: a given one (default: a free one);
        host: the loopback address to listen on (a remote MX of a DNS world); greeting and
        mail_reply: what it answers (a 421 greeting closes the connection); requiretls:
        offer REQUIRETLS once under TLS (the MAIL lines are kept in mail_lines)."""
        self.requiretls = requiretls
        self.mail_lines = []
        self.port = port or free_port()
        self.greeting, self.mail_reply = greeting, mail_reply
        self.connections = 0  # accepted so far
        self.ssl = None
        if tls is not None:
            import ssl
            self.ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ssl.load_cert_chain(*tls)
        self.tls_messages = 0  # messages received over TLS
        self.messages = []     # (mail_from, [rcpts], data bytes)
        self.attempts = {}
        self.data_delay = 0.0  # seconds before the answer to the final dot
        self.active = 0        # connections open now
        self.max_active = 0    # the most open at once
        self.lock = threading.Lock()
        super().__init__((host, self.port), RelayHandler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.shutdown()
        self.server_close()

    def with_subject(self, subject):
        """The messages received whose Subject: header contains subject."""
        return [m for m in self.messages if ("Subject: " + subject).encode() in m[2]]


def send_subject(port, sender, rcpt, subject):
    """One message to rcpt through the SMTP server on 127.0.0.1:port, with this Subject."""
    import smtplib
    with smtplib.SMTP(HOST, port, timeout=30) as c:
        c.sendmail(sender, [rcpt], f"Subject: {subject}\r\n\r\nbody of {subject}\r\n")


def close_peers(targets, world=None):
    """Closes in-test servers and stops a DnsWorld (None: not started)."""
    for t in targets:
        t.close()
    if world is not None:
        world.stop()


class RelayHandler(socketserver.StreamRequestHandler):
    def send(self, line):
        self.wfile.write(line.encode() + b"\r\n")

    def handle(self):
        srv = self.server
        with srv.lock:
            srv.active += 1
            srv.connections += 1
            srv.max_active = max(srv.max_active, srv.active)
        try:
            self.dialogue()
        except OSError:
            pass  # the client went away (kill -9 tests): nothing was accepted
        finally:
            with srv.lock:
                srv.active -= 1

    def dialogue(self):
        srv = self.server
        self.send(srv.greeting)
        if not srv.greeting.startswith("220"):
            return
        mail, rcpts, tls = None, [], False
        while True:
            line = self.rfile.readline(4096)
            if not line:
                return
            cmd = line.decode(errors="replace").strip()
            up = cmd.upper()
            if up == "STARTTLS" and srv.ssl is not None and not tls:
                self.send("220 2.0.0 go ahead")
                self.wfile.flush()
                self.request = srv.ssl.wrap_socket(self.request, server_side=True)
                self.rfile = self.request.makefile("rb")
                self.wfile = self.request.makefile("wb", buffering=0)
                tls = True
            elif up.startswith("EHLO"):
                self.send("250-relay.test")
                if srv.ssl is not None and not tls:
                    self.send("250-STARTTLS")
                if srv.requiretls and tls:
                    self.send("250-REQUIRETLS")
                self.send("250-PIPELINING")
                self.send("250-DSN")
                self.send("250 8BITMIME")
            elif up.startswith("MAIL FROM:"):
                mail, rcpts = cmd[10:].split(" ")[0].strip("<>"), []
                srv.mail_lines.append(cmd)
                self.send(srv.mail_reply)
                if not srv.mail_reply.startswith("2"):
                    mail = None
            elif up.startswith("RCPT TO:"):
                addr = cmd[8:].split(" ")[0].strip("<>")
                with srv.lock:
                    n = srv.attempts[addr] = srv.attempts.get(addr, 0) + 1
                if addr.startswith("reject"):
                    self.send("550 5.1.1 no such user here")
                elif addr.startswith("defer") or (addr.startswith("temp") and n == 1):
                    self.send("451 4.3.0 try again later")
                else:
                    rcpts.append(addr)
                    self.send("250 2.1.5 ok")
            elif up == "DATA":
                if not rcpts:
                    self.send("554 5.5.1 no valid recipients")
                    continue
                self.send("354 go ahead")
                data = b""
                while True:
                    l = self.rfile.readline(100000)
                    if not l:
                        return  # cut off before the final dot: not accepted
                    if l == b".\r\n":
                        break
                    data += l[1:] if l.startswith(b".") else l
                time.sleep(srv.data_delay)
                with srv.lock:
                    srv.messages.append((mail, rcpts, data))
                    srv.tls_messages += tls
                self.send("250 2.0.0 queued")
            elif up == "RSET" or up == "NOOP":
                self.send("250 2.0.0 ok")
            elif up == "QUIT":
                self.send("221 2.0.0 bye")
                return
            else:
                self.send("500 5.5.2 what")


class DnsWorld:
    """The private DNS world of scripts/dns (nsd + a validating unbound) with the zones of
    spec (see scripts/dns); stopped by stop() or on leaving the with block, also on failure."""

    def __init__(self, root, tmp, spec):
        self.script = os.path.join(root, "scripts", "dns")
        self.dir = os.path.join(tmp, "dns")
        self.spec_path = os.path.join(tmp, "dns-spec.json")
        self.write(spec)
        # ports reserved like every other port of the tests (free for TCP; nsd and unbound
        # bind UDP on the same numbers)
        subprocess.run([self.script, "start", self.dir, "--zones", self.spec_path,
                        "--port", str(free_port()), "--resolver-port", str(free_port())],
                       check=True, timeout=120)
        self.env = read_env(os.path.join(self.dir, "dns.env"))

    def write(self, spec):
        with open(self.spec_path, "w") as f:
            json.dump(spec, f)

    def update(self, spec):
        """New records for the same zones: re-signed, reloaded, caches flushed."""
        self.write(spec)
        subprocess.run([self.script, "update", self.dir, "--zones", self.spec_path],
                       check=True, timeout=120)

    def conf(self, dnssec="validate"):
        """[dns] keys for a daemon that resolves through this world."""
        return {"nameservers": self.env["DNS_RESOLVER"], "dnssec": dnssec,
                "trust_anchor_file": self.env["DNS_ANCHORS"], "timeout": "2s",
                "attempts": "2"}

    def stop(self):
        subprocess.run([self.script, "stop", self.dir], timeout=60)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class SinkControl:
    """The sink's JSON control port, one connection. check: req() asserts "ok": true."""

    def __init__(self, port, check=False):
        self.sock = socket.create_connection((HOST, port), timeout=10)
        self.f = self.sock.makefile("rwb")
        self.check = check

    def raw(self, line):
        self.f.write(line + b"\n")
        self.f.flush()
        return json.loads(self.f.readline())

    def req(self, **kw):
        r = self.raw(json.dumps(kw).encode())
        if self.check:
            assert r.get("ok") is True, r
        return r

    def lines(self, req):
        """Every reply line of req up to and including the one with "ok", as JSON."""
        self.f.write(json.dumps(req).encode() + b"\n")
        self.f.flush()
        out = []
        while True:
            line = self.f.readline(1 << 20)
            if not line:
                raise AssertionError(f"sink control closed during {req}")
            obj = json.loads(line)
            out.append(obj)
            if "ok" in obj:
                return out

    def records(self, since=0):
        """(records after since, the next cursor); the request must succeed."""
        *recs, end = self.lines({"cmd": "records", "since": since})
        assert end["ok"] is True, end
        return recs, end["next"]

    def ids(self):
        """Message-IDs of every record so far (one per accepted message)."""
        return [r["id"] for r in self.records(0)[0]]

    def close(self):
        self.f.close()
        self.sock.close()


def smtp_connect(port, timeout=20):
    """An smtplib client whose greeting must be 220."""
    import smtplib
    c = smtplib.SMTP(timeout=timeout)
    code, text = c.connect(HOST, port)
    assert code == 220, (code, text)
    return c


class SmtpRaw:
    """A raw SMTP connection for pipelining and protocol abuse (a port, or a unix socket
    path); .greeting is the first reply."""

    def __init__(self, port, timeout=15):
        if isinstance(port, str):
            self.s = socket.socket(socket.AF_UNIX)
            self.s.settimeout(timeout)
            self.s.connect(port)
        else:
            self.s = socket.create_connection((HOST, port), timeout=timeout)
        self.f = self.s.makefile("rb")
        self.greeting = self.reply()

    def send(self, data):
        self.s.sendall(data if isinstance(data, bytes) else data.encode())

    def reply(self):
        """One complete (possibly multi-line) reply as (code, text)."""
        lines = []
        while True:
            line = self.f.readline(4096)
            if not line:
                raise EOFError("connection closed")
            lines.append(line.decode(errors="replace").rstrip("\r\n"))
            if len(line) < 4 or line[3:4] != b"-":
                break
        return int(lines[-1][:3]), "\n".join(lines)

    def replies(self, n):
        return [self.reply() for _ in range(n)]

    def close(self):
        self.s.close()


def without_objectid(lines):
    """IMAP response lines without OBJECTID's MAILBOXID (RFC 8474: a CREATE's response code,
    SELECT's untagged OK), which name store ids a dialogue cannot know."""
    out = []
    for line in lines:
        if re.match(r"\* OK \[MAILBOXID \([A-Za-z0-9_-]+\)\] Ok$", line):
            continue
        out.append(re.sub(r" OK \[MAILBOXID \([A-Za-z0-9_-]+\)\] ", " OK ", line, count=1))
    return out


class ImapRaw:
    """A line-level IMAP client for exact protocol checks (imaplib hides the wire)."""

    def __init__(self, port, tls_ctx=None, timeout=20):
        self.s = socket.create_connection((HOST, port), timeout=timeout)
        if tls_ctx is not None:
            self.s = tls_ctx.wrap_socket(self.s, server_hostname=HOST)
        self.buf = b""
        self.greeting = self.line()

    def send(self, data):
        if isinstance(data, str):
            data = data.encode()
        self.s.sendall(data)

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("connection closed; have %r" % self.buf)
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line.decode("utf-8", "replace")

    def read(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def until_tag(self, tag):
        """Lines up to and including the tagged one (literals inlined as text)."""
        out = []
        while True:
            line = self.line()
            while line.endswith("}") and "{" in line:
                n = int(line[line.rindex("{") + 1:-1])
                line = line + "\r\n" + self.read(n).decode("utf-8", "replace") + self.line()
            out.append(line)
            if line.startswith(tag + " "):
                return out

    def cmd(self, tag, text):
        self.send("%s %s\r\n" % (tag, text))
        return self.until_tag(tag)

    def append(self, msg, mailbox="INBOX", flags="", date='"07-Feb-1994 21:52:25 -0800"'):
        """APPENDs msg (bytes, a non-synchronizing literal); the new message's UID."""
        self.send(("A APPEND %s %s %s {%d+}\r\n" % (mailbox, flags, date, len(msg))).encode() +
                  msg + b"\r\n")
        out = self.until_tag("A")
        assert out[-1].startswith("A OK [APPENDUID "), out
        return int(out[-1].split()[4].rstrip("]"))

    def close(self):
        self.s.close()


# ---- SCRAM (RFC 5802) client side, for what GNU gsasl cannot be made to do ----

def gsasl_mkpasswd(password, iterations=4096):
    """A {SCRAM-SHA-256} secret of password made by GNU gsasl (not by Heron)."""
    r = subprocess.run(["gsasl", "--mkpasswd", "--mechanism", "SCRAM-SHA-256", "--password",
                        password, "--iteration-count", str(iterations)],
                       capture_output=True, text=True, timeout=30, check=True)
    if not r.stdout.startswith("{SCRAM-SHA-256}%d," % iterations):
        raise RuntimeError("gsasl --mkpasswd: " + r.stdout + r.stderr)
    return r.stdout.strip()


def tls_server_end_point(sock):
    """tls-server-end-point data (RFC 5929 4.1) of a TLS socket's peer: the certificate's hash
    with its signature's digest, SHA-256 for MD5/SHA-1; the tests' certificates are
    ECDSA-SHA256."""
    return hashlib.sha256(sock.getpeercert(binary_form=True)).digest()


class ScramClient:
    """The client of SCRAM-SHA-256 written from RFC 5802 (hashlib/hmac): first() and
    final(server_first) give the base64 messages, final_ok(server_final) checks v=. gs2 and
    cbdata make the channel binding; tamper flips a bit of it."""

    def __init__(self, user, password, gs2="n,,", cbdata=b""):
        import hmac
        self.hmac = hmac
        self.user, self.password, self.gs2, self.cbdata = user, password, gs2, cbdata
        self.cnonce = base64.b64encode(os.urandom(18)).decode()
        self.bare = "n=%s,r=%s" % (user, self.cnonce)
        self.want_v = None

    def first(self):
        return base64.b64encode((self.gs2 + self.bare).encode()).decode()

    def final(self, server_first_b64, tamper=False):
        sfirst = base64.b64decode(server_first_b64).decode()
        attrs = dict(kv.split("=", 1) for kv in sfirst.split(","))
        assert attrs["r"].startswith(self.cnonce), sfirst
        sp = hashlib.pbkdf2_hmac("sha256", self.password.encode(),
                                 base64.b64decode(attrs["s"]), int(attrs["i"]))
        mac = lambda k, m: self.hmac.new(k, m, "sha256").digest()  # noqa: E731
        ck = mac(sp, b"Client Key")
        cb = bytearray(self.gs2.encode() + self.cbdata)
        if tamper:
            cb[-1] ^= 1
        wp = "c=%s,r=%s" % (base64.b64encode(bytes(cb)).decode(), attrs["r"])
        am = ("%s,%s,%s" % (self.bare, sfirst, wp)).encode()
        proof = bytes(a ^ b for a, b in zip(ck, mac(hashlib.sha256(ck).digest(), am)))
        self.want_v = "v=" + base64.b64encode(mac(mac(sp, b"Server Key"), am)).decode()
        msg = "%s,p=%s" % (wp, base64.b64encode(proof).decode())
        return base64.b64encode(msg.encode()).decode()

    def final_ok(self, server_final_b64):
        return base64.b64decode(server_final_b64).decode() == self.want_v


# ---- running a test program ----

SKIP = 77  # the exit status meson counts as a skipped test


def skip(reason):
    """Ends the test program as skipped (exit 77, "SKIP: reason" printed): the machine lacks
    what the test needs. Called before the program starts anything."""
    print(f"SKIP: {reason}", flush=True)
    sys.exit(SKIP)


_after_test = []  # (fn, args) registered by the running test


def after_test(fn, *args):
    """Calls fn(*args) when the running test ends, passed or failed (the last registered
    first): a session to close, a directory to remove. An exception in it fails the test."""
    _after_test.append((fn, args))


def _run_after_test():
    first = None
    while _after_test:
        fn, args = _after_test.pop()
        try:
            fn(*args)
        except Exception as e:  # the others still run; the first error fails the test
            first = first or e
    if first is not None:
        raise first


def run_tests(tests, daemon=None):
    """Runs each test function, reporting every one ("ok NAME" / "FAIL NAME" with its
    traceback); 1 when any failed, else 0. What a test gave to after_test runs after it."""
    failed = 0
    for t in tests:
        name = t.__name__
        try:
            try:
                t()
            finally:
                _run_after_test()
            print(f"ok   {name}", flush=True)
        except Exception as e:  # report every test, fail at the end
            traceback.print_exc()
            print(f"FAIL {name}: {e}", flush=True)
            failed += 1
    return 1 if failed else 0


@contextlib.contextmanager
def assert_raises(exc, msg=None):
    """with assert_raises(EOFError): ... fails unless the block raises exc (or a subclass);
    the exception is the context's value (.exception)."""
    caught = types.SimpleNamespace(exception=None)
    try:
        yield caught
    except exc as e:
        caught.exception = e
        return
    raise AssertionError(msg if msg is not None else f"{exc.__name__} not raised")


# Comparisons for test functions: each evaluates its arguments once and shows both sides.
def assert_eq(got, want, msg=None):
    assert got == want, msg if msg is not None else (got, want)


def assert_ne(got, other, msg=None):
    assert got != other, msg if msg is not None else got


def assert_in(x, container, msg=None):
    assert x in container, msg if msg is not None else (x, container)


def assert_not_in(x, container, msg=None):
    assert x not in container, msg if msg is not None else (x, container)


def assert_re(text, pattern, msg=None):
    assert re.search(pattern, text), msg if msg is not None else (text, pattern)


def assert_lt(a, b, msg=None):
    assert a < b, msg if msg is not None else (a, b)


def assert_le(a, b, msg=None):
    assert a <= b, msg if msg is not None else (a, b)


def assert_gt(a, b, msg=None):
    assert a > b, msg if msg is not None else (a, b)


def assert_ge(a, b, msg=None):
    assert a >= b, msg if msg is not None else (a, b)


def run_suite(daemon, tests, tmp, cleanup=()):
    """Starts daemon and runs tests, with the epilogue of run_main. The exit status."""
    def body():
        daemon.start()
        return run_tests(tests)
    return run_main(body, tmp, [daemon], cleanup=cleanup, tail=20000)


def run_main(body, tmp, daemons, cleanup=(), tail=6000, note=""):
    """A test program's body and its epilogue, the one copy: body() returns the status (None:
    0); an exception in it is printed with its traceback and fails the program. Then the
    daemons (started or not) are always stopped and each of cleanup called; a sanitizer
    report in a daemon's log fails the program too. On failure the daemons' log tails are
    printed and tmp is kept (said, with note), else removed. The exit status."""
    rc = 1
    try:
        rc = body() or 0
    except Exception:  # reported here, and the program fails
        traceback.print_exc()
    finally:
        for d in daemons:
            d.stop()
        for fn in cleanup:
            fn()
    for d in daemons:
        rc |= check_sanitizers(d)
    if rc:
        for d in daemons:
            sys.stdout.write(d.logtext()[-tail:])
        print(f"kept {tmp}{note}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return rc
