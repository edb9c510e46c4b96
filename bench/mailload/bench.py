#!/usr/bin/env python3
"""bench/mailload/bench.py — how many simulated users and steps per second one mailload agent
core drives, measured: each run uses one agent process started here (so its CPU time is its
own), and the agent's CPU is sampled over the steady state only. Prints figures; asserts
nothing.

  bench.py [--build build] [--seconds 60] [--users 100000] [--stack-users 300] [--no-stack]

Runs (phases 10/SECONDS/5 s):
 1. SMTP, population: --users users with the full profile's SMTP activity (0.9 messages per
    user-hour, outside-MTA deliveries) against a private Heron sink: the cost of a large
    population's timers and bookkeeping.
 2. SMTP, saturation: 2,000 users each delivering every 2 s (1,000 sessions/s offered) against
    the sink: the most SMTP steps per second one agent core drives.
 3. Full profile at the session rate of --users users against the real stack (scripts/stack:
    Heron mtad and imapd, slapd, sink): --stack-users users filled by `mailload init`, each
    with the per-user rates of the profile times users/stack-users, so the agent opens as
    many SMTP and IMAP sessions per second (IMAP check/sync/cleanup, delivery probes) as
    --users users of the full profile would. The servers share the machine; the figure says
    whether they kept up (errors, timeouts).
 4. IMAP saturation against the same stack: the session rate raised until the agent or the
    servers saturate; says which one did.
 5. IMAP, the full profile's IMAP sessions of --users users (4.8 per user-hour: check, sync,
    cleanup, APPEND) against imapfast (bench/mailload/imapfast.c, built here with cc): a
    one-thread in-memory IMAP responder fast enough that the agent, not the server, is
    measured. With run 1 (the same population's SMTP) it is the issue's figure: one core
    driving 1,000,000 users at 5,000 msgs/min.
 6. Runs 1 and 5 in one run: the population's SMTP to the sink and its IMAP to imapfast.
The machine's load average is printed with each run: on a shared machine the figures are
noisy."""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser()
ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "../../build"))
ap.add_argument("--users", type=int, default=100000)
ap.add_argument("--seconds", type=int, default=60)
ap.add_argument("--stack-users", type=int, default=300)
ap.add_argument("--no-stack", action="store_true")
ap.add_argument("--only", default="123456")
a = ap.parse_args()
BUILD = os.path.abspath(a.build)
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
ML = os.path.join(BUILD, "mailload/mailload")
SINK = os.path.join(BUILD, "sink/sink")
RAMP, DOWN = 10, 5
PROFILE = {"send": 0.30, "recv": 0.60, "imap": 4.8}  # per user-hour (WORKLOAD.md)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def run(args, report, secret):
    """One run on one remote agent; CPU sampled over the steady state."""
    aport = free_port()
    agent = subprocess.Popen([ML, "agent", "--listen", "127.0.0.1:%d" % aport,
                              "--secret-file", secret],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", aport), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        time.sleep(0.3)
        m = subprocess.Popen([ML, "run", "-q", "--agents", "127.0.0.1:%d" % aport,
                              "--secret-file", secret, "--load-points", "100",
                              "--phases", "%d/%d/%d" % (RAMP, a.seconds, DOWN),
                              "--report", report] + args,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        time.sleep(RAMP + 1)
        c0, t0, la0 = cpu_of(agent.pid), time.time(), loadavg()
        time.sleep(a.seconds - 2)
        c1, t1, la1 = cpu_of(agent.pid), time.time(), loadavg()
        rss = 0
        with open("/proc/%d/status" % agent.pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    rss = int(line.split()[1]) // 1024
        _, err = m.communicate(timeout=a.seconds * 4 + 600)
    finally:
        agent.terminate()
        agent.wait(10)
    try:
        with open(os.path.join(report, "report.json")) as f:
            pt = json.load(f)["points"][0]
    except (OSError, ValueError, KeyError, IndexError):
        print("  run failed:", err.decode()[-600:])
        return None
    return {"cpu": (c1 - c0) / (t1 - t0), "load": (la0, la1), "pt": pt, "rss": rss}


def show(name, users, res, checked=True):
    """checked: the delivery check ran (probes on); otherwise its lost count is not an error
    of the run and is left out."""
    if res is None:
        return
    pt, cpu = res["pt"], res["cpu"]
    d, e = pt["delivery"], dict(pt["errors"])
    steps = e["steps"] - d["checked"]
    if not checked:
        e["failed"] -= d["lost"] + d["duplicated"]
        e["rate_pct"] = 100.0 * e["failed"] / max(steps, 1)
    fns = {f["key"]: f.get("count", 0) for f in pt["functions"]}
    smtp = fns.get("smtp_connect", 0)
    imap = fns.get("imap_connect", 0)
    print("%s\n  users %d; steady state %d s: %d steps (%.0f/s), %.1f SMTP and %.1f IMAP "
          "sessions/s, %d failed (%.2f%%)" %
          (name, users, a.seconds, steps, steps / a.seconds, smtp / a.seconds, imap / a.seconds,
           e["failed"], e["rate_pct"]))
    print("  agent CPU over the steady state: %.1f%% of one core; peak RSS %d MiB; "
          "load average %s -> %s" % (100 * cpu, res["rss"], res["load"][0], res["load"][1]))
    if checked:
        print("  delivery: checked %d, delivered %d, lost %d, duplicated %d" %
              (d["checked"], d["delivered"], d["lost"], d["duplicated"]))
    else:
        print("  delivery check off (the sink keeps the mail; no probes)")
    for t in e["top"][:3]:
        print("  error: %s %s x%d" % (t["function"], t["message"], t["count"]))
    if cpu > 0:
        print("  => %.0f steps/s per fully used agent core (%.0f us of CPU per step)" %
              (steps / a.seconds / cpu, 1e6 * cpu * a.seconds / max(steps, 1)))
    print("  driver: %.1f ms of CPU per 1,000 steps; %.0f bytes of memory (peak RSS) per user" %
          (1e6 * cpu * a.seconds / max(steps, 1), res["rss"] * 1048576.0 / max(users, 1)))
    sys.stdout.flush()


def sink_runs(tmp, secret):
    port, cport = free_port(), free_port()
    conf = os.path.join(tmp, "heron.conf")
    with open(conf, "w") as f:
        f.write("[sink]\n[log]\nlevel = err\n")
    sink = subprocess.Popen([SINK, "-c", conf, "-f", "--listen", "127.0.0.1:%d" % port,
                             "--control=127.0.0.1:%d" % cport, "--workers", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        common = ["--target", "127.0.0.1", "--smtp-port", str(port), "--submission-port",
                  str(port), "--imap-port", "1", "--sink", "127.0.0.1:%d" % cport,
                  "--set", "imap_per_hour=0", "--set", "send_per_hour=0", "--drain", "5",
                  "--no-delivery-check", "--force"]  # no IMAP server: no fill record
        if "1" in a.only:
            res = run(common + ["--users", str(a.users), "--rate", "%g" % (a.users / 200),
                                "--set", "recv_per_hour=0.9"], os.path.join(tmp, "r1"), secret)
            show("1. SMTP, the full profile's SMTP activity of a large population (sink):",
                 a.users, res, False)
        if "2" in a.only:
            res = run(common + ["--users", "2000", "--rate", "10",
                                "--set", "recv_per_hour=1800"], os.path.join(tmp, "r2"), secret)
            show("2. SMTP saturation (1,000 sessions/s offered, one message each, sink):",
                 2000, res, False)
        if "6" in a.only and (srv := imapfast_start(tmp)) is not None:
            res = None
            try:  # run 1's SMTP and run 5's IMAP in one run: the figure
                res = run(["--target", "127.0.0.1", "--smtp-port", str(port),
                           "--submission-port", str(port), "--sink", "127.0.0.1:%d" % cport,
                           "--drain", "5", "--no-delivery-check", "--force", "--users",
                           str(a.users), "--rate", "%g" % (a.users / 200), "--set",
                           "send_per_hour=0", "--set", "recv_per_hour=0.9"] + IMAP_ARGS,
                          os.path.join(tmp, "r6"), secret)
                show("6. SMTP and IMAP together, the full profile's sessions of a large "
                     "population (sink and imapfast):", a.users, res, False)
            finally:
                imapfast_stop(srv, res)
    finally:
        sink.terminate()
        try:
            sink.wait(10)
        except subprocess.TimeoutExpired:
            sink.kill()


def imapfast_start(tmp):
    """Builds and starts imapfast on 127.0.0.1:24200 (the peers range of /work/wt/TEAM.md);
    the process, or None."""
    exe = os.path.join(tmp, "imapfast")
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", exe,
                    os.path.join(ROOT, "bench/mailload/imapfast.c")], check=True)
    srv = subprocess.Popen([exe, "127.0.0.1:24200"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    if srv.stdout.readline().strip() != "ready":
        print("imapfast did not start:", srv.stderr.read()[-500:])
        srv.kill()
        srv.wait()
        return None
    return srv


def imapfast_stop(srv, res):
    if res is not None:  # whether the responder, not the agent, was the limit
        print("  imapfast: %.1f s of CPU since its start" % cpu_of(srv.pid))
    srv.terminate()
    try:
        _, err = srv.communicate(timeout=10)
        print("  " + err.strip())
    except subprocess.TimeoutExpired:
        srv.kill()
    sys.stdout.flush()


IMAP_ARGS = ["--imap-port", "24200", "--set", "imap_per_hour=%g" % PROFILE["imap"]]


def fast_imap_runs(tmp, secret):
    srv = imapfast_start(tmp)
    if srv is None:
        return
    res = None
    try:
        res = run(["--target", "127.0.0.1", "--smtp-port", "1", "--submission-port", "1",
                   "--users", str(a.users), "--rate", "%g" % (a.users / 200), "--set",
                   "send_per_hour=0", "--set", "recv_per_hour=0", "--drain", "5",
                   "--no-delivery-check", "--force"] + IMAP_ARGS,
                  os.path.join(tmp, "r5"), secret)
        show("5. IMAP, the full profile's IMAP sessions of a large population (imapfast):",
             a.users, res, False)
    finally:
        imapfast_stop(srv, res)


def stack_runs(tmp, secret):
    d = os.path.join(tmp, "stack")
    n = a.stack_users
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/stack"), "up", d,
                        "--users", str(n), "--build-dir", BUILD, "--no-build"],
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print("stack up failed:", r.stdout[-1000:], r.stderr[-1000:])
        return
    try:
        env = {}
        with open(os.path.join(d, "stack.env")) as f:
            for line in f:
                if "=" in line and not line.startswith("#"):
                    k, v = line.strip().split("=", 1)
                    env[k] = v.strip("'")
        target = ["--target", env["HOST"], "--smtp-port", env["SMTP_PORT"],
                  "--submission-port", env["SUBMISSION_PORT"], "--imap-port", env["IMAP_PORT"],
                  "--domain", env["DOMAIN"], "--ext-domain", env["EXT_DOMAIN"]]
        t0 = time.time()
        r = subprocess.run([ML, "init", "--users", str(n), "--profile", "tiny", "--seed", "1",
                            "-q", "--local-agents", "1"] + target,
                           capture_output=True, text=True, timeout=1800)
        print("(stack: %d users filled by mailload init in %.0f s, rc %d)" %
              (n, time.time() - t0, r.returncode))
        k = a.users / n
        common = target + ["--users", str(n), "--rate", "%g" % (n / 200), "--profile", "tiny",
                           "--sink", env["SINK_CONTROL"], "--drain", "30"]
        if "3" in a.only:
            res = run(common + ["--set", "send_per_hour=%g" % (PROFILE["send"] * k),
                                "--set", "recv_per_hour=%g" % (PROFILE["recv"] * k),
                                "--set", "imap_per_hour=%g" % (PROFILE["imap"] * k)],
                      os.path.join(tmp, "r3"), secret)
            show("3. Full profile at the session rate of %d users (%d users x %.0f; Heron "
                 "mtad+imapd, sink):" % (a.users, n, k), n, res)
        if "4" in a.only:
            res = run(common + ["--set", "send_per_hour=0", "--set", "recv_per_hour=0",
                                "--set", "imap_per_hour=%g" % (PROFILE["imap"] * k * 3)],
                      os.path.join(tmp, "r4"), secret)
            show("4. IMAP sessions at 3x that rate (Heron imapd):", n, res)
    finally:
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts/stack"), "down", d],
                       capture_output=True, timeout=120)


tmp = tempfile.mkdtemp(prefix="heron-bench-mailload-")
try:
    secret = os.path.join(tmp, "agent.secret")
    fd = os.open(secret, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, os.urandom(32).hex().encode())
    os.close(fd)
    print("mailload agent core benchmark: %s, %d cores, load average %s" %
          (os.uname().release, os.cpu_count(), loadavg()))
    sink_runs(tmp, secret)
    if "5" in a.only:
        fast_imap_runs(tmp, secret)
    if not a.no_stack:
        stack_runs(tmp, secret)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
