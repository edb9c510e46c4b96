"""mtadlib.py — shared pieces of mtad's end-to-end tests: free ports, a TLS certificate made at
test time, a users file, heron.conf, starting and stopping the real mtad by pid, reading the
store back (store_peek), and a small relay-target SMTP server with scripted answers."""
import base64
import hashlib
import os
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time

DOMAIN = "heron.test"


def free_port():
    """A free port below the ephemeral range: a port the kernel hands out (bind to 0) may be
    taken as the local port of some outgoing connection before mtad binds it again (the
    crash test restarts mtad on the same ports many times)."""
    import random
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(200):
        port = random.randint(10000, low - 1) if low > 11000 else 0
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("no free port")


def wait_port(port, timeout=20.0):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def make_cert(d):
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def ssha(password):
    salt = os.urandom(8)
    digest = hashlib.sha1(password.encode() + salt).digest()
    return "{SSHA}" + base64.b64encode(digest + salt).decode()


def write_users(path, users, quotas=None):
    """users: names; each gets name@DOMAIN, password = name; quotas: name -> "1k"."""
    quotas = quotas or {}
    with open(path, "w") as f:
        for u in users:
            q = f":{quotas[u]}" if u in quotas else ""
            f.write(f"{u}:{ssha(u)}:{u}@{DOMAIN},alias.{u}@{DOMAIN}{q}\n")


class Mtad:
    """The real mtad on free loopback ports, configured by keyword overrides."""

    def __init__(self, exe, tmp, directory, mtad_keys=None, tls=True):
        self.exe, self.tmp = exe, tmp
        self.port, self.sub_port = free_port(), free_port()
        self.subs_port, self.lmtp_port = free_port(), free_port()
        self.conf = os.path.join(tmp, "heron.conf")
        self.lmtp_path = os.path.join(tmp, "lmtp.sock")
        self.log = os.path.join(tmp, "mtad.log")
        self.proc = None
        keys = {
            "listen": f"127.0.0.1:{self.port}",
            "submission": f"127.0.0.1:{self.sub_port}",
            "lmtp": f"127.0.0.1:{self.lmtp_port},{os.path.join(tmp, 'lmtp.sock')}",
            "hostname": "mx.heron.test",
            "workers": "2",
            "local_domains": DOMAIN,
            "max_message_size": "64k",
            "relay_timeout": "10s",
            "retry_schedule": "1s",
            "command_timeout": "30s",
        }
        sections = {"store": {"path": os.path.join(tmp, "store"), "partitions": "2",
                              "map_size": "16M"},
                    "directory": dict(directory),
                    "log": {"target": "stderr", "level": "info"}}
        if tls:
            cert, key = make_cert(tmp)
            sections["tls"] = {"cert": cert, "key": key}
            keys["submissions"] = f"127.0.0.1:{self.subs_port}"
        keys.update(mtad_keys or {})
        sections["mtad"] = keys
        self.sections = sections
        self.write_conf()

    def write_conf(self):
        with open(self.conf, "w") as f:
            for sec, kv in self.sections.items():
                f.write(f"[{sec}]\n")
                for k, v in kv.items():
                    f.write(f"{k} = {v}\n")

    def set_keys(self, mtad_keys):
        """More [mtad] keys, before start()."""
        self.sections["mtad"].update(mtad_keys)
        self.write_conf()

    def start(self):
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([self.exe, "-c", self.conf, "-f"], stdout=logf,
                                     stderr=logf, stdin=subprocess.DEVNULL)
        logf.close()
        wait_port(self.port)
        return self

    def worker_pids(self):
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True,
                             text=True).stdout
        return [int(p) for p in out.split()]

    def kill9(self):
        """kill -9 of the workers and the master (workers first: none is restarted)."""
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

    def stop(self):
        if self.proc is None:
            return
        pids = self.worker_pids()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc = None

    def sanitizer_reports(self):
        """Lines of AddressSanitizer/UBSan/LeakSanitizer reports in the log (sanitizer
        builds write them to mtad's stderr, which is the log)."""
        return [l for l in self.logtext().splitlines()
                if "Sanitizer" in l or "runtime error:" in l]

    def logtext(self):
        with open(self.log, errors="replace") as f:
            return f.read()


class Store:
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


def wait_for(pred, timeout=30.0, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class RelayTarget(socketserver.ThreadingTCPServer):
    """A small SMTP server that records what it receives. Recipients whose local part starts
    with "temp" get 451 on their first attempt and 250 later; "reject" ones get 550; "defer"
    ones always 451."""
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, tls=None, port=None):
        """tls: (cert, key) to offer STARTTLS; port: a given one (default: a free one)."""
        self.port = port or free_port()
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
        super().__init__(("127.0.0.1", self.port), RelayHandler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.shutdown()
        self.server_close()


class RelayHandler(socketserver.StreamRequestHandler):
    def send(self, line):
        self.wfile.write(line.encode() + b"\r\n")

    def handle(self):
        srv = self.server
        with srv.lock:
            srv.active += 1
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
        self.send("220 relay.test ESMTP test")
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
                self.send("250-PIPELINING")
                self.send("250-DSN")
                self.send("250 8BITMIME")
            elif up.startswith("MAIL FROM:"):
                mail, rcpts = cmd[10:].split(" ")[0].strip("<>"), []
                self.send("250 2.1.0 ok")
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


def run_tests(tests, mtad=None):
    failed = 0
    for t in tests:
        name = t.__name__
        try:
            t()
            print(f"ok   {name}", flush=True)
        except Exception as e:  # report every test, fail at the end
            import traceback
            traceback.print_exc()
            print(f"FAIL {name}: {e}", flush=True)
            failed += 1
    return 1 if failed else 0


def run_suite(mtad, tests, tmp, cleanup=()):
    """Starts mtad, runs tests, then always stops mtad and calls each of cleanup; fails on a
    sanitizer report too, prints the log's tail on failure, removes tmp. The exit status."""
    import shutil
    rc = 1
    try:
        mtad.start()
        rc = run_tests(tests)
    finally:
        mtad.stop()
        for fn in cleanup:
            fn()
    rc |= check_sanitizers(mtad)
    if rc:
        sys.stdout.write(mtad.logtext()[-20000:])
    shutil.rmtree(tmp, ignore_errors=True)
    return rc


def check_sanitizers(mtad):
    """After mtad stopped: 1 (and the reports printed) when a sanitizer complained."""
    reports = mtad.sanitizer_reports()
    for line in reports[:50]:
        print(line)
    return 1 if reports else 0
