"""`trainprof fleet` and `trainprof export parquet`: spend across many runs, and runs as Parquet
(docs/fleet.md).

    trainprof fleet RUNS... [--json | --csv FILE | --parquet DIR | --html FILE] [--instance-type T]
    trainprof export parquet RUNS... --out DIR

RUNS are run directories, directories holding runs (searched 3 levels deep), globs, and object
storage URLs (s3://bucket/prefix: every run under the prefix, found by one paginated listing;
other fsspec URLs such as memory:// or file:// through fsspec). Endpoint and credentials come
from the standard AWS variables (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_PROFILE...).

The fleet view reads each run's summary.json (src/cli/run_summary.h: run.json, the user and
`trainprof cost RUN --json`, written at the end of record and import). A run without one is
summarised once here (the same cost, computed in-process by trainprof._api) and the summary
kept: next to the run when it is writable, else in $XDG_CACHE_HOME/trainprof/summaries.
A run priced with --instance-type (one that `trainprof cost` cannot price: no instance type
named or detected) is cached, never written next to it.

Spend is grouped in Cost Explorer's vocabulary: usage type REGION-Train:<instance type>
(instance hours) and REGION-Train:VolumeUsage.gp2 (the ML storage volume), with REGION the
region code of the price (us-east-1 -> USE1); by phase, tag, user, day and ISO week. Idle spend
is the cost advisor's utilisation-weighted idle-accelerator cost; savings are each what-if's
saving summed over the runs that have it, ranked. Runs without a price are listed as unpriced
(their cost is missing, not zero).

Warm-pool keep-alive time is priced at the instance rate where a DescribeTrainingJob (--billing)
or the run (run.json / tag warm_pool_seconds) says it was used; CUR line items (--billing) are
set beside the measured usage types; savings are also scaled to a month.

The native commands hand their arguments over to `python -m trainprof.fleet fleet|export-parquet`
(src/cli/fleet_command.cc); `record --out URL` and `agent --out URL` start `sync`; the other
native readers call `fetch` and `push` for RUN and --out URLs (src/cli/remote_run.cc).
Exit status: 0 done, 1 failure, 2 usage.
"""


from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from trainprof._fleet_base import (
    DEFAULT_REGION, FleetError, STORAGE_USAGE, UsageError, _num, usage_type,
)
from trainprof._fleet_billing import _job_of, read_billing, reconcile
from trainprof._fleet_parquet import export_main
from trainprof._fleet_runs import find_runs, load_summary
from trainprof._fleet_sync import fetch_main, push_main, sync_main
from trainprof._objstore import Store, _open_out, is_url

# ---------------------------------------------------------------- the fleet view


@dataclass
class RunRow:
    location: str
    name: str
    run_id: str
    source: str
    user: str
    tags: dict
    start_ns: int
    instance_type: str
    instance_count: int
    region: str
    priced: bool
    cost_error: str
    total_cost_usd: float
    compute_cost_usd: float
    storage_cost_usd: float
    billed_instance_seconds: float
    idle_cost_usd: float | None
    usage: list  # (usage_type, hours, cost_usd)
    phases: list  # (phase, billed_seconds, cost_usd)
    what_ifs: list  # (id, title, saving_usd)
    rules_fired: list
    job: str = ""  # the training job it is matched to (tag training_job, else its name)
    end_ns: int = 0
    price_usd_per_hour: float | None = None
    warm_pool: dict | None = None  # {"seconds", "cost_usd", "usd_per_hour", "source"}
    prices: list = field(default_factory=list)  # the prices it was billed at, dated and sourced


