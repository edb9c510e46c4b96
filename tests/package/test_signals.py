"""test_signals.py — what every daemon (mtad, imapd, managesieved, sink) does with the signals an admin and
systemd send, run as a service runs: `-F` (foreground, logging as [log] says) with
[log] target = file and a notification socket like systemd's ($NOTIFY_SOCKET):

- READY=1 once the workers serve; SIGHUP: RELOADING=1, then READY=1, and every line logged
  afterwards still carries the program's name; SIGTERM: STOPPING=1 and a clean exit;
- logrotate: the file is renamed, SIGUSR1 to the master makes the master and every worker
  write to a new file at the configured path (their descriptors are read from /proc), and the
  daemon keeps serving with the same processes; SIGUSR1 sent straight to a worker does the
  same for that worker and kills nothing.

    test_signals.py MTAD IMAPD SINK MANAGESIEVED
"""
import os
import signal
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import (HOST, Daemon, Sink, free_port, run_main, run_tests,  # noqa: E402
                      shared_conf, wait_for, wait_port, write_conf)


class Notify:
    """A datagram socket playing systemd's notification socket (abstract or a path)."""

    def __init__(self, tmp, abstract):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            self.name = f"@heron-test-notify-{os.getpid()}-{time.monotonic_ns()}"
            self.sock.bind("\0" + self.name[1:])
        else:
            self.name = os.path.join(tmp, "notify.sock")
            if os.path.exists(self.name):
                os.unlink(self.name)
            self.sock.bind(self.name)
        self.sock.settimeout(0.2)
        self.seen = []

    def wait(self, line, timeout=30.0):
        """Returns the first datagram since the last wait that has line among its lines."""
        end = time.time() + timeout
        while time.time() < end:
            try:
                msg = self.sock.recv(4096).decode()
            except socket.timeout:
                continue
            self.seen.append(msg)
            if line in msg.split("\n"):
                return msg
        raise AssertionError(f"no {line} from the daemon; got {self.seen!r}")

    def close(self):
        self.sock.close()


def log_fds(pid, path):
    """The targets of pid's descriptors that name path or a rotated copy of it."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            t = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if t.startswith(path):
            out.append(t)
    return out


def writes_to(pid, path):
    fds = log_fds(pid, path)
    return fds and all(t == path for t in fds)


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def poke(port):
    """One connection, read the greeting, leave: a line in some worker's log."""
    with socket.create_connection((HOST, port), timeout=10) as s:
        s.recv(512)


def exercise(d, ident, logfile, notify, nworkers):
    """The whole signal dialogue against a started daemon d; raises on any failure."""
    notify.wait("READY=1")
    master = d.proc.pid
    workers = wait_for(lambda: len(d.worker_pids()) == nworkers and d.worker_pids(), 30,
                       f"{nworkers} {ident} workers")
    poke(d.port)
    wait_for(lambda: f"{ident}[" in read(logfile), 20, "lines in the log file")

    # SIGHUP: a reload the manager hears about; lines keep the program's name
    mark = len(read(logfile))
    d.proc.send_signal(signal.SIGHUP)
    notify.wait("RELOADING=1")
    notify.wait("READY=1")
    poke(d.port)
    wait_for(lambda: f"{ident}: SIGHUP" in read(logfile)[mark:], 20, "SIGHUP logged")
    time.sleep(0.5)
    after = read(logfile)[mark:]
    for line in after.splitlines():
        assert f" {ident}[" in line, f"a line without the program name after SIGHUP: {line!r}"

    # logrotate: rename, SIGUSR1 to the master: every process writes to the new file
    os.rename(logfile, logfile + ".1")
    d.proc.send_signal(signal.SIGUSR1)
    for pid in [master] + workers:
        wait_for(lambda: writes_to(pid, logfile), 20, f"pid {pid} writing to the new file")
    wait_for(lambda: f"{ident}: SIGUSR1: log reopened" in read(logfile), 20,
             "the master's line in the new file")
    poke(d.port)
    # SIGUSR1 straight to each worker: it reopens by itself and lives on
    rotated = [".1"]
    for i, w in enumerate(workers):
        rotated.append(f".w{i}")
        os.rename(logfile, logfile + rotated[-1])
        os.kill(w, signal.SIGUSR1)
        wait_for(lambda: writes_to(w, logfile), 20, f"worker {w} writing to the new file")
    time.sleep(0.5)
    assert d.proc.poll() is None, "the master died"
    assert sorted(d.worker_pids()) == sorted(workers), (d.worker_pids(), workers)
    wait_port(d.port, 10)
    text = "".join(read(logfile + s) for s in rotated + [""]) + d.logtext()
    for bad in ("killed by signal", "exited status"):
        assert bad not in text, f"{bad!r} in the log:\n{text[-3000:]}"

    # SIGTERM: the manager hears STOPPING=1, the master exits 0
    d.proc.send_signal(signal.SIGTERM)
    notify.wait("STOPPING=1")
    d.proc.wait(timeout=40)
    assert d.proc.returncode == 0, d.proc.returncode


