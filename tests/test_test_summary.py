#!/usr/bin/env python3
"""scripts/test-summary (scripts/test's summary) names every skip and fails the run on one: a
throwaway meson project whose tests pass, exit 77 with a reason, skip a cmocka case, note a
part skipped, and fail, is run by the real meson; its testlog.json is what the summary reads.

    test_test_summary.py SOURCE_ROOT
"""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = sys.argv[1]
SUMMARY = os.path.join(ROOT, "scripts", "test-summary")
MESON = shutil.which("meson")

# name -> shell command; each is one meson test of the throwaway project
TESTS = {
    "passes": "echo fine",
    "needs_widget": "echo 'SKIP: no widget here'; exit 77",
    "quiet_skip": "echo 'widgetd: cannot start' >&2; exit 77",
    "cmocka_like": "printf '[ RUN      ] test_a\\n[       OK ] test_a\\n"
                   "[ RUN      ] test_b\\n[  SKIPPED ] test_b\\n'",
    "part_left": "echo 'SKIP leak check: not an ASan build'",
    "breaks": "echo broken; exit 1",
}


def meson_log(tmp, names):
    """Runs the named tests with meson; returns the testlog.json path."""
    src = os.path.join(tmp, "src")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(src, "meson.build"), "w") as f:
        f.write("project('t', [])\nsh = find_program('sh')\n")
        for name in names:
            cmd = TESTS[name].replace("\\", "\\\\").replace("'", "\\'")
            f.write(f"test('{name}', sh, args : ['-c', '{cmd}'])\n")
    build = os.path.join(tmp, "build")
    shutil.rmtree(build, ignore_errors=True)
    subprocess.run([MESON, "setup", build, src], check=True, capture_output=True, timeout=120)
    subprocess.run([MESON, "test", "-C", build], capture_output=True, timeout=120)
    return os.path.join(build, "meson-logs", "testlog.json")


def summary(*args):
    r = subprocess.run([SUMMARY, *args], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def main():
    tmp = tempfile.mkdtemp(prefix="heron-summary-")
    try:
        # all passing: exit 0, nothing listed
        rc, out = summary("build=" + meson_log(tmp, ["passes"]), "--pass", "2")
        assert rc == 0, (rc, out)
        assert "3 passed, 0 failed, 0 skipped" in out, out

        # skips, named with their reasons; the run fails (CI must run them all)
        log = meson_log(tmp, ["passes", "needs_widget", "quiet_skip", "cmocka_like",
                              "part_left"])
        rc, out = summary("build-asan=" + log, "--skip", "fuzz targets:no clang")
        assert rc == 1, (rc, out)
        assert "SKIPPED: needs_widget (build-asan): no widget here" in out, out
        assert "SKIPPED: quiet_skip (build-asan): widgetd: cannot start" in out, out
        assert "SKIPPED: cmocka_like (build-asan) case test_b:" in out, out
        assert "SKIPPED: fuzz targets: no clang" in out, out
        assert "note: part_left (build-asan): SKIP leak check: not an ASan build" in out, out
        # the cmocka program and the one that noted a part passed; four skips
        assert "3 passed, 0 failed, 4 skipped (1 notes of parts skipped)" in out, out
        assert "4 tests or cases were skipped" in out, out

        # --allow-skips: the same list, a warning, exit 0
        rc, out = summary("--allow-skips", "build-asan=" + log)
        assert rc == 0, (rc, out)
        assert "SKIPPED: needs_widget (build-asan): no widget here" in out, out
        assert "WARNING: 3 tests or cases did not run (--allow-skips)" in out, out

        # a note alone (a part left to another build) does not fail the run
        rc, out = summary("build=" + meson_log(tmp, ["passes", "part_left"]))
        assert rc == 0, (rc, out)

        # a failure fails the run, --allow-skips or not, and is named
        log = meson_log(tmp, ["passes", "breaks"])
        rc, out = summary("--allow-skips", "build=" + log, "--fail", "fuzz targets")
        assert rc == 1, (rc, out)
        assert "FAILED: breaks (build): FAIL" in out and "FAILED: fuzz targets" in out, out
        assert "1 passed, 2 failed, 0 skipped" in out, out

        # bad arguments are refused
        rc, out = summary("--pass", "many")
        assert rc != 0 and "--pass wants a count" in out, (rc, out)
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            f.write("{not json\n")
        rc, out = summary("build=" + bad)
        assert rc != 0 and "not a JSON line" in out, (rc, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_test_summary: ok")


if __name__ == "__main__":
    main()