def run_row(s: dict) -> RunRow:
    run = s["run"]
    cost = s.get("cost") or {}
    tags = run.get("tags") if isinstance(run.get("tags"), dict) else {}
    tags = {str(k): str(v) for k, v in list(tags.items())[:256]}
    user = str(run.get("user") or tags.get("user") or s.get("user") or "")
    price = cost.get("price") or {}
    region = str(price.get("region") or tags.get("region") or run.get("region")
                 or DEFAULT_REGION)
    usage = []
    nodes = cost.get("nodes") or []
    for n in nodes[:100_000]:
        np_ = n.get("price") or price
        hours = _num(n.get("billed_seconds")) / 3600.0
        itype = str(n.get("instance_type") or cost.get("instance_type") or "unknown")
        usage.append((usage_type(np_, region, itype), hours, _num(n.get("compute_cost_usd"))))
        if _num(n.get("storage_cost_usd")) > 0:
            usage.append((usage_type(np_, region, itype, storage=True), hours,
                          _num(n.get("storage_cost_usd"))))
    if cost and not nodes:
        hours = _num(cost.get("billed_instance_seconds")) / 3600.0
        itype = str(cost.get("instance_type") or "unknown")
        usage.append((usage_type(price, region, itype), hours, _num(cost.get("compute_cost_usd"))))
        if _num(cost.get("storage_cost_usd")) > 0:
            usage.append((usage_type(price, region, itype, storage=True), hours,
                          _num(cost.get("storage_cost_usd"))))
    phases = [(str(p.get("phase")), _num(p.get("billed_seconds")), _num(p.get("cost_usd")))
              for p in (cost.get("phases") or [])[:64]]
    what_ifs = [(str(w.get("id") or w.get("title")), str(w.get("title") or w.get("id")),
                 _num(w.get("saving_usd"))) for w in (cost.get("what_ifs") or [])[:64]]
    idle = cost.get("idle_accelerator_cost_usd")
    start = run.get("start_ns")
    return RunRow(
        location=s.get("_location", ""), name=str(run.get("name") or ""),
        run_id=str(run.get("run_id") or ""), source=str(run.get("source") or ""), user=user,
        tags=tags, start_ns=int(start) if isinstance(start, int) else 0,
        instance_type=str(cost.get("instance_type") or run.get("instance_type") or ""),
        instance_count=int(_num(cost.get("instance_count") or run.get("instance_count"))),
        region=region, priced=bool(cost), cost_error=str(s.get("cost_error") or ""),
        total_cost_usd=_num(cost.get("total_cost_usd")),
        compute_cost_usd=_num(cost.get("compute_cost_usd")),
        storage_cost_usd=_num(cost.get("storage_cost_usd")),
        billed_instance_seconds=_num(cost.get("billed_instance_seconds")),
        idle_cost_usd=_num(idle) if isinstance(idle, (int, float)) else None,
        usage=usage, phases=phases, what_ifs=what_ifs,
        rules_fired=[str(r) for r in (cost.get("rules_fired") or [])[:256]],
        job=_job_of(s), end_ns=int(run["end_ns"]) if isinstance(run.get("end_ns"), int) else 0,
        price_usd_per_hour=_rate_of(cost), prices=_prices_of(cost))


PRICE_KEYS = ("instance_type", "price_usd_per_hour", "as_of", "source", "spot_as_of",
              "spot_source")


def _prices_of(cost: dict) -> list:
    """The prices a run was billed at (one per node, or the run's), each with its date and
    source as `trainprof cost` gave them."""
    out = []
    for p in [n.get("price") for n in (cost.get("nodes") or [])[:100_000]] or [cost.get("price")]:
        if not isinstance(p, dict):
            continue
        usd = p.get("price_usd_per_hour")
        if not isinstance(usd, (int, float)) or isinstance(usd, bool):
            continue
        # A summary is read, not trusted: every field but the price is text or missing.
        row = tuple(float(usd) if k == "price_usd_per_hour"
                    else (str(p[k])[:1000] if p.get(k) is not None else None)
                    for k in PRICE_KEYS)
        if row not in out:
            out.append(row)
    return out


def _rate_of(cost: dict) -> float | None:
    """The run's hourly instance price (its price, else its first node's)."""
    for p in [cost.get("price")] + [n.get("price") for n in (cost.get("nodes") or [])[:1]]:
        if isinstance(p, dict) and isinstance(p.get("price_usd_per_hour"), (int, float)):
            return float(p["price_usd_per_hour"])
    return None


MAX_WARM_POOL_SECONDS = 366 * 86400  # per instance; more is not a keep-alive time
WARM_POOL_KEY = "warm_pool_seconds"