def exercise_stderr(d, ident, nworkers):
    """[log] target = stderr (-f): SIGHUP and SIGUSR1 to the master and to each worker keep
    every process alive and every line named."""
    d.start()
    try:
        workers = wait_for(lambda: len(d.worker_pids()) == nworkers and d.worker_pids(), 30,
                           f"{nworkers} {ident} workers")
        wait_for(lambda: f"{ident}: all {nworkers} workers ready" in d.logtext(), 30,
                 "the workers ready")
        for sig in (signal.SIGHUP, signal.SIGUSR1):
            d.proc.send_signal(sig)
            for w in workers:
                os.kill(w, sig)
        wait_for(lambda: f"{ident}: SIGUSR1: log reopened" in d.logtext(), 20, "SIGUSR1 seen")
        poke(d.port)
        time.sleep(0.5)
        assert d.proc.poll() is None, "the master died"
        assert sorted(d.worker_pids()) == sorted(workers), (d.worker_pids(), workers)
        text = d.logtext()
        for line in text.splitlines():
            assert f" {ident}[" in line, f"a line without the program name: {line!r}"
        assert "killed by signal" not in text, text[-3000:]
    except Exception:
        sys.stderr.write(f"--- {ident} stderr ---\n{d.logtext()[-6000:]}\n")
        raise
    finally:
        d.stop()
    assert d.returncode == 0, d.returncode


def run_daemon(d, ident, tmp, logfile, nworkers, abstract):
    notify = Notify(tmp, abstract)
    os.environ["NOTIFY_SOCKET"] = notify.name
    try:
        d.fg = "-F"
        d.start()
        exercise(d, ident, logfile, notify, nworkers)
    except Exception:
        sys.stderr.write(f"--- {ident} log file ---\n{read(logfile)[-6000:]}\n"
                         f"--- {ident} stderr ---\n{d.logtext()[-3000:]}\n")
        raise
    finally:
        del os.environ["NOTIFY_SOCKET"]
        notify.close()
        d.stop()


def file_log(logfile):
    return {"target": "file", "file": logfile, "level": "debug"}


def main():
    mtad_exe, imapd_exe, sink_exe, sieve_exe = sys.argv[1:5]
    tmp = tempfile.mkdtemp(prefix="heron-signals-")
    logfile = os.path.join(tmp, "heron.log")
    sieve_port = free_port()
    conf, smtp_port, imap_port = shared_conf(tmp, ["alice"], workers=2, keys={
        "log": file_log(logfile), "sieve": {"listen": f"{HOST}:{sieve_port}", "workers": 2}})

    def test_mtad():
        d = Daemon(mtad_exe, conf, os.path.join(tmp, "mtad.err"), smtp_port)
        run_daemon(d, "mtad", tmp, logfile, 2, abstract=False)

    def test_imapd():
        d = Daemon(imapd_exe, conf, os.path.join(tmp, "imapd.err"), imap_port)
        run_daemon(d, "imapd", tmp, logfile, 2, abstract=True)

    def test_managesieved():
        d = Daemon(sieve_exe, conf, os.path.join(tmp, "managesieved.err"), sieve_port)
        run_daemon(d, "managesieved", tmp, logfile, 2, abstract=False)

    def test_sink():
        sink_log = os.path.join(tmp, "sink.log")
        d = Sink(sink_exe, tmp, sink_keys={"workers": "2"}, sections={"log": file_log(sink_log)})
        d.log = os.path.join(tmp, "sink.err")
        run_daemon(d, "sink", tmp, sink_log, 2, abstract=False)
        text = "".join(read(sink_log + s) for s in (".1", ".w0", ".w1", ""))
        assert "sink summary why=SIGUSR1" in text, "no summary on SIGUSR1"

    stderr_conf = os.path.join(tmp, "stderr.conf")
    with open(conf) as f:
        write_conf(stderr_conf, {"conf": f.read(), "log": {"target": "stderr",
                                                           "level": "debug"}})

    def test_mtad_stderr():
        exercise_stderr(Daemon(mtad_exe, stderr_conf, os.path.join(tmp, "mtad2.err"),
                               smtp_port), "mtad", 2)

    def test_imapd_stderr():
        exercise_stderr(Daemon(imapd_exe, stderr_conf, os.path.join(tmp, "imapd2.err"),
                               imap_port), "imapd", 2)

    def test_managesieved_stderr():
        exercise_stderr(Daemon(sieve_exe, stderr_conf, os.path.join(tmp, "ms2.err"),
                               sieve_port), "managesieved", 2)

    def test_sink_stderr():
        d = Sink(sink_exe, tmp, sink_keys={"workers": "2"},
                 sections={"log": {"target": "stderr", "level": "debug"}})
        exercise_stderr(d, "sink", 2)

    return run_main(lambda: run_tests([test_mtad, test_imapd, test_managesieved, test_sink,
                                       test_mtad_stderr, test_imapd_stderr,
                                       test_managesieved_stderr, test_sink_stderr]), tmp, [])


if __name__ == "__main__":
    sys.exit(main())
