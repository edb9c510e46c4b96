#!/usr/bin/env python3
"""test_check_config.py — `mtad -n` and `imapd -n` on the real binaries (#21): a heron.conf
with a few changed keys, some keys set to their defaults written out (one of them spelt in
other units), prints exactly the changed keys of the sections the daemon reads, as
heron.conf text; -n on a file with a bad value fails with the file and line, printing no
config.

  test_check_config.py MTAD IMAPD"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import run_tests  # noqa: E402

MTAD, IMAPD = sys.argv[1:3]
TMP = tempfile.mkdtemp(prefix="heron-check-config-")

# store.partitions 4, mtad.max_connections_per_ip 100, imapd.max_connections_per_ip 1000,
# imapd.idle_timeout 30m (as 1800s) and sieve.workers 1 are the defaults (common/conf_keys.c)
CONF_TEXT = f"""[store]
path = {TMP}/store
partitions = 4

[mtad]
workers = 3
hostname = mx.example.org
max_connections_per_ip = 100

[imapd]
workers = 5
idle_timeout = 1800s
max_connections_per_ip = 1000
max_unauth_connections_per_ip = 7

[sieve]
workers = 1
"""

WANT = {
    MTAD: f"[store]\npath = {TMP}/store\n\n[mtad]\nhostname = mx.example.org\nworkers = 3\n",
    IMAPD: f"[store]\npath = {TMP}/store\n\n[imapd]\nworkers = 5\n"
           "max_unauth_connections_per_ip = 7\n",
}


def write(name, text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def run(binary, *args):
    return subprocess.run([binary, *args], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=30)


def test_n_prints_only_changed_keys():
    conf = write("heron.conf", CONF_TEXT)
    for binary, want in WANT.items():
        r = run(binary, "-n", "-c", conf)
        name = os.path.basename(binary)
        assert r.returncode == 0, f"{name} -n: {r.returncode} {r.stderr}"
        assert r.stdout == want, f"{name} -n printed:\n{r.stdout}\nwanted:\n{want}"
        # what -n prints is a heron.conf the daemon reads as the same config
        again = write(f"{name}-n.conf", r.stdout)
        r2 = run(binary, "-n", "-c", again)
        assert r2.returncode == 0 and r2.stdout == want, f"{name} -n of its -n: {r2}"


def test_n_with_only_defaults_prints_nothing_changed():
    conf = write("defaults.conf", "[mtad]\nworkers = 2\n\n[imapd]\nworkers = 2\n"
                 "idle_timeout = 30m\n")
    for binary in (MTAD, IMAPD):
        r = run(binary, "-n", "-c", conf)
        assert r.returncode == 0, r.stderr
        assert "workers" not in r.stdout and "idle_timeout" not in r.stdout, r.stdout


def test_n_refuses_a_bad_value():
    conf = write("bad.conf", CONF_TEXT.replace("idle_timeout = 1800s", "idle_timeout = 29m"))
    line = CONF_TEXT.splitlines().index("idle_timeout = 1800s") + 1
    for binary in (MTAD, IMAPD):
        r = run(binary, "-n", "-c", conf)
        name = os.path.basename(binary)
        assert r.returncode == 1, f"{name}: {r.returncode}"
        assert f"{name}: {conf}:{line}: idle_timeout" in r.stdout + r.stderr, r
        assert "workers = " not in r.stdout, r.stdout


rc = run_tests([test_n_prints_only_changed_keys,
                test_n_with_only_defaults_prints_nothing_changed, test_n_refuses_a_bad_value])
if rc == 0:
    shutil.rmtree(TMP, ignore_errors=True)
else:
    print(f"kept {TMP}")
sys.exit(rc)
