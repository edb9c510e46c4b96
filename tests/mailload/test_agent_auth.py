#!/usr/bin/env python3
"""test_agent_auth.py — the manager–agent control port is authenticated (mailload/ctlauth.h):
a remote agent started with --secret-file greets with a challenge and refuses every command
until the manager answers it with HMAC-SHA256 over the shared secret; a wrong answer, a
command sent before answering, and a manager holding a wrong secret file are all refused and
the connection closed; the right answer is accepted and the agent proves the secret back. An
agent without a secret file, or with one others can read, does not start.

  test_agent_auth.py PATH/TO/mailload"""
import hashlib
import hmac
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time

EXE = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="heron-ml-auth-")
GOOD = b"correct horse battery staple 0123456789"


def write_secret(name, data, mode=0o600):
    path = os.path.join(TMP, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    os.write(fd, data + b"\n")
    os.close(fd)
    os.chmod(path, mode)
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mac(secret, role, nonce):
    return hmac.new(secret, f"{role} {nonce}".encode(), hashlib.sha256).hexdigest()


class Conn:
    def __init__(self, port):
        for _ in range(100):
            try:
                self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise AssertionError("agent does not listen")
        self.f = self.s.makefile("rb")

    def read(self):
        line = self.f.readline(1 << 20)
        return json.loads(line) if line else None

    def send(self, obj):
        self.s.sendall((json.dumps(obj) + "\n").encode())

    def close(self):
        self.f.close()
        self.s.close()


def main():
    port = free_port()
    good = write_secret("good", GOOD)
    bad = write_secret("bad", b"a different secret, also long enough")
    agent = subprocess.Popen([EXE, "agent", "--listen", f"127.0.0.1:{port}",
                              "--secret-file", good],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    failed = 0

    def check(name, fn):
        nonlocal failed
        try:
            fn()
            print(f"ok   {name}", flush=True)
        except Exception as e:  # report every check, fail at the end
            import traceback
            traceback.print_exc()
            print(f"FAIL {name}: {e}", flush=True)
            failed += 1

    def test_command_before_auth_refused():
        c = Conn(port)
        hello = c.read()
        assert hello["hello"] == "mailload-agent" and len(hello["nonce"]) == 32, hello
        c.send({"cmd": "status"})
        r = c.read()
        assert r == {"ok": False, "error": "authentication failed"}, r
        assert c.read() is None, "connection left open"
        c.close()

    def test_wrong_mac_refused():
        c = Conn(port)
        hello = c.read()
        nonce = secrets.token_hex(16)
        c.send({"cmd": "auth", "nonce": nonce,
                "mac": mac(b"not the secret at all, sorry", "manager", hello["nonce"])})
        r = c.read()
        assert r["ok"] is False, r
        assert c.read() is None, "connection left open"
        c.close()

    def test_replayed_mac_refused():
        # an answer to an earlier challenge is worthless: each connection has a new nonce
        c1 = Conn(port)
        n1 = c1.read()["nonce"]
        c1.close()
        c = Conn(port)
        hello = c.read()
        assert hello["nonce"] != n1
        c.send({"cmd": "auth", "nonce": secrets.token_hex(16), "mac": mac(GOOD, "manager", n1)})
        assert c.read()["ok"] is False
        c.close()

    def test_right_mac_accepted_and_agent_proves_secret():
        c = Conn(port)
        hello = c.read()
        nonce = secrets.token_hex(16)
        c.send({"cmd": "auth", "nonce": nonce, "mac": mac(GOOD, "manager", hello["nonce"])})
        r = c.read()
        assert r["ok"] is True, r
        assert hmac.compare_digest(r["mac"], mac(GOOD, "agent", nonce)), r
        c.send({"cmd": "status"})
        st = c.read()
        assert st["ok"] is True and st["phase"] == "idle", st
        c.send({"cmd": "quit"})
        assert c.read()["ok"] is True
        c.close()

    def test_manager_with_wrong_secret_refused():
        r = subprocess.run([EXE, "run", "--rate", "1", "--phases", "1/1/1", "--load-points",
                            "100", "--agents", f"127.0.0.1:{port}", "--secret-file", bad,
                            "--report", os.path.join(TMP, "report"), "-q"],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2, (r.returncode, r.stderr)
        assert "refused our secret" in r.stderr, r.stderr
        assert not os.path.exists(os.path.join(TMP, "report", "report.json"))

    def test_remote_agents_need_a_secret():
        r = subprocess.run([EXE, "run", "--rate", "1", "--agents", f"127.0.0.1:{port}",
                            "--report", os.path.join(TMP, "report2"), "-q"],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2 and "--secret-file" in r.stderr, (r.returncode, r.stderr)

    def test_agent_needs_a_private_secret_file():
        p2 = free_port()
        r = subprocess.run([EXE, "agent", "--listen", f"127.0.0.1:{p2}"],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and "--secret-file" in r.stderr, r.stderr
        loose = write_secret("loose", GOOD, 0o644)
        r = subprocess.run([EXE, "agent", "--listen", f"127.0.0.1:{p2}",
                            "--secret-file", loose], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 2 and "readable by others" in r.stderr, r.stderr
        short = write_secret("short", b"tooshort")
        r = subprocess.run([EXE, "agent", "--listen", f"127.0.0.1:{p2}",
                            "--secret-file", short], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 2 and "shorter" in r.stderr, r.stderr

    try:
        for t in (test_command_before_auth_refused, test_wrong_mac_refused,
                  test_replayed_mac_refused, test_right_mac_accepted_and_agent_proves_secret,
                  test_manager_with_wrong_secret_refused, test_remote_agents_need_a_secret,
                  test_agent_needs_a_private_secret_file):
            check(t.__name__, t)
        assert agent.poll() is None, "the agent died: " + agent.stderr.read().decode()[-2000:]
    finally:
        agent.terminate()
        try:
            agent.wait(10)
        except subprocess.TimeoutExpired:
            agent.kill()
            agent.wait()
        shutil.rmtree(TMP, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