def warm_pool_of(s: dict, describe: dict) -> tuple[float, str] | None:
    """Warm-pool keep-alive seconds billed for a run (all its instances), and where they come
    from: the job's DescribeTrainingJob (WarmPoolStatus.ResourceRetainedBillableTimeInSeconds
    x InstanceCount, as AWS documents the bill), else the run's run.json or tag
    `warm_pool_seconds` (per instance, as SageMaker reports it, x the run's instance count)."""
    d = describe.get(_job_of(s))
    if d is not None and isinstance(d.get("warm_pool_billed_seconds"), (int, float)) \
            and not isinstance(d["warm_pool_billed_seconds"], bool) \
            and d["warm_pool_billed_seconds"] > 0:
        secs = float(d["warm_pool_billed_seconds"])
        if secs > MAX_WARM_POOL_SECONDS:
            raise FleetError(f"job {d['job']}: ResourceRetainedBillableTimeInSeconds {secs:.0f} "
                             f"is more than {MAX_WARM_POOL_SECONDS}")
        return (secs * d["instance_count"],
                f"DescribeTrainingJob {d['job']}: WarmPoolStatus."
                f"ResourceRetainedBillableTimeInSeconds {secs:.0f} x InstanceCount "
                f"{d['instance_count']}")
    run = s["run"]
    tags = run.get("tags") if isinstance(run.get("tags"), dict) else {}
    for where, val in (("run.json", run.get(WARM_POOL_KEY)), ("tag", tags.get(WARM_POOL_KEY))):
        if val is None:
            continue
        try:
            secs = float(val)
        except (TypeError, ValueError):
            secs = float("nan")
        if not 0 <= secs <= MAX_WARM_POOL_SECONDS:
            raise FleetError(f"{s.get('_location', '')}: {where} {WARM_POOL_KEY}={val!r}: not a "
                             f"number of seconds between 0 and {MAX_WARM_POOL_SECONDS}")
        if secs == 0:
            return None
        cost = s.get("cost") or {}
        count = cost.get("instance_count") or run.get("instance_count") or 1
        count = int(count) if isinstance(count, int) and 0 < count <= 100_000 else 1
        return secs * count, f"{where} {WARM_POOL_KEY}={val} x instance count {count}"
    return None


def apply_warm_pool(row: RunRow, s: dict, describe: dict) -> None:
    """Prices the run's warm-pool keep-alive time at its instance rate, into its total, its
    usage type's hours and cost and a phase of its own ("warm_pool")."""
    found = warm_pool_of(s, describe)
    if found is None or not row.priced:
        return
    secs, source = found
    if row.price_usd_per_hour is None:
        row.warm_pool = {"seconds": secs, "cost_usd": None, "usd_per_hour": None,
                         "source": source + "; no hourly price to price it"}
        return
    cost = secs * row.price_usd_per_hour / 3600.0
    # The retained instances keep their ML storage volume (NOTES.md section 2.6: "plus their ML
    # storage"), at the run's own storage rate per instance-second.
    storage = 0.0
    if row.storage_cost_usd > 0 and row.billed_instance_seconds > 0:
        storage = secs * row.storage_cost_usd / row.billed_instance_seconds
    row.warm_pool = {"seconds": secs, "cost_usd": cost + storage, "instance_cost_usd": cost,
                     "storage_cost_usd": storage, "usd_per_hour": row.price_usd_per_hour,
                     "source": source}
    row.total_cost_usd += cost + storage
    row.compute_cost_usd += cost
    row.storage_cost_usd += storage
    instance_usage = next((u for u in row.usage if not u[0].endswith(STORAGE_USAGE)), None)
    ut = instance_usage[0] if instance_usage else usage_type({}, row.region,
                                                             row.instance_type or "unknown")
    added = [(ut, secs / 3600.0, cost)]
    storage_usage = next((u for u in row.usage if u[0].endswith(STORAGE_USAGE)), None)
    if storage > 0 and storage_usage is not None:
        added.append((storage_usage[0], secs / 3600.0, storage))
    row.usage = row.usage + added
    row.phases = row.phases + [("warm_pool", secs, cost + storage)]


def _day(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d") if ns \
        else "unknown"


def _week(ns: int) -> str:
    if not ns:
        return "unknown"
    y, w, _ = dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).isocalendar()
    return f"{y}-W{w:02d}"


def _ranked(d: dict, key: str, extra=None) -> list:
    rows = []
    for k, v in d.items():
        r = {key: k, "cost_usd": v[0], "runs": v[1]}
        if extra:
            r.update(extra(k, v))
        rows.append(r)
    rows.sort(key=lambda r: (-r["cost_usd"], str(r[key])))
    return rows


