#!/usr/bin/env python3
"""Speed of trainprof's import + analyze of a Kineto trace against HolisticTraceAnalysis 0.5.0
(load + temporal, kernel and idle breakdowns + comm-comp overlap) on every trace under
../shared/data/traces that HTA loads, one line per trace:

    trace  events  trainprof_s  hta_s  ratio  cpu...  2-step_s ratio  figures  met / NOT met

    python3 bench/hta_ratio.py [--repeat N] [--hta-repeat N] [--json OUT] [--only SUBSTRING]...

trainprof_s is `trainprof analyze TRACE... --hta-compat --json`: one command that imports the
trace(s) into a scratch run and analyses it, as HTA loads a trace and analyses it. 2-step_s is
`trainprof import kineto TRACE... --out RUN` then `trainprof analyze RUN --hta-compat --json`
(two processes; the run is kept, synced to disk, with its summary.json). Times are wall seconds
(and CPU seconds, user + system, children included), the best of the repeats; met / NOT met is
judged on the one command's wall time. trainprof's include starting its process(es); HTA's are
in-process after `import hta` (its interpreter start-up and import are not counted). "figures" says whether the two agree within 0.1 percentage point
(tests/python/hta_oracle.py compare). Needs HTA installed (scripts/requirements-dev.txt) and the
trainprof command ($TRAINPROF_BIN, else the installed package's native executable).

Under bench/run_all.sh (section hta, $BENCH_RESULTS set) the figures also go to its results file
(bench/lib/results.py): hta.all_traces_s (trainprof's wall summed over the sets, one repeat a
pass, HTA's sum as the peer), hta.worst_trace_ratio, hta.traces_met_pct, hta.figures_match_pct.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data" / "traces"
sys.path.insert(0, str(REPO / "tests" / "python"))
sys.path.insert(0, str(REPO / "bench" / "lib"))

import hta_oracle  # noqa: E402
import results  # noqa: E402 - bench/lib/results.py: the figures for bench/out/results.json

FIGURES = ("hta.all_traces_s", "hta.worst_trace_ratio", "hta.traces_met_pct",
           "hta.figures_match_pct")

TARGET = 10.0
# Files under ../shared/data/traces that are not Kineto traces (see its MANIFEST.md).
NOT_TRACES = ("memory_timeline.raw.gz", "benchmark_simple_add_et.json.gz")
# Several ranks of one job, loaded together (as HTA loads a directory).
MULTI_RANK = [["HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-0.json.gz",
               "HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-1.json.gz"]]


def trainprof_cmd() -> list[str]:
    """$TRAINPROF_BIN, else the native executable the installed package ships (the console
    script would add a Python start-up to every call), else `trainprof` on PATH."""
    if os.environ.get("TRAINPROF_BIN"):
        return [os.environ["TRAINPROF_BIN"]]
    try:
        import trainprof.cli

        native = trainprof.cli.native_executable()
        if native.exists():
            return [str(native)]
    except ImportError:
        pass
    exe = shutil.which("trainprof", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    if exe is None:
        sys.exit("trainprof not found: set TRAINPROF_BIN or install the package")
    return [exe]


def count_events(path: Path) -> int:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        doc = json.load(f)
    return len(doc.get("traceEvents", [])) if isinstance(doc, dict) else 0


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime + children_cpu()


def time_trainprof(cmd, files, repeat, two_step=False):
    """Best wall, best CPU, the analysis and every repeat's wall: of `analyze FILES...`, or
    with two_step of `import kineto FILES... --out RUN` then `analyze RUN`."""
    best, best_cpu, doc, walls = None, None, None, []
    for _ in range(repeat):
        d = tempfile.mkdtemp(prefix="hta_ratio_")
        try:
            c0 = children_cpu()
            t0 = time.perf_counter()
            if two_step:
                subprocess.run(cmd + ["import", "kineto", *map(str, files), "--out", d + "/run"],
                               check=True, capture_output=True)
                target = [d + "/run"]
            else:
                target = list(map(str, files))
            out = subprocess.run(cmd + ["analyze", *target, "--hta-compat", "--json"],
                                 check=True, capture_output=True, text=True).stdout
            wall = time.perf_counter() - t0
            cpu = children_cpu() - c0
        finally:
            shutil.rmtree(d, ignore_errors=True)
        best = wall if best is None else min(best, wall)
        best_cpu = cpu if best_cpu is None else min(best_cpu, cpu)
        walls.append(wall)
        doc = json.loads(out)
    return best, best_cpu, doc, walls


def time_hta(files, repeat):
    """Best wall, best CPU, HTA's figures and every repeat's wall."""
    best, best_cpu, figures, walls = None, None, None, []
    for _ in range(repeat):
        c0 = self_cpu()  # HTA parses several ranks in a process pool: children count too
        t0 = time.perf_counter()
        figures = hta_oracle.hta_figures(files)
        wall = time.perf_counter() - t0
        cpu = self_cpu() - c0
        best = wall if best is None else min(best, wall)
        best_cpu = cpu if best_cpu is None else min(best_cpu, cpu)
        walls.append(wall)
    return best, best_cpu, figures, walls


def trace_sets(only):
    singles = sorted(p for p in SHARED.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz"))
                     and p.name not in NOT_TRACES)
    sets = [[p] for p in singles] + [[SHARED / f for f in s] for s in MULTI_RANK]
    return [s for s in sets if not only or any(o in str(p) for p in s for o in only)]


def report(rows, tp_walls, hta_walls, repeat, hta_repeat, detail) -> None:
    """The figures for bench/run_all.sh's results file (nothing without $BENCH_RESULTS).
    hta.all_traces_s: repeat i is the sum over the sets of each one's i-th run."""
    timed = [r for r in rows if "ratio" in r]
    if not rows:
        for f in FIGURES:
            results.skip(f, "no trace set that HTA loads")
        return
    results.add("hta.figures_match_pct", 100.0 * sum(r["figures_match"] for r in rows) / len(rows))
    failed = len(rows) - len(timed)
    if failed:  # a trace trainprof fails on has no time: the timing figures would hide it
        why = f"trainprof failed on {failed} of {len(rows)} trace sets"
        for f in ("hta.all_traces_s", "hta.worst_trace_ratio", "hta.traces_met_pct"):
            results.skip(f, why)
        return
    results.add("hta.all_traces_s", [sum(w[i] for w in tp_walls) for i in range(repeat)])
    results.peer("hta.all_traces_s", [sum(w[i] for w in hta_walls) for i in range(hta_repeat)],
                 detail=detail)
    results.add("hta.worst_trace_ratio", min(r["ratio"] for r in timed))
    results.add("hta.traces_met_pct", 100.0 * sum(r["met"] for r in timed) / len(timed))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="trainprof runs per trace (best kept)")
    ap.add_argument("--hta-repeat", type=int, default=1, help="HTA runs per trace (best kept)")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--only", action="append",
                    help="only traces whose path contains this (repeatable: any of them)")
    args = ap.parse_args()
    if args.repeat < 1 or args.hta_repeat < 1:
        sys.exit("--repeat and --hta-repeat must be at least 1")
    try:
        import hta  # noqa: F401
    except ImportError as e:
        why = f"HTA not installed ({e}): pip install holistictraceanalysis==0.5.0"
        if results.results_file():  # under run_all: the peer is missing, said so in the summary
            results.peer("hta.all_traces_s", skipped=why)
            for f in FIGURES:  # which sets to time is what HTA loads: nothing is timed
                results.skip(f, why)
            print(why)
            return 0
        sys.exit(why)
    from importlib.metadata import version

    detail = f"HTA {version('holistictraceanalysis')}"
    cmd = trainprof_cmd()
    rows, tp_walls, hta_walls = [], [], []
    print(f"{'trace':56} {'events':>7} {'trainprof_s':>11} {'hta_s':>7} {'ratio':>6}  "
          f"{'cpu: tp_s':>9} {'hta_s':>6} {'ratio':>6}  {'2-step_s':>8} {'ratio':>6}  "
          f"figures  wall ratio >= {TARGET:.0f}x")
    for files in trace_sets(args.only):
        name = str(files[0].relative_to(SHARED))
        if len(files) > 1:
            name = str(files[0].parent.relative_to(SHARED)) + f"/ ({len(files)} ranks)"
        try:
            hta_s, hta_cpu, figures, hta_w = time_hta(files, args.hta_repeat)
        except Exception as e:  # noqa: BLE001 - a trace HTA does not load is listed, not timed
            print(f"{name[-56:]:56} HTA does not load it ({type(e).__name__}): skipped")
            continue
        try:
            tp_s, tp_cpu, doc, tp_w = time_trainprof(cmd, files, args.repeat)
            two_s, _, two_doc, _ = time_trainprof(cmd, files, args.repeat, two_step=True)
            if two_doc != doc:
                raise ValueError("analyze of the trace files and of their imported run differ")
        except (subprocess.CalledProcessError, json.JSONDecodeError, ValueError) as e:
            err = getattr(e, "stderr", b"") or b""
            print(f"{name[-56:]:56} trainprof failed: {str(err)[-200:] or e}  NOT met")
            rows.append({"trace": name, "met": False, "figures_match": False, "error": str(e)})
            continue
        bad = hta_oracle.compare(figures, hta_oracle.trainprof_figures(doc))
        tp_walls.append(tp_w)
        hta_walls.append(hta_w)
        ratio = hta_s / tp_s
        cpu_ratio = hta_cpu / max(tp_cpu, 1e-3)
        met = "met" if ratio >= TARGET else "NOT met"
        events = sum(count_events(f) for f in files)
        print(f"{name[-56:]:56} {events:7d} {tp_s:11.3f} {hta_s:7.3f} {ratio:5.1f}x  "
              f"{tp_cpu:9.3f} {hta_cpu:6.3f} {cpu_ratio:5.1f}x  "
              f"{two_s:8.3f} {hta_s / two_s:5.1f}x  "
              f"{'match' if not bad else 'DIFFER':7}  {met}")
        for line in bad[:5]:
            print("      " + line)
        rows.append({"trace": name, "events": events, "trainprof_s": tp_s, "hta_s": hta_s,
                     "ratio": ratio, "trainprof_cpu_s": tp_cpu, "hta_cpu_s": hta_cpu,
                     "cpu_ratio": cpu_ratio, "two_step_s": two_s, "two_step_ratio": hta_s / two_s,
                     "figures_match": not bad, "met": ratio >= TARGET,
                     "hta_errors": sorted(figures["errors"])})
    met = sum(r["met"] for r in rows)
    print(f"{met} of {len(rows)} traces met (>= {TARGET:.0f}x); figures match on "
          f"{sum(r['figures_match'] for r in rows)} of {len(rows)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    report(rows, tp_walls, hta_walls, args.repeat, args.hta_repeat, detail)
    # Under run_all a trainprof failure fails the section (standalone, the table says it).
    if results.results_file() and any("error" in r for r in rows):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
