#!/usr/bin/env python3
"""test_spf_suite.py — Heron's SPF against the RFC 7208 test suite (the openspf.org suite,
release 2014.04, as python3-spf ships it: /usr/share/doc/python3-spf/rfc7208-tests.yml.gz).
Each scenario's zone is served by a table resolver with the suite driver's rules (SPF records
copied to TXT unless a TXT is given, TIMEOUT entries, one level of CNAME); every test's result
must be one the suite allows, and its explanation the suite's when it names one.

  test_spf_suite.py SPF_RUN"""
import gzip
import subprocess
import sys

import yaml

SUITE = "/usr/share/doc/python3-spf/rfc7208-tests.yml.gz"
# Where Heron differs on purpose, with the result it gives: libheron_dns looks up host names
# only (letters, digits, '-', '_'), so a domain-spec expanding to a name with ':', '/', '%'
# or a space matches nothing, as a name that does not exist would.
DIFFERENT = {
    "a-colon-domain": "neutral", "a-colon-domain-ip4mapped": "neutral",
    "mx-colon-domain": "neutral", "mx-colon-domain-ip4mapped": "neutral",
    "macro-mania-in-domain": "fail",
}


def escape(v):
    """Record data on one line: backslash, NUL, TAB, CR and LF escaped (spf_run undoes it)."""
    return (str(v).replace("\\", "\\\\").replace("\0", "\\0").replace("\t", "\\t")
            .replace("\r", "\\r").replace("\n", "\\n"))


def zone_lines(zonedata):
    out = []
    for name, records in zonedata.items():
        gen_txt = not any(isinstance(r, dict) and "TXT" in r for r in records)
        for r in records:
            if r == "TIMEOUT":
                out.append(f"Z\t{name}\tTIMEOUT\t")
                continue
            for t, v in r.items():
                if isinstance(v, list) and t not in ("TXT", "SPF"):
                    v = " ".join(str(x) for x in v)
                if t in ("TXT", "SPF"):
                    v = "".join(v) if isinstance(v, list) else v
                    if v == "NONE":
                        continue
                if t == "SPF":
                    if gen_txt:
                        out.append(f"Z\t{name}\tTXT\t{escape(v)}")
                    continue
                if t == "MX":
                    v = f"{v[0]} {v[1]}" if isinstance(v, (list, tuple)) else v
                if v == "TIMEOUT":
                    out.append(f"Z\t{name}\tTIMEOUT\t")
                    continue
                out.append(f"Z\t{name}\t{t}\t{escape(v)}")
    return out


def main():
    spf_run = sys.argv[1]
    with gzip.open(SUITE, "rt") as f:
        docs = list(yaml.safe_load_all(f))
    lines, expect = [], {}
    for n, doc in enumerate(docs):
        lines.append("RESET")
        lines += zone_lines(doc.get("zonedata", {}))
        for tid, t in doc["tests"].items():
            key = f"{n}:{tid}"
            want = t["result"] if isinstance(t["result"], list) else [t["result"]]
            expect[key] = (want, t.get("explanation"), doc.get("description", ""))
            mf = t.get("mailfrom", "")
            lines.append(f"C\t{key}\t{t['host']}\t{mf}\t{t.get('helo', '')}")
    r = subprocess.run([spf_run], input="\n".join(lines) + "\n", capture_output=True,
                       text=True, timeout=120)
    if r.returncode != 0:
        print(r.stderr)
        return 1
    got = {}
    for line in r.stdout.splitlines():
        parts = line.split("\t")
        got[parts[0]] = parts[1:]
    failed = passed = 0
    for key, (want, exp, desc) in expect.items():
        res = got.get(key)
        tid = key.split(":", 1)[1]
        if tid in DIFFERENT:
            want = [DIFFERENT[tid]]
        ok = res is not None and res[0] in want
        # "DEFAULT": the implementation's own text (Heron: none)
        if ok and exp not in (None, "DEFAULT") and res[0] == "fail" and res[1] != exp:
            ok = False
        if ok:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {key} ({desc}): want {want} {exp!r}, got {res}")
    print(f"{len(DIFFERENT)} of them with Heron's documented difference (host names only)")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