MONTH_DAYS = 30.0


def _iso(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def fleet_period(rows: list[RunRow]) -> dict | None:
    """The time the fleet covers: the first run's start to the last run's end (its start when
    it has no end). Savings a month are scaled from it to 30 days; a fleet covering less than
    a day counts as one day (no month extrapolated from minutes)."""
    starts = [r.start_ns for r in rows if r.start_ns > 0]
    if not starts:
        return None
    first = min(starts)
    last = max(max(r.end_ns, r.start_ns) for r in rows if r.start_ns > 0)
    days = (last - first) / 86_400e9
    return {"start": _iso(first), "end": _iso(last), "days": days,
            "scaled_from_days": max(days, 1.0)}


def _billed_by_usage(rows: list[RunRow], cur: dict) -> tuple[dict, dict]:
    """CUR line items of the fleet's jobs per usage type ({type: [amount, cost, jobs]}) and
    what the CUR holds for training jobs that are not among the runs."""
    jobs = {r.job for r in rows if r.job}
    by_type: dict = {}
    other = {"jobs": 0, "cost_usd": 0.0}
    for job, c in cur.items():
        if job not in jobs:
            other["jobs"] += 1
            other["cost_usd"] += c["compute_cost_usd"] + c["storage_cost_usd"]
            continue
        for ut, (amount, cost) in c["by_usage"].items():
            v = by_type.setdefault(ut, [0.0, 0.0, set()])
            v[0] += amount
            v[1] += cost
            v[2].add(job)
    return by_type, other


def aggregate(rows: list[RunRow], top: int = 10, cur: dict | None = None) -> dict:
    priced = [r for r in rows if r.priced]
    total = sum(r.total_cost_usd for r in priced)
    usage: dict = {}
    phase: dict = {}
    tag: dict = {}
    user: dict = {}
    day: dict = {}
    week: dict = {}
    itype: dict = {}
    day_itype: dict = {}
    savings: dict = {}
    idle = 0.0
    idle_runs = 0
    tag_keys = sorted({k for r in priced for k in r.tags})
    for r in priced:
        for ut, hours, c in r.usage:
            u = usage.setdefault(ut, [0.0, 0.0, set()])
            u[0] += hours
            u[1] += c
            u[2].add(r.location)
        for ph, secs, c in r.phases:
            p = phase.setdefault(ph, [0.0, 0.0, 0])
            p[0] += secs
            p[1] += c
            p[2] += 1
        for k in tag_keys:
            v = tag.setdefault(k, {}).setdefault(r.tags.get(k), [0.0, 0])
            v[0] += r.total_cost_usd
            v[1] += 1
        for d, key in ((user, r.user), (day, _day(r.start_ns)), (week, _week(r.start_ns)),
                       (itype, r.instance_type)):
            v = d.setdefault(key, [0.0, 0])
            v[0] += r.total_cost_usd
            v[1] += 1
        v = day_itype.setdefault((_day(r.start_ns), r.instance_type), [0.0, 0])
        v[0] += r.total_cost_usd
        v[1] += 1
        if r.idle_cost_usd is not None:
            idle += r.idle_cost_usd
            idle_runs += 1
        for wid, title, saving in r.what_ifs:
            v = savings.setdefault(wid, [0.0, 0, title])
            v[0] += saving
            v[1] += 1
    by_usage = [{"usage_type": k, "hours": v[0], "cost_usd": v[1], "runs": len(v[2])}
                for k, v in usage.items()]
    billed_other = None
    if cur is not None:
        billed, billed_other = _billed_by_usage(priced, cur)
        for u in by_usage:
            b = billed.pop(u["usage_type"], None)
            u["billed_usage_amount"] = b[0] if b else None
            u["billed_cost_usd"] = b[1] if b else None
            u["billed_jobs"] = len(b[2]) if b else 0
        for k, b in billed.items():  # billed, never measured: shown, not hidden
            by_usage.append({"usage_type": k, "hours": 0.0, "cost_usd": 0.0, "runs": 0,
                             "billed_usage_amount": b[0], "billed_cost_usd": b[1],
                             "billed_jobs": len(b[2])})
    by_usage.sort(key=lambda r: (-r["cost_usd"], -(r.get("billed_cost_usd") or 0.0),
                                 r["usage_type"]))
    period = fleet_period(priced)
    month = MONTH_DAYS / period["scaled_from_days"] if period else None
    warm = [r for r in priced if r.warm_pool]
    by_phase = [{"phase": k, "billed_seconds": v[0], "hours": v[0] / 3600.0, "cost_usd": v[1],
                 "runs": v[2], "share": v[1] / total if total else None} for k, v in phase.items()]
    by_phase.sort(key=lambda r: (-r["cost_usd"], r["phase"]))
    out = {
        "runs": len(rows),
        "priced_runs": len(priced),
        "total_cost_usd": total,
        "idle_cost_usd": idle if idle_runs else None,
        "idle_measured_runs": idle_runs,
        "idle_share": idle / total if idle_runs and total else None,
        "by_usage_type": by_usage,
        "by_phase": by_phase,
        "by_tag": {k: [{"value": v, "cost_usd": c[0], "runs": c[1]}
                       for v, c in sorted(d.items(), key=lambda x: (-x[1][0], str(x[0])))]
                   for k, d in tag.items()},
        "by_user": _ranked(user, "user"),
        "by_instance_type": _ranked(itype, "instance_type"),
        "by_day": sorted(_ranked(day, "day"), key=lambda r: r["day"]),
        "by_week": sorted(_ranked(week, "week"), key=lambda r: r["week"]),
        "by_day_instance_type": [{"day": k[0], "instance_type": k[1], "cost_usd": v[0],
                                  "runs": v[1]} for k, v in sorted(day_itype.items())],
        "period": period,
        "savings": sorted(({"what": k, "title": v[2], "runs": v[1], "saving_usd": v[0],
                            "saving_usd_per_month": v[0] * month if month else None}
                           for k, v in savings.items()),
                          key=lambda r: (-r["saving_usd"], r["what"])),
        "warm_pool": {
            "seconds": sum(r.warm_pool["seconds"] for r in warm),
            "cost_usd": sum(r.warm_pool["cost_usd"] or 0.0 for r in warm),
            "runs": [{"run": r.location, "job": r.job, **r.warm_pool} for r in warm],
        },
        "top_runs": [{"run": r.location, "name": r.name, "instance_type": r.instance_type,
                      "total_cost_usd": r.total_cost_usd, "idle_cost_usd": r.idle_cost_usd,
                      "idle_share": (r.idle_cost_usd / r.total_cost_usd
                                     if r.idle_cost_usd is not None and r.total_cost_usd
                                     else None),
                      "report": _report_of(r.location)}
                     for r in sorted(priced, key=lambda r: -r.total_cost_usd)[:top]],
        "unpriced": [{"run": r.location, "why": r.cost_error} for r in rows if not r.priced],
        "prices": _prices_used(priced),
    }
    if billed_other is not None:
        out["billed_other_jobs"] = billed_other
    return out


def _prices_used(priced: list) -> list:
    """Every price the fleet's dollars rest on, with its date and source and how many runs it
    priced (every figure shows its date and source)."""
    runs: dict = {}
    for r in priced:
        for p in r.prices:
            runs[p] = runs.get(p, 0) + 1
    return [dict(zip(PRICE_KEYS, p), runs=n)
            for p, n in sorted(runs.items(), key=lambda x: (str(x[0][0]), -x[1]))]


def _report_of(location: str) -> str | None:
    """The run's report.html (path), when a local run has one."""
    if not location or is_url(location):
        return None
    f = Path(location) / "report.html"
    return str(f.resolve()) if f.is_file() else None


def _usd(x) -> str:
    if x is None:
        return "n/a"
    return f"${x:,.2f}" if abs(x) >= 0.01 or x == 0 else f"${x:.4f}"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip()
                     for r in rows) + "\n"


