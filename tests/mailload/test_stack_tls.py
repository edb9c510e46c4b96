#!/usr/bin/env python3
"""test_stack_tls.py — mailload over TLS against the real Heron stack: scripts/stack up --tls
(a CA and server certificate generated at test time; slapd, sink, mtad, imapd on free 127.0.0.1
ports; plain-text LOGIN/AUTH refused), `mailload init --tls starttls`, then two short runs:
--tls starttls (SMTP and IMAP upgrade after the greeting) and --tls implicit (submissions and
IMAPS speak TLS from the first byte; port 25 still upgrades with STARTTLS, having no implicit
form). Asserts functional facts only, never timings: each run completed, its report counts
TLS handshakes on both protocols and no failed one, nothing was lost or duplicated, the error
rate is under 1%.

  test_stack_tls.py SOURCE_ROOT BUILD_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import Stack, run_tests  # noqa: E402

ROOT, BUILD = sys.argv[1:3]
USERS = 40
PHASES = "5/30/5"
ACTIVITY = ["--set", "send_per_hour=60", "--set", "recv_per_hour=60",
            "--set", "imap_per_hour=200"]


def mailload(st, tls, *args, timeout):
    e = st.env
    implicit = tls == "implicit"
    cmd = [e["MAILLOAD"], *args, "--target", e["HOST"], "--smtp-port", e["SMTP_PORT"],
           "--submission-port", e["SUBMISSIONS_PORT"] if implicit else e["SUBMISSION_PORT"],
           "--imap-port", e["IMAPS_PORT"] if implicit else e["IMAP_PORT"],
           "--domain", e["DOMAIN"], "--ext-domain", e["EXT_DOMAIN"], "--tls", tls,
           "--local-agents", "1", "-q"]
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    r.stdout = r.stdout.decode(errors="replace")
    r.stderr = r.stderr.decode(errors="replace")
    return r


def run_point(st, tls, report, *extra):
    r = mailload(st, tls, "run", "--rate", str(USERS / 200), "--users", str(USERS),
                 "--profile", "tiny", "--phases", PHASES, "--load-points", "100",
                 "--drain", "30", "--sink", st.env["SINK_CONTROL"], "--report", report,
                 *ACTIVITY, *extra, timeout=300)
    # 3: invalid (too few samples in these short phases): a verdict, the run was made
    assert r.returncode in (0, 1, 3), f"rc {r.returncode}\n" + r.stderr[-3000:]
    with open(os.path.join(report, "report.json")) as f:
        doc = json.load(f)
    assert len(doc["points"]) == 1, doc.keys()
    with open(os.path.join(report, "report.txt"), errors="replace") as f:
        text = f.read()
    assert "TLS handshakes" in text, text[-3000:]
    return doc["points"][0]


def check_point(pt):
    t = pt["tls"]
    print("tls:", json.dumps(t), "delivery:", json.dumps(pt["delivery"]),
          "errors:", json.dumps(pt["errors"]), flush=True)
    assert t["smtp"] > 0 and t["imap"] > 0, t
    assert t["smtp_failed"] == 0 and t["imap_failed"] == 0, t
    assert t["protocol"].startswith("TLSv1."), t
    d = pt["delivery"]
    assert d["checked"] > 0 and d["local"] > 0, d
    assert d["lost"] == 0 and d["duplicated"] == 0, d
    assert d["delivered"] == d["checked"], d
    e = pt["errors"]
    assert e["steps"] > 0, e
    assert e["rate_pct"] < 1.0, e
    counts = {f["key"]: f.get("count", 0) for f in pt["functions"]}
    return counts


def main():
    reports = {m: tempfile.mkdtemp(prefix=f"heron-tls-{m}-")
               for m in ("starttls", "implicit", "verify")}
    try:
        with Stack(ROOT, BUILD, users=USERS, args=["--tls"]) as st:
            points = {}

            def test_init_over_starttls():
                r = mailload(st, "starttls", "init", "--users", str(USERS), "--profile",
                             "tiny", "--seed", "1", timeout=600)
                assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]

            def test_run_starttls():
                points["starttls"] = pt = run_point(st, "starttls", reports["starttls"])
                counts = check_point(pt)
                # the upgrade itself is a timed step on both protocols
                assert counts.get("smtp_starttls", 0) > 0, counts
                assert counts.get("imap_starttls", 0) > 0, counts

            def test_verified_certificate():
                # the stack's CA trusted: every handshake verifies the chain and the name
                pt = run_point(st, "starttls", reports["verify"], "--tls-verify", "--ca-file",
                               st.env["TLS_CA"])
                check_point(pt)
                # the system's store does not know the stack's CA: every handshake fails
                r = mailload(st, "starttls", "init", "--users", "1", "--profile", "tiny",
                             "--seed", "1", "--tls-verify", timeout=120)
                assert r.returncode != 0 and "certificate verify failed" in r.stderr, \
                    r.stderr[-2000:]

            def test_run_implicit():
                points["implicit"] = pt = run_point(st, "implicit", reports["implicit"])
                counts = check_point(pt)
                # IMAP speaks TLS from the first byte: no IMAP STARTTLS at all
                assert counts.get("imap_starttls", 0) == 0, counts

            rc = run_tests([test_init_over_starttls, test_run_starttls, test_verified_certificate,
                            test_run_implicit])
    finally:
        for d in reports.values():
            shutil.rmtree(d, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
