#!/usr/bin/env python3
"""test_report_browser.py — the HTML report as a reader sees it: mailload renders a fixed
report.json, headless Chromium (Debian's chromium) lays the page out, and a script added to a
copy of the page measures what it drew: every chart has tick labels on its axes inside the
chart and not overlapping, unit labels, the time charts the three phases shaded in order, the
limit lines (5 s on the latency chart, 60 s and 95% on the delivery CDF), histograms whose
bins are labelled in ms or s with the last bin folding everything past the limit; the page
has the verdict, the certified-users headline (or why not), the load-point table and the
delivery accounting. A broken page fails here.

usage: test_report_browser.py PATH/TO/mailload FIXTURE.json"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from heronlib import run_main, run_tests, skip  # noqa: E402

CHECK = r"""
<script>
(function () {
  const out = {charts: []};
  const overlap = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 &&
                            a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
  for (const svg of document.querySelectorAll('svg[data-chart]')) {
    const r = svg.getBoundingClientRect();
    const c = {kind: svg.dataset.chart, title: svg.querySelector('title').textContent,
               w: r.width, h: r.height};
    const xt = [...svg.querySelectorAll('text.xtick')], yt = [...svg.querySelectorAll('text.ytick')];
    c.xticks = xt.map(t => t.textContent);
    c.yticks = yt.map(t => t.textContent);
    c.outside = [];
    c.overlaps = 0;
    for (const group of [xt, yt]) {
      const boxes = group.map(t => t.getBoundingClientRect());
      boxes.forEach((b, i) => {
        if (b.width <= 0 || b.left < r.left - 1 || b.right > r.right + 1 ||
            b.top < r.top - 1 || b.bottom > r.bottom + 1)
          c.outside.push(group[i].textContent);
        for (let j = i + 1; j < boxes.length; j++)
          if (overlap(b, boxes[j])) c.overlaps++;
      });
    }
    c.units = [...svg.querySelectorAll('text.xunit, text.yunit')].map(t => t.textContent);
    c.phases = [...svg.querySelectorAll('rect.phase')].map(p => {
      const b = p.getBoundingClientRect();
      return [p.dataset.phase, b.left, b.width];
    });
    c.limits = [...svg.querySelectorAll('line.limit')].length;
    c.limitlabels = [...svg.querySelectorAll('text.limitlabel')].map(t => t.textContent);
    c.series = [...svg.querySelectorAll('polyline.series')].map(p => p.dataset.series);
    c.bars = [...svg.querySelectorAll('rect.bar')].length;
    c.fold = [...svg.querySelectorAll('rect.fold')].length;
    out.charts.push(c);
  }
  const text = s => (document.querySelector(s) || {textContent: ''}).textContent;
  out.h1 = text('h1');
  out.headline = text('p.headline');
  out.points = document.querySelectorAll('table.points tr').length - 1;
  out.accounting = [...document.querySelectorAll('p.accounting')].map(p => p.textContent);
  out.summaries = document.querySelectorAll('table.summary').length;
  const pre = document.createElement('pre');
  pre.id = 'dom-check';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


EXE, FIXTURE = os.path.abspath(sys.argv[1]), sys.argv[2]
with open(FIXTURE) as f:
    REP = json.load(f)
PAGE = {}  # what the script measured in the page: render() fills it


def render(browser, tmp):
    """mailload renders the fixture; Chromium lays out a copy of the page with CHECK added and
    dumps the DOM: PAGE is what the script found."""
    shutil.copy(FIXTURE, os.path.join(tmp, "report.json"))
    subprocess.run([EXE, "report", tmp], check=True, stdout=subprocess.DEVNULL, timeout=60)
    with open(os.path.join(tmp, "report.html")) as f:
        page = f.read()
    with open(os.path.join(tmp, "check.html"), "w") as f:
        f.write(page.replace("</body>", CHECK + "</body>"))
    r = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                        "--no-first-run", "--user-data-dir=" + os.path.join(tmp, "profile"),
                        "--window-size=1280,2000", "--dump-dom",
                        "file://" + os.path.join(tmp, "check.html")],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="dom-check">(.*?)</pre>', r.stdout, re.S)
    assert m, "no result from the page:\n" + r.stdout[-2000:] + r.stderr[-2000:]
    PAGE.update(json.loads(m.group(1).replace("&quot;", '"').replace("&lt;", "<")
                           .replace("&gt;", ">").replace("&amp;", "&")))
    print("report page laid out by %s" % browser)


def charts(*kinds):
    """(name, chart) of the page's charts of those kinds (none named: every chart)."""
    return [(c["kind"] + ": " + c["title"], c) for c in PAGE["charts"]
            if not kinds or c["kind"] in kinds]


def test_verdict_headline_points_accounting():
    res = PAGE
    assert REP["verdict"] in res["h1"], res["h1"]
    assert ("Certified" in res["headline"] or "Not certified" in res["headline"]) and \
        "users" in res["headline"], res["headline"]
    assert res["points"] == len(REP["points"]), res["points"]
    assert res["summaries"] == len(REP["points"]), res["summaries"]
    assert len(res["accounting"]) == len(REP["points"]) and all(
        re.search(r"\d+ copies checked, \d+ delivered, \d+ late, \d+ unchecked, \d+ lost, "
                  r"\d+ duplicated", a) for a in res["accounting"]), res["accounting"]


def test_the_charts_drawn():
    kinds = [c["kind"] for c in PAGE["charts"]]
    assert kinds.count("throughput") == 1 and kinds.count("latency") == 1, kinds
    assert kinds.count("cdf") == 1 and kinds.count("histogram") == 16, kinds


def test_every_chart_has_axes_ticks_units():
    for name, c in charts():
        assert c["w"] > 300 and c["h"] > 150, (name, c["w"], c["h"])
        assert len(c["yticks"]) >= 3 and all(c["yticks"]), (name, c["yticks"])
        assert len(c["xticks"]) >= 3 and all(c["xticks"]), (name, c["xticks"])
        assert not c["outside"], (name, "labels outside the chart", c["outside"])
        assert c["overlaps"] == 0, (name, "overlapping labels", c["xticks"], c["yticks"])
        assert len(c["units"]) == 2 and all(len(u) > 3 for u in c["units"]), (name, c["units"])
    print("%d charts, each with axes, ticks and units" % len(PAGE["charts"]))


def test_time_charts_shade_the_phases():
    for name, c in charts("throughput", "latency"):
        assert [p[0] for p in c["phases"]] == ["ramp-up", "steady state (measured)",
                                               "ramp-down"], (name, c["phases"])
        assert all(p[2] > 0 for p in c["phases"]), (name, c["phases"])
        assert c["phases"][0][1] < c["phases"][1][1] < c["phases"][2][1], c["phases"]
        assert c["series"] == ["SMTP", "IMAP"], (name, c["series"])
        assert "(s)" in c["units"][0], (name, c["units"])


def test_limit_lines():
    for name, c in charts("latency"):
        assert c["limits"] == 1 and c["limitlabels"] == ["limit 5 s"], (name, c)
        assert "ms" in c["units"][1], (name, c["units"])
    for name, c in charts("cdf"):
        assert c["limits"] == 2 and "limit 60 s" in c["limitlabels"], (name, c)
        assert "(s)" in c["units"][0] and "%" in c["units"][1], (name, c["units"])


def test_histograms_fold_past_the_limit():
    for name, c in charts("histogram"):
        limit = "60 s" if c["title"].startswith("Delivery") else "5 s"
        assert c["bars"] == len(c["xticks"]) and c["fold"] == 1, (name, c)
        assert c["xticks"][-1] == ">" + limit, (name, c["xticks"])
        assert all(re.fullmatch(r"≤\d+(\.\d+)? (ms|s)", t) for t in c["xticks"][:-1]), \
            (name, c["xticks"])


def main():
    browser = chromium()
    if browser is None:
        if os.environ.get("CI"):
            sys.exit("chromium is missing: scripts/bootstrap installs it")
        skip("no chromium (scripts/bootstrap installs it)")
    tmp = tempfile.mkdtemp(prefix="heron-report-browser-")

    def body():
        render(browser, tmp)
        return run_tests([test_verdict_headline_points_accounting, test_the_charts_drawn,
                          test_every_chart_has_axes_ticks_units,
                          test_time_charts_shade_the_phases, test_limit_lines,
                          test_histograms_fold_past_the_limit])
    return run_main(body, tmp, [])


if __name__ == "__main__":
    sys.exit(main())
