#!/usr/bin/env python3
"""with_slapd.py — runs a test program against a private slapd from scripts/ldap.

  with_slapd.py SOURCE_ROOT [--users N] [--tls] -- PROGRAM [ARGS...]

Starts the fixture (tests/lib/heronlib.py's Slapd) in a temporary directory, runs PROGRAM with
the fixture's ldap.env values in its environment (plus HERON_LDAP_DIR, the fixture directory,
so the program can stop and restart slapd, and HERON_TMP), then always stops slapd and removes
the directory. Exits with PROGRAM's status."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Slapd  # noqa: E402


def main():
    argv = sys.argv[1:]
    if "--" not in argv or not argv:
        print(__doc__, file=sys.stderr)
        return 2
    sep = argv.index("--")
    opts, prog = argv[:sep], argv[sep + 1:]
    root = opts.pop(0)
    tmp = tempfile.mkdtemp(prefix="heron-ldapauth-")
    try:
        with Slapd(root, os.path.join(tmp, "slapd"), *opts) as slapd:
            env = dict(os.environ)
            env.update(slapd.env)
            env["HERON_LDAP_DIR"] = slapd.path
            env["HERON_TMP"] = tmp
            return subprocess.run(prog, env=env, stdin=subprocess.DEVNULL,
                                  timeout=600).returncode
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
