#!/usr/bin/env python3
"""scripts/format touches C sources only: a .py or a shell script named to --check or --fix
is skipped with a note (clang-format's C layout garbles them), a C file is still checked."""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = sys.argv[1]
FORMAT = os.path.join(ROOT, "scripts", "format")
if shutil.which("clang-format") is None:
    print("clang-format is not installed")
    sys.exit(77)  # meson: skipped


def run(*args):
    r = subprocess.run([FORMAT, *args], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout, r.stderr


tmp = tempfile.mkdtemp(prefix="heron-format-")
try:
    py = os.path.join(tmp, "t.py")
    sh = os.path.join(tmp, "t.sh")
    c = os.path.join(tmp, "t.c")
    with open(py, "w") as f:
        f.write("#!/usr/bin/env python3\nx = {'a':1}\n")
    with open(sh, "w") as f:
        f.write("#!/bin/sh\n[ -f x ] && echo \"$1\" | sed -n '2,3p'\n")
    with open(c, "w") as f:
        f.write("int  f( void ){return 1;}\n")
    before = {p: open(p).read() for p in (py, sh)}
    rc, out, err = run("--check", py, sh)
    assert rc == 0 and out == "", (rc, out, err)
    assert "t.py: not a C source" in err and "t.sh: not a C source" in err, err
    rc, out, err = run("--fix", py, sh)
    assert rc == 0, (rc, out, err)
    assert {p: open(p).read() for p in (py, sh)} == before, "a non-C file was rewritten"
    # a C file among them is still checked: it differs, so exit 1 with its diff only
    rc, out, err = run("--check", py, c)
    assert rc == 1 and "t.c (formatted)" in out and "t.py" not in out, (rc, out, err)
    rc, out, err = run("--help")
    assert rc == 0 and "Only C sources" in out and "set -euo" not in out, out
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print("ok")
