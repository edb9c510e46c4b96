"""stacklib.py — shared pieces of the whole-stack end-to-end tests: bring the real stack up with
scripts/stack (private slapd, sink, mtad, imapd on free 127.0.0.1 ports) in a temporary
directory, read its stack.env, talk to the sink's control port, and always bring it down by pid,
checking that no process is left.

  with Stack(root, build, users=20) as st: st.env["IMAP_PORT"] ..."""
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile

# the polling and test-running helpers of mtad's end-to-end tests serve here too
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mtad"))
from mtadlib import run_tests, wait_for  # noqa: E402,F401


def read_env(path):
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                env[k] = shlex.split(v)[0] if v else ""
    return env


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def processes_with(text):
    """Pids whose command line mentions text (to prove nothing of a stack is left)."""
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


class Stack:
    def __init__(self, root, build, users=20, args=(), keep_on_failure=False):
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
            self.env = read_env(os.path.join(self.dir, "stack.env"))
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
        with socket.create_connection(("127.0.0.1", self.port("SINK_CONTROL_PORT")),
                                      timeout=10) as s:
            s.sendall((json.dumps(req) + "\n").encode())
            f = s.makefile("rb")
            out = []
            while True:
                line = f.readline(1 << 20)
                if not line:
                    raise AssertionError(f"sink control closed during {req}")
                obj = json.loads(line)
                out.append(obj)
                if "ok" in obj:
                    return out