def render_text(a: dict) -> str:
    o = io.StringIO()
    o.write(f"fleet: {a['runs']} runs ({a['priced_runs']} priced), total {_usd(a['total_cost_usd'])}"
            f", idle accelerators {_usd(a['idle_cost_usd'])}"
            + (f" ({a['idle_share']:.0%})" if a["idle_share"] is not None else "")
            + f" over {a['idle_measured_runs']} runs with GPU utilisation\n\n")
    if "billed_other_jobs" in a:  # CUR line items beside what was measured
        o.write(_table([["usage type", "hours", "cost", "runs", "billed (CUR)", "CUR amount"]]
                       + [[u["usage_type"], f"{u['hours']:.2f}", _usd(u["cost_usd"]),
                           str(u["runs"]), _usd(u["billed_cost_usd"]),
                           f"{u['billed_usage_amount']:.3f}"
                           if u["billed_usage_amount"] is not None else "n/a"]
                          for u in a["by_usage_type"]]))
        other = a["billed_other_jobs"]
        o.write(f"(CUR: {other['jobs']} more training jobs, not among the runs, billed "
                f"{_usd(other['cost_usd'])})\n\n")
    else:
        o.write(_table([["usage type", "hours", "cost", "runs"]]
                       + [[u["usage_type"], f"{u['hours']:.2f}", _usd(u["cost_usd"]),
                           str(u["runs"])] for u in a["by_usage_type"]]) + "\n")
    o.write(_table([["phase", "hours", "cost", "share"]]
                   + [[p["phase"], f"{p['hours']:.2f}", _usd(p["cost_usd"]),
                       f"{p['share']:.0%}" if p["share"] is not None else "n/a"]
                      for p in a["by_phase"]]) + "\n")
    for key, vals in a["by_tag"].items():
        o.write(_table([[f"tag {key}", "cost", "runs"]]
                       + [[str(v["value"]) if v["value"] is not None else "(untagged)",
                           _usd(v["cost_usd"]), str(v["runs"])] for v in vals]) + "\n")
    o.write(_table([["user", "cost", "runs"]]
                   + [[u["user"] or "(unknown)", _usd(u["cost_usd"]), str(u["runs"])]
                      for u in a["by_user"]]) + "\n")
    o.write(_table([["week", "cost", "runs"]]
                   + [[w["week"], _usd(w["cost_usd"]), str(w["runs"])] for w in a["by_week"]])
            + "\n")
    wp = a.get("warm_pool") or {}
    if wp.get("runs"):
        o.write(f"warm-pool keep-alive: {wp['seconds'] / 3600:.2f} instance-hours, "
                f"{_usd(wp['cost_usd'])} over {len(wp['runs'])} runs (phase warm_pool)\n")
        for w in wp["runs"][:10]:
            o.write(f"  {w['run']}: {w['seconds']:.0f} s, {_usd(w['cost_usd'])} ({w['source']})\n")
        o.write("\n")
    if a["savings"]:
        per = a.get("period")
        o.write(_table([["saving (what-if)", "runs", "saving", "a month"]]
                       + [[s["what"], str(s["runs"]), _usd(s["saving_usd"]),
                           "-" + _usd(s["saving_usd_per_month"]) + " a month"
                           if s.get("saving_usd_per_month") is not None else "n/a"]
                          for s in a["savings"]]))
        if per:
            o.write(f"(a month: the savings of the fleet's {per['days']:.2f} days, {per['start']} "
                    f"to {per['end']}, scaled to 30 days"
                    + (" counting it as one day" if per["days"] < 1 else "") + ")\n")
        o.write("\n")
    if a.get("reconciliation"):
        def sec(x):
            return f"{x:.0f}" if isinstance(x, (int, float)) else "n/a"
        o.write(_table([["job (billed vs measured)", "billed s", "CUR s", "measured s", "status"]]
                       + [[r["job"], sec(r.get("billable_seconds")),
                           sec(r.get("cur_instance_seconds")), sec(r["measured_billed_seconds"]),
                           r["status"]] for r in a["reconciliation"]]) + "\n")
        for r in a["reconciliation"]:
            for p in r["problems"]:
                o.write(f"  {r['job']}: {p}\n")
    if a.get("prices"):
        o.write(_table([["priced at", "$/h", "price of", "spot figure of", "runs"]]
                       + [[p["instance_type"] or "?", f"{p['price_usd_per_hour']:.4f}",
                           p["as_of"] or "n/a", p["spot_as_of"] or "-", str(p["runs"])]
                          for p in a["prices"]]))
        for src in sorted({p["source"] for p in a["prices"] if p["source"]}
                          | {p["spot_source"] for p in a["prices"] if p["spot_source"]}):
            o.write(f"  source: {src}\n")
        o.write("\n")
    if a["unpriced"]:
        o.write(f"{len(a['unpriced'])} runs without a price (cost n/a, not counted):\n")
        for u in a["unpriced"][:10]:
            o.write(f"  {u['run']}: {u['why']}\n")
        if len(a["unpriced"]) > 10:
            o.write(f"  ... and {len(a['unpriced']) - 10} more (--json lists all)\n")
    return o.getvalue()


