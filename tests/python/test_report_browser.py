"""The report as a person sees it: rendered by headless Chromium (Debian's chromium driven by
Playwright, tests/python/conftest.py), every section present, charts drawn, no console errors,
nothing from the trace executed. The screenshot is kept under tests/artifacts/."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, trainprof_command

ARTIFACTS = REPO / "tests" / "artifacts"
SECTIONS = ["summary", "phases", "system", "training", "operators", "python", "data-loader",
            "rules", "cost", "data-quality"]


def _synthetic_run_tool() -> str:
    """report_synthetic_run from the build ($TRAINPROF_SYNTHETIC_RUN, build/py or build/dev)."""
    if os.environ.get("TRAINPROF_SYNTHETIC_RUN"):
        return os.environ["TRAINPROF_SYNTHETIC_RUN"]
    for build in ("build/py", "build/dev"):
        tool = REPO / build / "src" / "report" / "report_synthetic_run"
        if tool.exists():
            return str(tool)
    pytest.fail("report_synthetic_run not built (run scripts/setup.sh or build build/dev)")


def _trainprof() -> list[str]:
    if not os.environ.get("TRAINPROF_BIN") and (REPO / "build/dev/src/cli/trainprof").exists() \
            and shutil.which("trainprof") is None:
        return [str(REPO / "build/dev/src/cli/trainprof")]
    return trainprof_command()


@pytest.fixture(scope="module")
def report_html(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("report")
    run = base / "run"
    # 20 minutes, 8 cores, 2 GPUs at 500 ms: phases, train/eval steps, operators, findings,
    # counters, loader annotations, and names carrying <script> and quotes.
    subprocess.run([_synthetic_run_tool(), str(run), "1200", "500", "8", "2"], check=True)
    out = base / "report.html"
    subprocess.run(_trainprof() + ["report", str(run), "--out", str(out), "--json",
                                   str(base / "report.json")], check=True)
    return out


def drawn_charts(browser) -> list[dict]:
    """Per chart placeholder: its canvases and how many sampled pixels carry ink."""
    return browser.js("""
        return Array.from(document.querySelectorAll('div.chart')).filter(function (div) {
          return !div.closest('details:not([open])');  // drawn when opened
        }).map(function (div) {
          var cs = div.querySelectorAll('canvas'), inked = 0;
          cs.forEach(function (c) {
            if (!c.width || !c.height) return;
            var d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            for (var i = 3; i < d.length; i += 4 * 7) if (d[i] !== 0) { inked++; if (inked > 50) break; }
          });
          return {id: div.id, canvases: cs.length, inked: inked, text: div.textContent.slice(0, 80)};
        });""")


def test_report_renders_in_chromium(report_html, browser):
    browser.open(report_html.as_uri())
    browser.js("return document.readyState")
    for section in SECTIONS:
        assert browser.page.locator(f"#{section}").is_visible(), section
        assert browser.text(f"#{section} h2").strip(), section

    # Every chart placeholder holds a canvas with pixels on it (dygraphs and the heatmap draw on
    # canvas); none reports a drawing error.
    drawn = drawn_charts(browser)
    assert len(drawn) >= 15, drawn
    for chart in drawn:
        assert chart["canvases"] > 0 and chart["inked"] > 50, chart
        assert "could not be drawn" not in chart["text"], chart

    # Nothing from the trace ran or became markup.
    assert browser.js("return document.querySelectorAll('img').length") == 0
    # the page's own: chart data, dygraphs, the shared chart layer (charts.js), the report's script
    assert browser.js("return document.querySelectorAll('script').length") == 4
    body = browser.text("body")
    assert "<script>alert(\"op\")</script>" in body
    assert "--tag=<script>alert('cmd')</script>" in body
    assert "Custom<script>alert('rule')</script>" in body
    # The planted cProfile profile (synthetic_run.cc): recursive calls as pstats writes them.
    python = browser.text("#python")
    assert "Steps 40-42" in python and "300/30" in python
    assert "<script>alert(\"py\")</script>" in python

    # Hovering a time series shows values (dygraphs' legend follows the mouse): the mouse 40 px
    # right of the chart's centre.
    chart = browser.page.locator(
        "#system div.chart:not(:first-of-type), #system figure div.chart").first
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    browser.page.mouse.move(box["x"] + box["width"] / 2 + 40, box["y"] + box["height"] / 2)
    legend = browser.js(  # the hovered chart's own (the findings draw charts too)
        "var l = args[0].querySelector('.dygraph-legend'); return l ? l.textContent : '';",
        chart.element_handle())
    assert legend.strip(), "no hover legend"

    errors = browser.errors()
    assert errors == [], errors

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = browser.js("return document.body.scrollHeight")
    browser.resize(1300, min(height, 12000))
    assert browser.screenshot(str(ARTIFACTS / "report.png"))


def test_report_pdf(report_html, tmp_path):
    if shutil.which("chromium") is None:
        pytest.fail("Debian's chromium is required for the PDF")
    run = report_html.parent / "run"
    pdf = tmp_path / "report.pdf"
    subprocess.run(_trainprof() + ["report", str(run), "--pdf", str(pdf)], check=True)
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert pdf.stat().st_size > 50_000


@pytest.fixture(scope="module")
def recorded_report(tmp_path_factory) -> Path:
    """The report `record` itself writes at the end of a real (CPU) ResNet training run, with a
    DataLoader worker and operator-level detail for two steps."""
    import sys

    run = tmp_path_factory.mktemp("recorded") / "run"
    proc = subprocess.run(
        trainprof_command() + ["record", "--out", str(run), "--interval", "200ms", "--no-gpu",
                               "--instance-type", "ml.m5.xlarge", "--detail-steps", "8-9", "--",
                               sys.executable, str(REPO / "examples" / "train_resnet_synthetic.py"),
                               "--steps", "24", "--workers", "1", "--eval-batches", "3"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "report.html" in proc.stderr
    return run / "report.html"


def test_recorded_run_report_renders_in_chromium(recorded_report, browser):
    assert recorded_report.exists() and (recorded_report.parent / "report.json").exists()
    browser.open(recorded_report.as_uri())
    for section in SECTIONS:
        assert browser.page.locator(f"#{section}").is_visible(), section
        assert browser.text(f"#{section} h2").strip(), section
    drawn = drawn_charts(browser)
    # System usage, the heatmap and the step-time charts of a real run all draw.
    assert len(drawn) >= 5, drawn
    for chart in drawn:
        assert "could not be drawn" not in chart["text"], chart
        assert chart["canvases"] > 0 and chart["inked"] > 50, chart
    body = browser.text("body")
    assert "train_resnet_synthetic.py" in body          # the command, in the summary
    assert "ml.m5.xlarge" in body and "$" in body        # priced from the catalog
    assert "aten::" in body                               # operators from the detailed steps
    errors = browser.errors()
    assert errors == [], errors
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = browser.js("return document.body.scrollHeight")
    browser.resize(1300, min(height, 12000))
    assert browser.screenshot(str(ARTIFACTS / "report_recorded_run.png"))


def test_recorded_run_report_reads_like_a_monitoring_ui(recorded_report, browser):
    """Issue 18's complaints about the report, checked on the recorded run in Chromium: no table
    row and no chart for a series that is zero throughout (the run's own store, read with the
    Python reader, says which are: network drops and errors on an idle interface are), one line
    naming them instead; every chart's y ticks distinct (no "1 B/s, 1 B/s, 0 B/s"); a legend on
    every chart with several lines; a heatmap tall enough to read; the rest behind "More
    metrics", whose charts draw when it opens; the findings within 3 screens."""
    import trainprof

    frame = trainprof.open(recorded_report.parent).system_metrics().to_pandas()
    grouped = frame.groupby(["metric", "device"])["value"]
    zero = {(m, d) for (m, d), v in grouped if len(v) and (v == 0).all()}
    nonzero = {(m, d) for (m, d), v in grouped if len(v) and (v != 0).any()}
    assert zero and nonzero
    browser.open(recorded_report.as_uri())
    zero_lines = browser.page.locator("#system p.zero").all_text_contents()
    assert zero_lines and all(t.startswith("Zero throughout the run") for t in zero_lines)
    # Rows: metric (title or name) and device; none of the zero series has one.
    rows = browser.js("""
        return Array.from(document.querySelectorAll('#system table.stats tbody tr')).map(
          function (tr) { return Array.from(tr.cells).map(function (c) { return c.textContent; }); });""")
    row_keys = {(r[0], r[1]) for r in rows}
    titles = {"cpu_utilization_ratio": "CPU utilisation", "cpu_iowait_ratio": "CPU I/O wait",
              "memory_used_bytes": "Memory used", "memory_total_bytes": "Memory total",
              "network_receive_bytes_per_second": "Network receive",
              "network_transmit_bytes_per_second": "Network transmit",
              "disk_read_bytes_per_second": "Disk read", "disk_write_bytes_per_second": "Disk write",
              "process_cpu_utilization_ratio": "Training processes: CPU",
              "process_resident_memory_bytes": "Training processes: resident memory"}
    for metric, device in zero:
        key = (titles.get(metric, metric), device or "—")
        assert key not in row_keys, key
        assert titles.get(metric, metric) + " (" in " ".join(zero_lines), metric
    # ... and a series with a non-zero sample keeps its row (per-core CPU rows included).
    for metric, device in nonzero:
        assert (titles.get(metric, metric), device or "—") in row_keys, (metric, device)
    # Charts on the first level: drawn, with distinct y ticks and a legend when several lines.
    charts = browser.js("""
        return Array.from(document.querySelectorAll('#system div.chart')).filter(function (d) {
          return !d.closest('details:not([open])'); }).map(function (d) {
          var ticks = Array.from(d.querySelectorAll('.dygraph-axis-label-y')).map(function (e) {
            return e.textContent; });
          var legend = d.nextElementSibling && d.nextElementSibling.classList.contains('tp-legend')
            ? d.nextElementSibling.textContent : null;
          var spec = JSON.parse(document.getElementById('tp-charts').textContent)[
            Number(d.getAttribute('data-chart'))];
          var canvas = d.querySelector('canvas');
          return {kind: spec.kind, series: (spec.series || []).map(function (s) { return s.label; }),
                  ticks: ticks, legend: legend, height: canvas ? canvas.getBoundingClientRect().height : 0};
        });""")
    assert any(c["kind"] == "band" for c in charts)
    for c in charts:
        assert len(c["ticks"]) == len(set(c["ticks"])), c
        if c["kind"] == "band" and len(c["series"]) > 1:
            assert c["legend"] and all(s in c["legend"] for s in c["series"]), c
        if c["kind"] == "heatmap":
            assert c["height"] >= 60, c
    # "More metrics" is closed; opening it draws its charts.
    more = browser.page.locator("#system details.more").first
    assert more.get_attribute("open") is None
    more.locator("summary").first.click()
    # The "toggle" event is dispatched asynchronously after the click: wait for it to draw.
    hidden = browser.wait("""
        var counts = Array.from(document.querySelectorAll('#system details.more div.chart')).map(
          function (d) { return d.querySelectorAll('canvas').length; });
        return counts.length && counts.every(function (n) { return n > 0; }) ? counts : null;""",
                          timeout=10)
    assert hidden and all(n > 0 for n in hidden), hidden
    more.locator("summary").first.click()
    rules_end = browser.js(
        "var r = document.getElementById('rules').getBoundingClientRect();"
        "return r.bottom + window.scrollY;")
    assert rules_end < 3 * 1600, rules_end
    errors = browser.errors()
    assert errors == [], errors


def test_the_browser_fixture_sees_console_errors_and_uncaught_exceptions(browser, tmp_path):
    """The `errors()` the page tests assert empty is not empty by construction: a page that logs
    an error and throws gives both."""
    page = tmp_path / "bad.html"
    page.write_text("<p>x</p><script>console.error('logged'); setTimeout(function () {"
                    " throw new Error('thrown'); }, 0);</script>")
    browser.errors()
    browser.open(page.as_uri())
    browser.wait("return document.readyState === 'complete'")
    deadline = time.time() + 5
    errors: list[str] = []
    while time.time() < deadline and len(errors) < 2:
        browser.page.wait_for_timeout(100)
        errors += browser.errors()
    assert any("logged" in e for e in errors), errors
    assert any("thrown" in e for e in errors), errors
