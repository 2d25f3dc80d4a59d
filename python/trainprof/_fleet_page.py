"""The fleet page: `trainprof fleet RUNS... --html OUT.html` (docs/fleet.md).

A single HTML file drawn from the fleet --json document alone (every number on the page is one
of the document's, which is embedded too): spend per day stacked by instance type, top jobs with
their idle share and a link to each run's report.html, idle share, usage types, phases, tags,
users and the ranked what-if savings per month. The charts use the report's own assets (dygraphs
and the shared chart layer charts.js), embedded in the native module at build time
(trainprof._core.report_assets), so nothing is copied and nothing is fetched.
"""

from __future__ import annotations

import datetime as dt
import json
from html import escape
from pathlib import Path

_CSS = """
:root { --fg: #222; --bg: #fff; --muted: #777; --grid: #ddd; --accent: #1f77b4; }
body { font: 14px/1.45 system-ui, sans-serif; color: var(--fg); background: var(--bg);
       margin: 0 auto; max-width: 1200px; padding: 0 16px 40px; }
h1 { margin-bottom: 0; } h2 { margin-top: 32px; border-bottom: 1px solid var(--grid); }
.note { color: var(--muted); }
table { border-collapse: collapse; margin: 8px 0; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--grid); text-align: left; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
.chart { width: 100%; height: 320px; }
.cards { display: flex; gap: 16px; flex-wrap: wrap; }
.card { border: 1px solid var(--grid); border-radius: 6px; padding: 8px 14px; }
.card b { display: block; font-size: 20px; }
"""


def _usd(x) -> str:
    return "n/a" if x is None else f"${x:,.2f}"


def _pct(x) -> str:
    return "n/a" if x is None else f"{x * 100:.1f} %"