def write_csv(a: dict, out) -> None:
    """Long form: dimension, key, hours, cost_usd, runs (one row per group)."""
    w = csv.writer(out)
    w.writerow(["dimension", "key", "hours", "cost_usd", "runs"])
    w.writerow(["total", "", "", a["total_cost_usd"], a["priced_runs"]])
    w.writerow(["idle", "", "", a["idle_cost_usd"] if a["idle_cost_usd"] is not None else "",
                a["idle_measured_runs"]])
    for u in a["by_usage_type"]:
        w.writerow(["usage_type", u["usage_type"], u["hours"], u["cost_usd"], u["runs"]])
    for p in a["by_phase"]:
        w.writerow(["phase", p["phase"], p["hours"], p["cost_usd"], p["runs"]])
    for k, vals in a["by_tag"].items():
        for v in vals:
            w.writerow([f"tag:{k}", "" if v["value"] is None else v["value"], "", v["cost_usd"],
                        v["runs"]])
    for dim, key in (("by_user", "user"), ("by_instance_type", "instance_type"),
                     ("by_day", "day"), ("by_week", "week")):
        for v in a[dim]:
            w.writerow([key, v[key], "", v["cost_usd"], v["runs"]])
    for s in a["savings"]:
        w.writerow(["saving", s["what"], "", s["saving_usd"], s["runs"]])
        if s.get("saving_usd_per_month") is not None:
            w.writerow(["saving_per_month", s["what"], "", s["saving_usd_per_month"], s["runs"]])
    if a.get("warm_pool", {}).get("runs"):
        wp = a["warm_pool"]
        w.writerow(["warm_pool", "", wp["seconds"] / 3600.0, wp["cost_usd"], len(wp["runs"])])
    for u in a["by_usage_type"]:
        if u.get("billed_cost_usd") is not None:
            w.writerow(["billed_usage_type", u["usage_type"], "", u["billed_cost_usd"],
                        u["billed_jobs"]])


