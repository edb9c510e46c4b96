#!/usr/bin/env python3
"""with_slapd.py — runs a test program against a private slapd from scripts/ldap.

  with_slapd.py SOURCE_ROOT [--users N] [--tls] -- PROGRAM [ARGS...]

Starts the fixture in a temporary directory, runs PROGRAM with the fixture's ldap.env values
in its environment (plus HERON_LDAP_DIR, the fixture directory, so the program can stop and
restart slapd), then always stops slapd and removes the directory. Exits with PROGRAM's
status."""
import os
import shutil
import subprocess
import sys
import tempfile


def main():
    argv = sys.argv[1:]
    if "--" not in argv or not argv:
        print(__doc__, file=sys.stderr)
        return 2
    sep = argv.index("--")
    opts, prog = argv[:sep], argv[sep + 1:]
    root = opts.pop(0)
    ldap = os.path.join(root, "scripts", "ldap")
    tmp = tempfile.mkdtemp(prefix="heron-ldapauth-")
    d = os.path.join(tmp, "slapd")
    try:
        subprocess.run([sys.executable, ldap, "start", d, *opts], check=True,
                       stdin=subprocess.DEVNULL, timeout=180)
        env = dict(os.environ)
        with open(os.path.join(d, "ldap.env")) as f:
            for line in f:
                k, v = line.rstrip("\n").split("=", 1)
                env[k] = v
        env["HERON_LDAP_DIR"] = d
        env["HERON_TMP"] = tmp
        return subprocess.run(prog, env=env, stdin=subprocess.DEVNULL, timeout=600).returncode
    finally:
        subprocess.run([sys.executable, ldap, "stop", d], stdin=subprocess.DEVNULL,
                       timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
