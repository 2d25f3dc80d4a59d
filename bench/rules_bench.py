"""Speed of trainprof's built-in rules on a stored run, against SageMaker Debugger (smdebug) on
the same data, in the same run (issue 6, "Speed"). Not part of the test run.

For each case it writes a synthetic run with report_synthetic_run (32 cores, 8 GPUs, 500 ms
sampling, step events), then
- trainprof: times the whole command `trainprof rules RUN --json` (start the process, open the
  stores, evaluate every built-in rule, print JSON) several times; median wall time and median
  CPU time (user + sys) of the process;
- smdebug: exports the same run with `trainprof export smdebug` (SageMaker Debugger's
  profiler-output layout) and, under the bench venv's Python (.venv-bench, smdebug from the
  package index), times what the installed smdebug can do with it:
    read      ProfilerTrial's readers return every system and framework event of the job (the
              data access every profiler rule does before it analyses anything: a floor),
    analysis  PandasFrame + PandasFrameAnalysis (smdebug's own profiler analyses: job, step,
              utilisation and device-usage statistics, as in its profiler report notebook).
  smdebug's built-in profiler rules (ProfilerReport, LowGPUUtilization, CPUBottleneck...) are
  looked for in the installed package and reported as missing when they are not there; its
  generic rule runner is tried on the profiler trial and its error printed when it cannot run.

The two-node case puts the node store of a second generated run beside the first one as
nodes/algo-2 (renaming the node in its meta table), which is how several nodes share a run
directory (docs/store-format.md).

Usage: python3 bench/rules_bench.py [--out DIR] [--reps 7] [--smdebug-reps 3]
           [--trainprof PATH] [--generator PATH] [--peer-python PATH] [--cases 1x30,2x60]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench" / "lib"))
import results  # noqa: E402 - bench/lib/results.py: the figures for bench/out/results.json

CASES = {  # name: (nodes, minutes); the targets are rows rules.NAME_s of bench/targets.toml
    "1x30": (1, 30),
    "2x60": (2, 60),
}
PHASE_SPANS = ["download", "initialization", "training", "checkpoint", "upload", "finalization"]


def find_binary(rel: str) -> str | None:
    for build in ("build/bench", "build/dev", "build/py"):
        p = ROOT / build / rel
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


def write_case(generator: str, out: Path, nodes: int, minutes: int) -> Path:
    run = out / f"rules-bench-{nodes}x{minutes}"
    if run.exists():
        shutil.rmtree(run)
    args = [str(minutes * 60), "500", "32", "8"]
    subprocess.run([generator, str(run), *args], check=True)
    for i in range(2, nodes + 1):
        other = out / f"rules-bench-tmp-node{i}"
        if other.exists():
            shutil.rmtree(other)
        subprocess.run([generator, str(other), *args], check=True)
        name = f"algo-{i}"
        dest = run / "nodes" / name
        dest.mkdir(parents=True)
        shutil.copy2(other / "nodes" / "algo-1" / "store.sqlite", dest / "store.sqlite")
        shutil.rmtree(other)
        db = sqlite3.connect(dest / "store.sqlite")
        info = json.loads(db.execute("SELECT value FROM meta WHERE key='node_info'").fetchone()[0])
        info["node"] = info["hostname"] = name
        db.execute("UPDATE meta SET value=? WHERE key='node'", (name,))
        db.execute("UPDATE meta SET value=? WHERE key='node_info'", (json.dumps(info),))
        db.commit()
        db.close()
    return run


def store_counts(run: Path) -> tuple[int, int]:
    values = events = 0
    for store in sorted(run.glob("nodes/*/store.sqlite")):
        db = sqlite3.connect(store)
        values += db.execute("SELECT COALESCE(SUM(count),0) FROM metric_chunks").fetchone()[0]
        events += db.execute("SELECT COALESCE(SUM(count),0) FROM event_chunks").fetchone()[0]
        db.close()
    return values, events


def time_trainprof(trainprof: str, run: Path, reps: int) -> dict:
    walls, cpus, summary = [], [], ""
    for _ in range(reps):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        p = subprocess.run([trainprof, "rules", str(run), "--json"], capture_output=True,
                           text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if p.returncode != 0:
            raise SystemExit(f"trainprof rules failed ({p.returncode}): {p.stderr.strip()}")
        walls.append(wall)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
        rules = json.loads(p.stdout)["rules"]
        fired = sum(1 for r in rules if r["findings"])
        findings = sum(len(r["findings"]) for r in rules)
        summary = f"{len(rules)} rules, {fired} with findings, {findings} findings"
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpus),
            "walls": walls, "summary": summary}


# ---- the smdebug side, run under the bench venv's Python (--peer) ----------------------------

def peer(path: str, reps: int, open_trial: bool) -> dict:
    import logging
    import tempfile

    logging.getLogger("smdebug").setLevel(logging.WARNING)
    res: dict = {"errors": []}
    try:
        import smdebug
        from smdebug.profiler.analysis.utils.pandas_data_analysis import PandasFrameAnalysis
        from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame
        from smdebug.trials import create_trial
    except Exception as e:  # noqa: BLE001 - any import problem means "peer not available"
        res["unavailable"] = f"{type(e).__name__}: {e}"
        return res
    res["version"] = getattr(smdebug, "__version__", "?")
    import smdebug.rules as rules_pkg

    wanted = ["ProfilerReport", "LowGPUUtilization", "CPUBottleneck", "IOBottleneck",
              "StepOutlier", "BatchSize", "LoadBalancing", "GPUMemoryIncrease", "Dataloader",
              "MaxInitializationTime", "OverallSystemUsage", "OverallFrameworkMetrics"]
    pkg_dir = Path(smdebug.__file__).parent
    mentioned = set()
    for f in pkg_dir.rglob("*.py"):
        text = f.read_text(errors="replace")
        mentioned.update(w for w in wanted if re.search(rf"^class {w}\b", text, re.M))
    res["builtin_rules_found"] = sorted(mentioned | {w for w in wanted if hasattr(rules_pkg, w)})

    trial = None
    if open_trial:
        start = time.perf_counter()
        trial = create_trial(path, profiler=True, output_dir=tempfile.mkdtemp())
        res["trial_open_s"] = time.perf_counter() - start
        # smdebug's generic rule runner on the profiler trial (its profiler rules' own base
        # class is not in the package).
        from smdebug.rules.rule import Rule
        from smdebug.rules.rule_invoker import invoke_rule

        class ReadAll(Rule):
            def __init__(self, base_trial):
                super().__init__(base_trial, action_str="")

            def invoke_at_step(self, step):
                self.base_trial.get_system_metrics(0, 2**62)

        try:
            invoke_rule(ReadAll(trial), start_step=0, end_step=1)
            res["rule_runner"] = "ran"
        except Exception as e:  # noqa: BLE001 - report why it cannot run
            res["rule_runner"] = f"{type(e).__name__}: {e}"

    reads, analyses, n_sys, n_fw = [], [], 0, 0
    from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
    from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader

    for _ in range(reps):
        # The readers a ProfilerTrial holds (what its get_system_metrics/get_framework_metrics
        # call), made fresh each time and without the trial's fixed wait.
        start = time.perf_counter()
        sys_ev = LocalSystemMetricsReader(path).get_events(0, 2**62)
        fw_ev = LocalAlgorithmMetricsReader(path).get_events(0, 2**62)
        reads.append(time.perf_counter() - start)
        n_sys, n_fw = len(sys_ev), len(fw_ev)
        del sys_ev, fw_ev

        start = time.perf_counter()
        try:
            pf = PandasFrame(path)
            sdf = pf.get_all_system_metrics()
            fdf = pf.get_all_framework_metrics()
            # PandasFrameAnalysis gives every framework event the step that contains it and
            # fails (IndexError) on an event outside all steps: the job's phase spans
            # (download, initialization...) are such events, so they are left out here.
            fdf = fdf[~fdf["framework_metric"].isin(PHASE_SPANS)].reset_index(drop=True)
            a = PandasFrameAnalysis(sdf, fdf)
            a.get_job_statistics()
            a.get_step_statistics()
            a.get_utilization_stats()
            a.get_device_usage_stats()
            analyses.append(time.perf_counter() - start)
        except Exception as e:  # noqa: BLE001 - report why it cannot run
            res["errors"].append(f"analysis: {type(e).__name__}: {e}")
            break
    res.update(read=statistics.median(reads), reads=reads, system_events=n_sys,
               framework_events=n_fw)
    if analyses:
        res.update(analysis=statistics.median(analyses), analyses=analyses)
    return res


def time_smdebug(trainprof: str, peer_python: str, run: Path, out: Path, reps: int,
                 open_trial: bool) -> dict:
    smd = out / (run.name + "-smdebug")
    if smd.exists():
        shutil.rmtree(smd)
    p = subprocess.run([trainprof, "export", "smdebug", str(run), "--out", str(smd)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return {"unavailable": f"export failed: {p.stderr.strip()}"}
    export_line = next((ln for ln in p.stdout.splitlines() if ln.startswith("wrote")), "")
    cmd = [peer_python, __file__, "--peer", str(smd), "--smdebug-reps", str(reps)]
    if open_trial:
        cmd.append("--open-trial")
    q = subprocess.run(cmd, capture_output=True, text=True)
    try:
        res = json.loads(q.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (q.stderr or q.stdout).strip().splitlines()[-3:]
        res = {"unavailable": f"peer failed ({q.returncode}): " + " | ".join(tail)}
    res["export"] = export_line
    return res


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "out"))
    ap.add_argument("--reps", type=int, default=7, help="trainprof repetitions")
    ap.add_argument("--smdebug-reps", type=int, default=3)
    ap.add_argument("--trainprof", default=None)
    ap.add_argument("--generator", default=None, help="report_synthetic_run")
    ap.add_argument("--peer-python", default=str(ROOT / ".venv-bench" / "bin" / "python"))
    ap.add_argument("--cases", default="1x30,2x60")
    ap.add_argument("--no-trial-open", action="store_true",
                    help="skip opening smdebug's ProfilerTrial (it always waits 10 s)")
    ap.add_argument("--peer", help=argparse.SUPPRESS)
    ap.add_argument("--open-trial", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.peer:
        print(json.dumps(peer(a.peer, a.smdebug_reps, a.open_trial)))
        return 0

    trainprof = a.trainprof or find_binary("src/cli/trainprof")
    generator = a.generator or find_binary("src/report/report_synthetic_run")
    if not trainprof or not generator:
        print("rules bench: needs src/cli/trainprof and src/report/report_synthetic_run from a "
              "build with tests (build/dev or build/py), or --trainprof/--generator")
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    has_peer = Path(a.peer_python).is_file()
    print(f"trainprof: {trainprof}\nload average: {os.getloadavg()[0]:.2f} "
          f"({os.cpu_count()} CPUs); trainprof reps {a.reps}, smdebug reps {a.smdebug_reps}")

    rows = []
    for i, name in enumerate(c.strip() for c in a.cases.split(",")):
        nodes, minutes = CASES[name]
        run = write_case(generator, out, nodes, minutes)
        values, events = store_counts(run)
        label = f"{nodes} node{'s' if nodes > 1 else ''} x {minutes} min"
        print(f"\n== {label}, 32 cores, 8 GPUs, 500 ms: {values} stored values, "
              f"{events} events ({run})")
        tp = time_trainprof(trainprof, run, a.reps)
        print(f"trainprof rules --json: median {tp['wall']:.3f} s wall, {tp['cpu']:.3f} s CPU "
              f"(all: {', '.join(f'{w:.3f}' for w in tp['walls'])}); {tp['summary']}")
        sm: dict = {"unavailable": f"no {a.peer_python}"}
        if has_peer:
            sm = time_smdebug(trainprof, a.peer_python, run, out, a.smdebug_reps,
                              open_trial=(i == 0 and not a.no_trial_open))
        figure = f"rules.{name}_s"
        results.add(figure, tp["walls"])
        if "unavailable" in sm:
            print(f"smdebug: not run ({sm['unavailable']})")
            results.peer(figure, skipped=f"smdebug not run: {sm['unavailable'][:200]}")
        else:
            results.peer(figure, sm["reads"], detail=f"smdebug {sm['version']} readers")
            print(f"smdebug {sm['version']}: {sm['export']}")
            print(f"  built-in profiler rules in the package: "
                  f"{', '.join(sm['builtin_rules_found']) or 'none'}")
            if "trial_open_s" in sm:
                print(f"  create_trial(profiler=True): {sm['trial_open_s']:.2f} s "
                      "(ProfilerTrial always sleeps 10 s before it returns)")
                print(f"  generic rule runner on the profiler trial: {sm['rule_runner']}")
            print(f"  read: median {sm['read']:.3f} s ({sm['system_events']} system, "
                  f"{sm['framework_events']} framework events)")
            if "analysis" in sm:
                print(f"  read + PandasFrameAnalysis: median {sm['analysis']:.3f} s")
            for err in sm["errors"]:
                print(f"  could not run: {err}")
        for kind in ("read", "analysis"):
            rows.append((f"{label} ({kind})" if has_peer else label, tp["wall"], sm.get(kind)))
            if not has_peer:
                break

    print("\n| case | trainprof median s | smdebug median s | smdebug/trainprof |")
    print("| --- | --- | --- | --- |")
    for case, t, s in rows:
        ratio = f"{s / t:.1f}x" if s is not None else "-"
        print(f"| {case} | {fmt(t)} | {fmt(s)} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