def write_fleet_parquet(rows: list[RunRow], out: str) -> None:
    """runs.parquet (one row per run), usage.parquet, phases.parquet, what_ifs.parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    local, finish = _open_out(out)
    runs = {k: [] for k in ("run", "name", "run_id", "source", "user", "start_ns", "day", "week",
                            "instance_type", "instance_count", "region", "priced",
                            "total_cost_usd", "compute_cost_usd", "storage_cost_usd",
                            "billed_instance_seconds", "idle_cost_usd", "tags")}
    usage = {k: [] for k in ("run", "usage_type", "hours", "cost_usd")}
    phases = {k: [] for k in ("run", "phase", "billed_seconds", "cost_usd")}
    whatifs = {k: [] for k in ("run", "what", "title", "saving_usd")}
    for r in rows:
        for k, v in (("run", r.location), ("name", r.name), ("run_id", r.run_id),
                     ("source", r.source), ("user", r.user), ("start_ns", r.start_ns),
                     ("day", _day(r.start_ns)), ("week", _week(r.start_ns)),
                     ("instance_type", r.instance_type), ("instance_count", r.instance_count),
                     ("region", r.region), ("priced", r.priced),
                     ("total_cost_usd", r.total_cost_usd if r.priced else None),
                     ("compute_cost_usd", r.compute_cost_usd if r.priced else None),
                     ("storage_cost_usd", r.storage_cost_usd if r.priced else None),
                     ("billed_instance_seconds", r.billed_instance_seconds if r.priced else None),
                     ("idle_cost_usd", r.idle_cost_usd), ("tags", list(r.tags.items()))):
            runs[k].append(v)
        for ut, h, c in r.usage:
            for k, v in (("run", r.location), ("usage_type", ut), ("hours", h), ("cost_usd", c)):
                usage[k].append(v)
        for ph, s, c in r.phases:
            for k, v in (("run", r.location), ("phase", ph), ("billed_seconds", s),
                         ("cost_usd", c)):
                phases[k].append(v)
        for wid, title, s in r.what_ifs:
            for k, v in (("run", r.location), ("what", wid), ("title", title), ("saving_usd", s)):
                whatifs[k].append(v)
    try:
        runs_t = pa.table({**{k: v for k, v in runs.items() if k != "tags"},
                           "tags": pa.array(runs["tags"], type=pa.map_(pa.string(), pa.string()))})
        pq.write_table(runs_t, local / "runs.parquet")
        pq.write_table(pa.table(usage, schema=pa.schema([
            ("run", pa.string()), ("usage_type", pa.string()), ("hours", pa.float64()),
            ("cost_usd", pa.float64())])), local / "usage.parquet")
        pq.write_table(pa.table(phases, schema=pa.schema([
            ("run", pa.string()), ("phase", pa.string()), ("billed_seconds", pa.float64()),
            ("cost_usd", pa.float64())])), local / "phases.parquet")
        pq.write_table(pa.table(whatifs, schema=pa.schema([
            ("run", pa.string()), ("what", pa.string()), ("title", pa.string()),
            ("saving_usd", pa.float64())])), local / "what_ifs.parquet")
    finally:
        finish()


def fleet_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="trainprof fleet", description=(
        "Spend across many runs in Cost Explorer's vocabulary (usage type, phase, tag, user, "
        "day, week), idle spend and the what-ifs' savings summed over the fleet (docs/fleet.md)."))
    ap.add_argument("runs", nargs="+", metavar="RUNS",
                    help="run directories, directories of runs, globs, s3://bucket/prefix URLs")
    out = ap.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the fleet as JSON")
    out.add_argument("--csv", metavar="FILE", help="write the groups as CSV ('-': stdout)")
    out.add_argument("--parquet", metavar="DIR",
                     help="write runs/usage/phases/what_ifs .parquet into DIR (or a URL)")
    out.add_argument("--html", metavar="FILE",
                     help="write the fleet page (one self-contained HTML file; or a URL)")
    ap.add_argument("--instance-type", default="",
                    help="price the runs that have no price otherwise (no instance type named or "
                         "detected) as this type")
    ap.add_argument("--top", type=int, default=10, help="top jobs listed (default 10)")
    ap.add_argument("--billing", nargs="+", default=[], metavar="FILE",
                    help="what AWS billed: DescribeTrainingJob .json, CUR 2.0 .csv[.gz] / "
                         ".parquet; reconciled per job with the runs (tag training_job=NAME)")
    a = ap.parse_args(argv)
    if not 0 <= a.top <= 10_000:
        raise UsageError("--top: between 0 and 10000")
    refs = find_runs(a.runs)
    scratch = Path(tempfile.mkdtemp(prefix="trainprof-fleet-"))
    try:
        summaries = [load_summary(r, a.instance_type, scratch) for r in refs]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    describe, cur = read_billing(a.billing) if a.billing else ({}, {})
    has_cur = any(b.lower().endswith((".csv", ".csv.gz", ".parquet")) for b in a.billing)
    rows = [run_row(s) for s in summaries]
    for r, s in zip(rows, summaries):
        apply_warm_pool(r, s, describe)
    agg = aggregate(rows, a.top, cur if has_cur else None)
    if a.billing:
        agg["reconciliation"] = reconcile(summaries, describe, cur)
    if a.json:
        json.dump(agg, sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif a.csv:
        if a.csv == "-":
            write_csv(agg, sys.stdout)
        elif is_url(a.csv):
            buf = io.StringIO()
            write_csv(agg, buf)
            Store(a.csv).write(a.csv, buf.getvalue().encode())
        else:
            with open(a.csv, "w", newline="") as f:
                write_csv(agg, f)
    elif a.parquet:
        write_fleet_parquet(rows, a.parquet)
    elif a.html:
        from trainprof._fleet_page import render_html
        page = render_html(agg).encode()
        if is_url(a.html):
            Store(a.html).write(a.html, page)
        else:
            Path(a.html).write_bytes(page)
    else:
        sys.stdout.write(render_text(agg))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    verbs = {"fleet": fleet_main, "export-parquet": export_main, "sync": sync_main,
             "fetch": fetch_main, "push": push_main}
    if not argv or argv[0] not in verbs:
        print("usage: python -m trainprof.fleet fleet|export-parquet|sync|fetch|push ARGS...",
              file=sys.stderr)
        return 2
    try:
        return verbs[argv[0]](argv[1:])
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except FleetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
