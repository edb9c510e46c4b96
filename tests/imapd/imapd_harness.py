"""imapd_harness — starts the real imapd on a free 127.0.0.1 port with a users file (or a given
[directory] section), a fresh store and optional TLS, for imaplib tests; always stopped by pid.

Usage in a test:  with Imapd(imapd_bin) as d: c = d.login('alice') ..."""
import base64
import hashlib
import imaplib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PASSWORD = "s3cret pass"
USERS = ["alice", "bob", "carol"]
QUOTAS = {"carol": "1M"}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def sha256_hash(pw):
    return "{SHA256}" + base64.b64encode(hashlib.sha256(pw.encode()).digest()).decode()


class Imapd:
    def __init__(self, binary, plaintext=True, tls=False, workers=1, directory=None,
                 extra="", deliver=None):
        self.binary = binary
        self.deliver_bin = deliver
        self.dir = tempfile.mkdtemp(prefix="heron-imapd-")
        self.port = free_port()
        self.tls_port = free_port() if tls else None
        self.proc = None
        users = os.path.join(self.dir, "users")
        with open(users, "w") as f:
            for u in USERS:
                f.write("%s:%s:%s@heron.test%s\n" % (u, sha256_hash(PASSWORD), u,
                                                       ":" + QUOTAS[u] if u in QUOTAS else ""))
        self.store = os.path.join(self.dir, "store")
        tls_conf = ""
        self.cert = None
        if tls:
            self.cert = os.path.join(self.dir, "cert.pem")
            key = os.path.join(self.dir, "key.pem")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj",
                            "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", key, "-out", self.cert],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            tls_conf = "[tls]\ncert = %s\nkey = %s\n" % (self.cert, key)
        if directory is None:
            directory = "[directory]\nbackend = file\nusers_file = %s\n" % users
        conf = os.path.join(self.dir, "heron.conf")
        with open(conf, "w") as f:
            f.write("[store]\npath = %s\npartitions = 2\nmap_size = 16M\n\n" % self.store)
            f.write(directory + "\n")
            f.write(tls_conf + "\n")
            f.write("[imapd]\nlisten = 127.0.0.1:%d\n" % self.port)
            if tls:
                f.write("listen_tls = 127.0.0.1:%d\n" % self.tls_port)
            f.write("workers = %d\nallow_plaintext_auth = %s\n" %
                    (workers, "yes" if plaintext else "no"))
            f.write(extra + "\n")
            f.write("[log]\nlevel = debug\n")
        self.conf = conf

    def __enter__(self):
        self.log = open(os.path.join(self.dir, "imapd.log"), "w")
        self.proc = subprocess.Popen([self.binary, "-c", self.conf, "-f"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 15
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("imapd exited: " + self.logtext())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("imapd did not listen: " + self.logtext())

    def logtext(self):
        self.log.flush()
        with open(os.path.join(self.dir, "imapd.log")) as f:
            return f.read()[-4000:]

    def __exit__(self, *exc):
        self.stop()
        self.log.flush()
        with open(os.path.join(self.dir, "imapd.log"), errors="replace") as f:
            text = f.read()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        # a worker that crashed or leaked under the sanitizers is restarted by the master:
        # its report in the log is the only trace, so it fails the test here
        bad = [m for m in ("AddressSanitizer", "LeakSanitizer", "runtime error:",
                           "worker exited", "killed by signal") if m in text]
        if exc[0] is not None or bad:
            sys.stderr.write("--- imapd log ---\n" + text[-20000:])
        if bad and exc[0] is None:
            raise AssertionError("imapd log reports: %s" % ", ".join(bad))
        return False

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def connect(self):
        c = imaplib.IMAP4("127.0.0.1", self.port, timeout=20)
        return c

    def login(self, user="alice"):
        c = self.connect()
        typ, _ = c.login(user, PASSWORD)
        assert typ == "OK"
        return c

    def deliver(self, user, message, mailbox=None):
        """Delivers like mtad does, from another process; returns the UID."""
        args = [self.deliver_bin, self.store, "2", user] + ([mailbox] if mailbox else [])
        out = subprocess.run(args, input=message, stdout=subprocess.PIPE, check=True)
        return int(out.stdout)


class Raw:
    """A line-level client for exact protocol checks (imaplib hides the wire)."""

    def __init__(self, port, tls_ctx=None, timeout=20):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        if tls_ctx is not None:
            self.s = tls_ctx.wrap_socket(self.s, server_hostname="127.0.0.1")
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

    def close(self):
        self.s.close()
