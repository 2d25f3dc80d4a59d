"""The fleet page (`trainprof fleet RUNS --html OUT`, docs/fleet.md) as a person sees it.

Its numbers are checked against the fleet --json document (one source of truth: the page embeds
it) and against totals computed here, independently, from the generated runs' summaries; it is
rendered by headless Chromium (Playwright, as test_report_browser.py): no console errors, the
spend chart drawn, names from runs shown as text, never run. Screenshot: tests/artifacts/."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, trainprof_command

sys.path.insert(0, str(REPO / "bench"))
import fleet_bench  # noqa: E402

ARTIFACTS = REPO / "tests" / "artifacts"
EVIL = '<img src=x onerror="window.__pwned=1">&"job\''


def _usd(x: float) -> str:
    return f"${x:,.2f}"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    base = tmp_path_factory.mktemp("fleetpage")
    root = base / "runs"
    fleet_bench.generate(root, 30)
    # Hand-computed truth from the summaries, and one hostile name; the most expensive run
    # has a report.html to link to.
    summaries = {d: json.loads((d / "summary.json").read_text()) for d in sorted(root.iterdir())}
    top = max(summaries, key=lambda d: summaries[d]["cost"]["total_cost_usd"])
    s = summaries[top]
    s["run"]["name"] = EVIL
    (top / "summary.json").write_text(json.dumps(s))
    (top / "report.html").write_text("<html>report</html>")
    truth = {"total": 0.0, "idle": 0.0, "cells": {}, "top": top}
    for s in summaries.values():
        c = s["cost"]
        truth["total"] += c["total_cost_usd"]
        if c.get("idle_accelerator_cost_usd") is not None:
            truth["idle"] += c["idle_accelerator_cost_usd"]
        day = dt.datetime.fromtimestamp(s["run"]["start_ns"] / 1e9, dt.timezone.utc).strftime(
            "%Y-%m-%d")
        key = (day, c["instance_type"])
        truth["cells"][key] = truth["cells"].get(key, 0.0) + c["total_cost_usd"]
    env = dict(__import__("os").environ, XDG_CACHE_HOME=str(base / "cache"),
               TRAINPROF_PYTHON=sys.executable)
    out = base / "fleet.html"
    subprocess.run([*trainprof_command(), "fleet", str(root), "--html", str(out)], check=True,
                   env=env, timeout=120)
    doc = json.loads(subprocess.run([*trainprof_command(), "fleet", str(root), "--json"],
                                    check=True, env=env, capture_output=True, text=True,
                                    timeout=120).stdout)
    return out, doc, truth


def test_page_numbers_match_json_and_summaries(page):
    out, doc, truth = page
    html = out.read_text()
    assert doc["total_cost_usd"] == pytest.approx(truth["total"], rel=1e-9)
    assert doc["idle_cost_usd"] == pytest.approx(truth["idle"], rel=1e-9)
    cells = {(c["day"], c["instance_type"]): c["cost_usd"] for c in doc["by_day_instance_type"]}
    assert cells == pytest.approx(truth["cells"], rel=1e-9)
    assert f'data-k="total_cost_usd">{_usd(truth["total"])}<' in html
    assert f'data-k="idle_cost_usd">{_usd(truth["idle"])}<' in html
    share = f'{truth["idle"] / truth["total"] * 100:.1f} %'
    assert f'data-k="idle_share">{share}<' in html
    # The name is escaped wherever it appears; the raw tag never is.
    assert '<img src=x' not in html
    assert "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;&amp;&quot;job&#x27;" in html


def test_page_in_chromium(page, browser):
    out, doc, truth = page
    browser.open(out.as_uri())
    got = browser.js("""
        var div = document.querySelector('div.chart'), inked = 0;
        div.querySelectorAll('canvas').forEach(function (c) {
          if (!c.width || !c.height) return;
          var d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
          for (var i = 3; i < d.length; i += 4 * 7) if (d[i] !== 0) inked++;
        });
        var rows = Array.from(document.querySelectorAll('table[data-table=top_runs] tr')).slice(1);
        return {canvases: div.querySelectorAll('canvas').length, inked: inked,
                text: div.textContent, pwned: window.__pwned === undefined ? null : 1,
                embedded: JSON.parse(document.getElementById('tp-fleet').textContent),
                top: rows.map(function (r) {
                  var a = r.querySelector('a');
                  return {name: r.cells[0].textContent, cost: r.cells[2].textContent,
                          share: r.cells[4].textContent, href: a ? a.href : null};
                }),
                savings: document.querySelectorAll('table[data-table=savings] tr').length - 1};
    """)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.screenshot(str(ARTIFACTS / "fleet_page.png"))
    errors = browser.errors()
    assert errors == []
    assert got["canvases"] > 0 and got["inked"] > 50, got["text"]
    assert got["pwned"] is None
    assert got["embedded"] == doc  # the page's one source of truth is the --json document
    assert got["top"][0]["name"] == EVIL
    assert got["top"][0]["href"] == (truth["top"] / "report.html").resolve().as_uri()
    assert [t["cost"] for t in got["top"]] == [_usd(r["total_cost_usd"]) for r in doc["top_runs"]]
    first = doc["top_runs"][0]
    assert got["top"][0]["share"] == f'{first["idle_cost_usd"] / first["total_cost_usd"] * 100:.1f} %' \
        if first["idle_cost_usd"] is not None else "n/a"
    assert got["savings"] == len(doc["savings"]) > 0


# ---- the dashboard: GET /api/fleet and its Fleet page ------------------------------------------

def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str):
    import urllib.error
    import urllib.request
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_dashboard_fleet(page, browser):
    import socket
    import time
    out, doc, truth = page
    root = truth["top"].parent
    port = _free_port()
    proc = subprocess.Popen([*trainprof_command(), "serve", str(root), "--addr", f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(__import__("os").environ, TRAINPROF_PYTHON=sys.executable,
                                     XDG_CACHE_HOME=str(out.parent / "cache")))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, proc.communicate()
                time.sleep(0.1)
        status, body = _get(url + "/api/fleet")
        assert status == 200, body[:500]
        served = json.loads(body)
        assert served == doc  # the same fleet code, the same document
        assert served["total_cost_usd"] == pytest.approx(truth["total"], rel=1e-9)
        # Cached while nothing changed; a new run (its directory appears) is counted.
        t = time.perf_counter()
        assert json.loads(_get(url + "/api/fleet")[1]) == served
        assert time.perf_counter() - t < 0.5
        extra = root / "run-extra"
        shutil.copytree(root / "run-00000", extra)
        more = json.loads((extra / "summary.json").read_text())["cost"]["total_cost_usd"]
        again = json.loads(_get(url + "/api/fleet")[1])
        assert again["runs"] == doc["runs"] + 1
        assert again["total_cost_usd"] == pytest.approx(truth["total"] + more, rel=1e-9)
        shutil.rmtree(extra)

        browser.open("about:blank")
        browser.errors()
        browser.open(url + "/#/fleet")
        deadline = time.time() + 30
        got = None
        while time.time() < deadline:
            got = browser.js("""
                var v = document.querySelector('[data-k=total_cost_usd]');
                var n = document.querySelectorAll('#fleet-chart canvas').length;
                return v && n ? {total: v.textContent, canvases: n,
                                 top: Array.from(document.querySelectorAll('#fleet-top tr'))
                                        .slice(1).map(function (r) { return r.cells[0].textContent; })}
                              : null;""")
            if got:
                break
            time.sleep(0.2)
        assert got, "the Fleet page did not draw"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        browser.screenshot(str(ARTIFACTS / "dashboard-fleet.png"))
        assert got["total"] == f'${truth["total"]:.2f}'
        assert got["top"][0] == EVIL  # as text
        assert browser.errors() == []
    finally:
        proc.terminate()
        proc.wait(timeout=10)
