#!/usr/bin/env python3
"""test_stack_mailload.py — a small mailload run against the whole stack from scripts/stack
(real slapd with the users of `mailload ldif`, sink, mtad, imapd): mailboxes filled by
`mailload init`, then a short run with per-user activity raised so every function of the
summary is exercised in a minute. Asserts functional facts only, never timings: the run
completed and wrote its reports, every summary function has samples, remote deliveries were
checked through the sink, no message was lost or duplicated, the error rate is under 1%.

  test_stack_mailload.py SOURCE_ROOT BUILD_DIR"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Stack, run_tests  # noqa: E402

ROOT, BUILD = sys.argv[1:3]
USERS = 200
# short phases; --drain bounds the delivery check after ramp-down
PHASES = "10/45/10"
ACTIVITY = ["--set", "send_per_hour=40", "--set", "recv_per_hour=40",
            "--set", "imap_per_hour=150"]


def mailload(st, *args, timeout):
    e = st.env
    cmd = [e["MAILLOAD"], *args, "--target", e["HOST"], "--smtp-port", e["SMTP_PORT"],
           "--submission-port", e["SUBMISSION_PORT"], "--imap-port", e["IMAP_PORT"],
           "--domain", e["DOMAIN"], "--ext-domain", e["EXT_DOMAIN"], "-q"]
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    r.stdout = r.stdout.decode(errors="replace")
    r.stderr = r.stderr.decode(errors="replace")
    return r


def main():
    report = tempfile.mkdtemp(prefix="heron-stack-report-")
    with Stack(ROOT, BUILD, users=USERS) as st:
        state = {}

        def test_init():
            r = mailload(st, "init", "--users", str(USERS), "--profile", "tiny", "--seed", "1",
                         timeout=600)
            assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]

        def test_run_completes():
            r = mailload(st, "run", "--rate", str(USERS / 200), "--users", str(USERS),
                         "--profile", "tiny", "--phases", PHASES, "--load-points", "100",
                         "--drain", "30", "--sink", st.env["SINK_CONTROL"], "--report", report,
                         "--sut-config", st.env["HERON_CONF"], *ACTIVITY, timeout=400)
            # exit status: 0 pass, 1 fail (rules), 2 the run could not be made, 3 invalid
            # (too few samples in these short phases): a verdict, the run was made
            assert r.returncode in (0, 1, 3), f"rc {r.returncode}\n" + r.stderr[-3000:]
            for name in ("report.json", "report.txt", "report.html"):
                path = os.path.join(report, name)
                assert os.path.exists(path) and os.path.getsize(path) > 0, \
                    f"{name} missing; mailload rc {r.returncode}:\n" + r.stderr[-3000:]
            with open(os.path.join(report, "report.json")) as f:
                doc = json.load(f)
            assert len(doc["points"]) == 1, doc.keys()
            state["point"] = doc["points"][0]
            state["doc"] = doc
            with open(os.path.join(report, "report.txt"), errors="replace") as f:
                sys.stdout.write(f.read()[:6000] + "\n")

        def point():
            assert "point" in state, "the run did not complete"
            return state["point"]

        def test_every_summary_function_has_samples():
            fns = [f for f in point()["functions"] if f["summary"]]
            assert len(fns) == 15, [f["name"] for f in fns]
            empty = [f["name"] for f in fns if f.get("count", 0) == 0]
            assert not empty, f"no samples: {empty}"

        def test_nothing_lost_or_duplicated():
            d = point()["delivery"]
            assert d["checked"] > 0 and d["local"] > 0 and d["remote"] > 0, d
            assert d["unchecked"] == 0 and d["late"] == 0, d
            assert d["lost"] == 0, d
            assert d["duplicated"] == 0, d
            assert d["delivered"] == d["checked"], d

        def test_server_version_disclosed():
            """imapd answers ID with its release; the report names it as the version of the
            heron.conf given with --sut-config, and says where it came from."""
            assert "doc" in state, "the run did not complete"
            v = subprocess.run([st.env["IMAPD"], "-V"], capture_output=True, text=True,
                               check=True).stdout.split()[2]
            sut, srv = state["doc"]["sut"], point()["server"]
            assert '"version" "%s"' % v in srv["imap_id"], srv
            assert sut["version"] == "Heron " + v and sut["version_from"] == "IMAP ID", sut
            assert sut["config"]["kind"] == "heron.conf" and sut["config"]["version"] == \
                "Heron " + v, sut["config"]
            with open(os.path.join(report, "report.txt"), errors="replace") as f:
                assert "version: Heron %s (from IMAP ID)" % v in f.read()

        def test_error_rate_under_one_percent():
            e = point()["errors"]
            assert e["steps"] > 0, e
            assert e["rate_pct"] < 1.0, e

        rc = run_tests([test_init, test_run_completes, test_every_summary_function_has_samples,
                        test_nothing_lost_or_duplicated, test_server_version_disclosed,
                        test_error_rate_under_one_percent])
    subprocess.run(["rm", "-rf", report], check=False)
    return rc


if __name__ == "__main__":
    sys.exit(main())
