#!/usr/bin/env python3
"""bench/mailload/bench.py — how many simulated users and steps per second one mailload agent
core drives. Prints figures; asserts nothing.

  bench.py [--build build] [--users 100000] [--seconds 30]
           [--imap-port P --imap-host H --password PW --domain D]   (optional IMAP part)

SMTP: a private Heron sink on free loopback ports takes every session (outside-MTA
deliveries, one message each), so the server is never the limit. Two runs on one agent:
the full profile's per-user SMTP activity for --users users (the timer and bookkeeping cost of
a large population), then a small population pushed to saturation (steps per second per core).
IMAP (when --imap-port is given, e.g. the Dovecot of ../shared/peers with initialised users):
check/sync/cleanup sessions at a high rate against it; the figure is then bounded by that
server, and says so."""
import argparse, json, os, shutil, socket, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "../../build"))
ap.add_argument("--users", type=int, default=100000)
ap.add_argument("--seconds", type=int, default=30)
ap.add_argument("--imap-port", type=int)
ap.add_argument("--imap-host", default="127.0.0.1")
ap.add_argument("--imap-users", type=int, default=1000)
ap.add_argument("--password", default="")
ap.add_argument("--domain", default="heron.test")
a = ap.parse_args()
ML = os.path.join(a.build, "mailload/mailload")
SINK = os.path.join(a.build, "sink/sink")


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


def run(args, report):
    """One run on one agent process started here, so its CPU time is its own."""
    aport = free_port()
    agent = subprocess.Popen([ML, "agent", "--listen", "127.0.0.1:%d" % aport],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", aport), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        time.sleep(0.2)
        c0, t0 = cpu_of(agent.pid), time.time()
        p = subprocess.run([ML, "run", "-q", "--agents", "127.0.0.1:%d" % aport,
                            "--load-points", "100", "--report", report] + args,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=a.seconds * 4 + 300)
        wall, cpu = time.time() - t0, cpu_of(agent.pid) - c0
    finally:
        agent.terminate()
        agent.wait(10)
    try:
        with open(os.path.join(report, "report.json")) as f:
            pt = json.load(f)["points"][0]
    except (OSError, ValueError, KeyError, IndexError):
        print("  run failed:", p.stderr.decode()[-400:])
        return None
    return wall, cpu, pt


def show(name, users, res, phases):
    if res is None:
        return
    wall, cpu, pt = res
    d = pt["delivery"]
    steps = pt["errors"]["steps"] - d["checked"]
    failed = pt["errors"]["failed"] - d["lost"] - d["duplicated"]
    steady = phases[1]
    print("%s\n  users %d, steps in steady state %d (%.0f/s), errors %d, wall %.0f s, "
          "CPU %.1f s (%.0f%% of one core over the run)" %
          (name, users, steps, steps / steady, failed, wall, cpu,
           100 * cpu / wall))
    for t in pt["errors"]["top"][:3]:
        print("  error: %s %s x%d" % (t[0], t[1], t[2]))
    if cpu > 0:
        print("  => about %.0f steps/s and %.0f users of this activity per agent core" %
              (steps / steady / (cpu / wall), users / (cpu / wall)))


tmp = tempfile.mkdtemp(prefix="heron-bench-mailload-")
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
              "--probes", "0"]
    ph = (5, a.seconds, 5)
    phs = "%d/%d/%d" % ph
    # 1: a large population with the profile's SMTP activity (0.9 messages per user-hour)
    res = run(common + ["--users", str(a.users), "--rate", "%g" % (a.users / 200), "--phases",
                        phs, "--set", "recv_per_hour=0.9"], os.path.join(tmp, "r1"))
    show("SMTP, full-profile SMTP activity of a large population (sink):", a.users, res, ph)
    # 2: saturation: 2,000 users each delivering every 2 s
    res = run(common + ["--users", "2000", "--rate", "10", "--phases", phs,
                        "--set", "recv_per_hour=1800"], os.path.join(tmp, "r2"))
    show("SMTP, high rate (1,000 sessions/s offered, one message each, sink):", 2000, res, ph)
    if a.imap_port:
        icommon = ["--target", a.imap_host, "--imap-port", str(a.imap_port), "--smtp-port",
                   str(port), "--submission-port", str(port), "--domain", a.domain,
                   "--set", "send_per_hour=0", "--set", "recv_per_hour=0", "--drain", "5"]
        if a.password:
            icommon += ["--password", a.password]
        res = run(icommon + ["--users", str(a.imap_users), "--rate", "%g" % (a.imap_users / 200),
                             "--phases", phs, "--set", "imap_per_hour=360"],
                  os.path.join(tmp, "r3"))
        show("IMAP check/sync/cleanup sessions (server-bound: %s:%d):" %
             (a.imap_host, a.imap_port), a.imap_users, res, ph)
finally:
    sink.terminate()
    try:
        sink.wait(10)
    except subprocess.TimeoutExpired:
        sink.kill()
    shutil.rmtree(tmp, ignore_errors=True)
