#!/usr/bin/env python3
"""Speed of `trainprof fleet` over a generated fleet of run summaries (issue 21): N run
directories, each with run.json and a summary.json shaped like the ones record/import write
(src/cli/run_summary.cc), then `trainprof fleet DIR --json` timed, best of --repeat.

    python3 bench/fleet_bench.py [--runs 10000] [--repeat 2] [--keep DIR]

Prints the wall time and met / NOT met (target: 10 000 runs in <= 5 s on the 2-core machine).
The generated fleet's truth (total, spend per usage type, tag, phase, savings) is returned by
generate() and checked in tests/python/test_fleet.py (the figures are drawn here, summed here;
the fleet view's sums are compared with them).

Under bench/run_all.sh (section fleet, $BENCH_RESULTS set) every repeat's time also goes to its
results file as fleet.10k_runs_s (only for --runs 10000, the size the target is set for); a
total that differs from the generated one is recorded as a skip with the reason, and exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
import results  # noqa: E402 - bench/lib/results.py: the figures for bench/out/results.json

FIGURE = "fleet.10k_runs_s"
TYPES = [  # instance type, $/h (illustrative list prices), GPUs
    ("ml.g5.xlarge", 1.408, 1), ("ml.g5.12xlarge", 7.09, 4), ("ml.p3.2xlarge", 3.825, 1),
    ("ml.p4d.24xlarge", 37.688, 8), ("ml.g4dn.xlarge", 0.7364, 1), ("ml.m5.xlarge", 0.23, 0),
]
REGIONS = [("us-east-1", "USE1"), ("us-west-2", "USW2"), ("eu-west-1", "EU")]
TEAMS = ["vision", "nlp", "speech", "ranking"]
USERS = ["ana", "bo", "chen", "dara", "eli"]
PHASES = ["starting", "downloading", "training", "uploading"]
WHAT_IFS = ["managed_spot", "streaming_input", "rightsize", "mixed_precision"]
DAY_NS = 86_400 * 10**9
START_NS = 1_790_000_000 * 10**9  # 2026-09-21


def generate(root: Path, n: int, seed: int = 21) -> dict:
    """Writes n runs under root; returns the truth the fleet view must find."""
    rng = random.Random(seed)
    truth = {"runs": n, "total": 0.0, "usage": {}, "usage_hours": {}, "team": {}, "phase": {},
             "savings": {}, "savings_runs": {}, "user": {}, "idle": 0.0}
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        itype, price, gpus = rng.choice(TYPES)
        region, code = rng.choice(REGIONS)
        count = rng.choice([1, 1, 1, 2, 4])
        team, user = rng.choice(TEAMS), rng.choice(USERS)
        secs = [rng.randint(60, 600), rng.randint(0, 1800), rng.randint(600, 36000),
                rng.randint(10, 600)]
        billed = sum(secs) * count
        rate = price / 3600.0
        volume_gb = rng.choice([0, 30, 100])
        storage_rate = volume_gb * 0.14 / (30 * 24 * 3600) if volume_gb else 0.0
        start = START_NS + rng.randrange(0, 60 * DAY_NS)
        nodes, compute, storage = [], 0.0, 0.0
        for k in range(count):
            node_secs = sum(secs)
            c, s = node_secs * rate, node_secs * storage_rate
            compute += c
            storage += s
            nodes.append({"node": f"algo-{k + 1}", "instance_type": itype,
                          "billed_seconds": node_secs, "compute_cost_usd": c,
                          "storage_cost_usd": s, "total_cost_usd": c + s,
                          "storage_volume_gb": volume_gb or None,
                          "price": {"region": region, "instance_type": itype,
                                    "price_usd_per_hour": price},
                          "phases": [{"phase": p, "billed_seconds": x, "cost_usd": x * rate}
                                     for p, x in zip(PHASES, secs)]})
        phases = [{"phase": p, "billed_seconds": x * count, "cost_usd": x * count * rate}
                  for p, x in zip(PHASES, secs)]
        idle = rng.uniform(0, 0.5) * compute if gpus else None
        what_ifs = []
        for w in rng.sample(WHAT_IFS, rng.randint(0, 3)):
            saving = rng.uniform(0.05, 0.7) * compute
            what_ifs.append({"id": w, "title": f"{w} for this job", "saving_usd": saving,
                             "new_cost_usd": compute + storage - saving})
        total = compute + storage
        cost = {"run_id": f"gen-{i}", "instance_type": itype, "instance_count": count,
                "billed_instance_seconds": billed, "compute_cost_usd": compute,
                "storage_cost_usd": storage, "total_cost_usd": total,
                "idle_accelerator_cost_usd": idle, "phases": phases, "nodes": nodes,
                "price": {"region": region, "instance_type": itype, "price_usd_per_hour": price},
                "what_ifs": what_ifs, "rules_fired": [], "warnings": [], "notes": []}
        run = {"run_id": f"gen-{i}", "name": f"job-{i}", "source": "record", "format_version": 1,
               "start_ns": start, "end_ns": start + sum(secs) * 10**9, "instance_type": itype,
               "instance_count": count, "tags": {"team": team, "region": region}}
        d = root / f"run-{i:05d}"
        d.mkdir(exist_ok=True)
        (d / "run.json").write_text(json.dumps(run))
        (d / "summary.json").write_text(json.dumps(
            {"summary_version": 1, "user": user, "run": run, "cost": cost, "cost_error": None},
            separators=(",", ":")))
        truth["total"] += total
        ut = f"{code}-Train:{itype}"
        truth["usage"][ut] = truth["usage"].get(ut, 0.0) + compute
        truth["usage_hours"][ut] = truth["usage_hours"].get(ut, 0.0) + billed / 3600.0
        if storage:
            vt = f"{code}-Train:VolumeUsage.gp2"
            truth["usage"][vt] = truth["usage"].get(vt, 0.0) + storage
            truth["usage_hours"][vt] = truth["usage_hours"].get(vt, 0.0) + billed / 3600.0
        truth["team"][team] = truth["team"].get(team, 0.0) + total
        truth["user"][user] = truth["user"].get(user, 0.0) + total
        for p in phases:
            truth["phase"][p["phase"]] = truth["phase"].get(p["phase"], 0.0) + p["cost_usd"]
        for w in what_ifs:
            truth["savings"][w["id"]] = truth["savings"].get(w["id"], 0.0) + w["saving_usd"]
            truth["savings_runs"][w["id"]] = truth["savings_runs"].get(w["id"], 0) + 1
        if idle is not None:
            truth["idle"] += idle
    return truth


def trainprof_cmd() -> list[str]:
    exe = os.environ.get("TRAINPROF_BIN")
    if exe:
        return [exe]
    found = shutil.which("trainprof")
    return [found] if found else [sys.executable, "-m", "trainprof"]


def time_fleet(root: Path, repeat: int) -> tuple[list[float], dict]:
    """Every repeat's wall time and the last answer."""
    times, out = [], {}
    for _ in range(repeat):
        t = time.perf_counter()
        p = subprocess.run(trainprof_cmd() + ["fleet", str(root), "--json"], capture_output=True,
                           text=True, check=True)
        times.append(time.perf_counter() - t)
        out = json.loads(p.stdout)
    return times, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--target-s", type=float, default=5.0)
    ap.add_argument("--keep", help="generate into this directory and keep it")
    a = ap.parse_args()
    if a.runs < 1 or a.repeat < 1:
        ap.error("--runs and --repeat must be at least 1")
    root = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    try:
        truth = generate(root, a.runs)
        times, out = time_fleet(root, a.repeat)
        secs = min(times)
        ok = abs(out["total_cost_usd"] - truth["total"]) <= 1e-6 * max(1.0, truth["total"])
        if a.runs == 10_000:
            if ok:
                results.add(FIGURE, times)
            else:
                results.skip(FIGURE, f"the fleet total ${out['total_cost_usd']:,.2f} differs from "
                                     f"the generated ${truth['total']:,.2f}")
        print(f"fleet of {a.runs:,} runs: {secs:.2f} s (best of {a.repeat}), total "
              f"${out['total_cost_usd']:,.2f} ({'matches' if ok else 'DIFFERS FROM'} the "
              f"generated ${truth['total']:,.2f}); target <= {a.target_s:g} s: "
              f"{'met' if secs <= a.target_s and ok else 'NOT met'}")
        return 0 if ok else 1
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