def _json_for_script(doc) -> str:
    # Inside <script>: no "<" at all (so nothing can end it early), and the text stays ASCII.
    return (json.dumps(doc, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("&", "\\u0026"))


def _table(head: list[str], rows: list[list[str]], numeric: set[int], key: str) -> str:
    """rows: cells already escaped."""
    out = [f'<table data-table="{escape(key)}"><tr>']
    out += [f'<th class="n">{escape(h)}</th>' if i in numeric else f"<th>{escape(h)}</th>"
            for i, h in enumerate(head)]
    out.append("</tr>")
    for r in rows:
        out.append("<tr>" + "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(r)) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _day_seconds(day: str) -> int:
    d = dt.datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=dt.timezone.utc)
    return int(d.timestamp())


def spend_chart(doc: dict) -> dict:
    """The stacked spend per day by instance type, from by_day_instance_type."""
    # Runs without a start time (day "unknown") are in the tables, not on the time axis.
    cells = [c for c in doc.get("by_day_instance_type") or [] if c["day"] != "unknown"]
    days = sorted({c["day"] for c in cells})
    if days:  # every day of the period (a day without runs at $0), and one past the last
        first = dt.date.fromisoformat(days[0])
        span = (dt.date.fromisoformat(days[-1]) - first).days
        if span <= 3660:
            days = [(first + dt.timedelta(days=i)).isoformat() for i in range(span + 2)]
    types = sorted({c["instance_type"] for c in cells},
                   key=lambda t: -sum(c["cost_usd"] for c in cells if c["instance_type"] == t))
    at = {d: i for i, d in enumerate(days)}
    series = []
    for t in types:
        y = [0.0] * len(days)
        for c in cells:
            if c["instance_type"] == t:
                y[at[c["day"]]] += c["cost_usd"]
        series.append({"label": t or "unknown", "y": y})
    return {"kind": "stack", "unit": "usd", "x": [_day_seconds(d) for d in days],
            "series": series}


def render_html(doc: dict, assets: dict | None = None) -> str:
    if assets is None:
        from trainprof import _core
        assets = _core.report_assets()
    e = escape
    period = doc.get("period") or {}
    p = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
         '<meta name="viewport" content="width=device-width, initial-scale=1">'
         '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
         'script-src \'unsafe-inline\'; style-src \'unsafe-inline\'; img-src data:">'
         "<title>trainprof fleet</title><style>", assets["dygraphs_css"], "\n", _CSS,
         "</style></head><body><header><h1>Fleet cost</h1><p class=\"note\">"]
    p.append(e(f"{doc['runs']} runs, {doc['priced_runs']} priced"
               + (f" · {period.get('start')} to {period.get('end')} ({period.get('days'):.1f} days)"
                  if period else "")))
    p.append("</p></header><main>")
    p.append('<section id="summary" class="cards">')
    for key, label, text in (
            ("total_cost_usd", "Total spend", _usd(doc["total_cost_usd"])),
            ("idle_cost_usd", "Idle accelerator spend", _usd(doc.get("idle_cost_usd"))),
            ("idle_share", "Idle share of spend", _pct(doc.get("idle_share"))),
            ("priced_runs", "Priced runs", str(doc["priced_runs"]))):
        p.append(f'<div class="card">{e(label)}<b data-k="{key}">{e(text)}</b></div>')
    p.append("</section>")
    if doc.get("idle_cost_usd") is not None:
        p.append(f'<p class="note">Idle: measured on {doc.get("idle_measured_runs", 0)} runs '
                 "(utilisation-weighted idle-accelerator cost).</p>")

    p.append('<h2 id="over-time">Spend per day by instance type</h2>'
             '<div class="chart" data-chart="0"></div>')

    p.append('<h2 id="top">Top jobs by cost</h2>')
    rows = []
    for r in doc.get("top_runs") or []:
        name = e(r.get("name") or r.get("run") or "")
        if r.get("report"):
            name = f'<a href="{e(Path(r["report"]).as_uri())}">{name}</a>'
        rows.append([name, e(r.get("instance_type") or ""), _usd(r["total_cost_usd"]),
                     _usd(r.get("idle_cost_usd")), _pct(r.get("idle_share")), e(r["run"])])
    p.append(_table(["job", "instance type", "cost", "idle cost", "idle share", "run"], rows,
                    {2, 3, 4}, "top_runs"))

    p.append('<h2 id="savings">What-if savings (ranked)</h2>')
    rows = [[e(s["what"]), e(s.get("title") or ""), str(s["runs"]), _usd(s["saving_usd"]),
             _usd(s.get("saving_usd_per_month"))] for s in doc.get("savings") or []]
    p.append(_table(["what", "title", "runs", "saving", "saving per month"], rows, {2, 3, 4},
                    "savings"))

    p.append('<h2 id="usage">By usage type</h2>')
    rows = [[e(u["usage_type"]), f"{u['hours']:,.2f}", _usd(u["cost_usd"]), str(u["runs"])]
            for u in doc.get("by_usage_type") or []]
    p.append(_table(["usage type", "hours", "cost", "runs"], rows, {1, 2, 3}, "by_usage_type"))

    p.append('<h2 id="phases">By phase</h2>')
    rows = [[e(x["phase"]), f"{x['hours']:,.2f}", _usd(x["cost_usd"]), _pct(x.get("share")),
             str(x["runs"])] for x in doc.get("by_phase") or []]
    p.append(_table(["phase", "hours", "cost", "share", "runs"], rows, {1, 2, 3, 4}, "by_phase"))

    p.append('<h2 id="tags">By tag</h2>')
    for k, vals in (doc.get("by_tag") or {}).items():
        p.append(f"<h3>{e(k)}</h3>")
        rows = [[e("(none)" if v["value"] is None else str(v["value"])), _usd(v["cost_usd"]),
                 str(v["runs"])] for v in vals]
        p.append(_table([k, "cost", "runs"], rows, {1, 2}, "tag:" + k))
    if not doc.get("by_tag"):
        p.append('<p class="note">No run has tags.</p>')

    for key, col, title in (("by_instance_type", "instance_type", "By instance type"),
                            ("by_user", "user", "By user"), ("by_week", "week", "By week")):
        p.append(f'<h2 id="{key}">{e(title)}</h2>')
        rows = [[e(str(x[col])), _usd(x["cost_usd"]), str(x["runs"])]
                for x in doc.get(key) or []]
        p.append(_table([col.replace("_", " "), "cost", "runs"], rows, {1, 2}, key))

    if doc.get("unpriced"):
        p.append('<h2 id="unpriced">Runs without a price</h2>')
        rows = [[e(u["run"]), e(u.get("why") or "")] for u in doc["unpriced"]]
        p.append(_table(["run", "why"], rows, set(), "unpriced"))

    p.append('</main><footer><details><summary>Third-party notices</summary><p>Charts drawn with '
             "dygraphs (MIT licence), embedded from Debian's libjs-dygraphs:</p><pre>")
    p.append(e(assets["dygraphs_notice"]))
    p.append("</pre></details></footer>")
    p.append('<script type="application/json" id="tp-fleet">')
    p.append(_json_for_script(doc))
    p.append('</script><script type="application/json" id="tp-charts">')
    p.append(_json_for_script([spend_chart(doc)]))
    p.append("</script><script>")
    p.append(assets["dygraphs_js"])
    p.append("</script><script>")
    p.append(assets["charts_js"])
    p.append("</script><script>(function () {\n"
             "  var specs = JSON.parse(document.getElementById('tp-charts').textContent);\n"
             "  document.querySelectorAll('[data-chart]').forEach(function (el) {\n"
             "    window.tpCharts.draw(el, specs[+el.getAttribute('data-chart')]);\n"
             "  });\n"
             "})();</script></body></html>\n")
    return "".join(p)
