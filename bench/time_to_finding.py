#!/usr/bin/env python3
"""Seconds from a problem's onset to its finding, on real PyTorch (CPU) training jobs recorded
by `trainprof record --live-rules-every 1` with the default rules (issue 19).

Each planted job (bench/ttf_job.py) runs healthy for a few seconds after its first step, then
plants its problem and writes the wall time of the onset to a file: the truth, from the job
itself. The rules' actions are configured with one `command` action (under ProfilerReport: every
rule) that appends the wall time at which it ran and the finding to a JSON-lines file: the time
the finding was acted on, as a user's checkpoint hook would see it. Time to finding = the first
finding of the expected rule minus the onset; target <= 60 s. Any other rule that fires is
listed (on the healthy run, any finding at all is a failure).

    .venv/bin/python bench/time_to_finding.py                 # every problem, 10-minute healthy run
    .venv/bin/python bench/time_to_finding.py --quick         # leak + healthy, well under 60 s
    .venv/bin/python bench/time_to_finding.py --problems leak,starvation --healthy-seconds 60

Prints one row per problem (onset -> finding, met / NOT met) and, with $BENCH_RESULTS set (by
bench/run_all.sh), reports figures ttf.<problem>_s and ttf.healthy_findings through
bench/lib/results.py. --json FILE writes the rows. Exit status 0 when every target is met, 1
when not, 2 on a bench error (a job that failed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "lib"))
import results  # noqa: E402

JOB = ROOT / "bench" / "ttf_job.py"
TARGET_S = 60.0

# problem -> (job mode, the rules whose finding names it)
PROBLEMS = {
    "leak": ("leak", {"HostMemoryGrowth"}),
    "starvation": ("starvation", {"DataLoaderStarvation"}),
    "outliers": ("outliers", {"StepOutlier"}),
    "loss_nan": ("loss_nan", {"LossNaN"}),
    "loss_flat": ("loss_flat", {"LossNotDecreasing"}),
}
# The action: append {"t": wall time, "finding": ...} to the file named by its argument.
ACTION = ("import json, sys, time; f = json.load(sys.stdin); "
          "open(sys.argv[1], 'a').write(json.dumps({'t': time.time(), 'finding': f}) + '\\n')")


def trainprof_command() -> list[str]:
    """The installed CLI next to this interpreter, else $TRAINPROF_BIN, else `trainprof`."""
    if os.environ.get("TRAINPROF_BIN"):
        return [os.environ["TRAINPROF_BIN"]]
    here = Path(sys.executable).parent / "trainprof"
    if here.exists():
        return [str(here)]
    found = shutil.which("trainprof")
    if found is None:
        raise SystemExit("time_to_finding: no trainprof CLI (set TRAINPROF_BIN)")
    return [found]


def start(name: str, mode: str, work: Path, seconds: float, onset: float,
          interval: str) -> dict:
    """Starts `trainprof record` of one planted job; returns its handles."""
    d = work / name
    d.mkdir(parents=True)
    findings = d / "findings.jsonl"
    config = {"rules": {"ProfilerReport": {"actions": [
        {"type": "log"},
        {"type": "command", "command": [sys.executable, "-c", ACTION, str(findings)]}]}}}
    (d / "rules.json").write_text(json.dumps(config))
    cmd = [*trainprof_command(), "record", "--out", str(d / "run"), "--interval", interval,
           "--no-gpu", "--rules-config", str(d / "rules.json"), "--live-rules-every", "1", "--",
           sys.executable, str(JOB), "--mode", mode, "--seconds", str(seconds),
           "--onset", str(onset), "--onset-file", str(d / "onset.json"),
           "--stop-file", str(d / "stop")]
    log = open(d / "record.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
    return {"name": name, "mode": mode, "dir": d, "proc": proc, "log": log,
            "findings": findings, "began": time.time()}


def read_findings(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line being written
    return rows


def run(problems: list[str], healthy_seconds: float, onset: float, wait_s: float,
        interval: str, keep: bool, parallel: int) -> list[dict]:
    """The healthy job runs alongside; the planted ones `parallel` at a time with it (a job's
    steps on a busy 2-core machine are themselves slowed by the others)."""
    work = Path(tempfile.mkdtemp(prefix="ttf_"))
    jobs: list[dict] = []
    queue = list(problems)
    try:
        if healthy_seconds > 0:
            jobs.append(start("healthy", "healthy", work, healthy_seconds, onset, interval))
        while queue or any(j["proc"].poll() is None for j in jobs):
            running = sum(j["proc"].poll() is None for j in jobs)
            if queue and running < parallel:
                p = queue.pop(0)
                jobs.append(start(p, PROBLEMS[p][0], work, onset + wait_s + 15, onset, interval))
                continue
            # Stop each planted job once its finding arrived (2 s later: the stored finding
            # settles).
            for j in jobs:
                if j["name"] == "healthy" or j["proc"].poll() is not None:
                    continue
                wanted = PROBLEMS[j["name"]][1]
                seen = [r for r in read_findings(j["findings"])
                        if r["finding"].get("rule") in wanted]
                if seen and time.time() - seen[0]["t"] > 2:
                    (j["dir"] / "stop").touch()
            time.sleep(0.5)
        rows = []
        for j in jobs:
            j["log"].close()
            if j["proc"].returncode != 0:
                tail = (j["dir"] / "record.log").read_text()[-2000:]
                raise RuntimeError(f"{j['name']}: record exited {j['proc'].returncode}:\n{tail}")
            rows.append(judge(j))
        return rows
    finally:
        for j in jobs:
            if j["proc"].poll() is None:
                j["proc"].kill()
        if keep:
            print(f"(runs kept in {work})")
        else:
            shutil.rmtree(work, ignore_errors=True)


def judge(j: dict) -> dict:
    got = read_findings(j["findings"])
    if j["name"] == "healthy":
        return {"problem": "healthy", "expected": [], "onset_s": None, "seconds": None,
                "findings": [r["finding"]["rule"] for r in got],
                "messages": [r["finding"]["message"] for r in got],
                "met": not got}
    wanted = PROBLEMS[j["name"]][1]
    onset_file = j["dir"] / "onset.json"
    if not onset_file.exists():
        raise RuntimeError(f"{j['name']}: the job never planted its problem")
    onset = json.loads(onset_file.read_text())["onset_unix_s"]
    hit = next((r for r in got if r["finding"].get("rule") in wanted), None)
    seconds = hit["t"] - onset if hit else None
    return {"problem": j["name"], "expected": sorted(wanted),
            "onset_s": round(onset - j["began"], 1),
            "seconds": None if seconds is None else round(seconds, 1),
            "message": hit["finding"]["message"] if hit else None,
            "others": sorted({r["finding"]["rule"] for r in got} - wanted),
            "met": seconds is not None and 0 <= seconds <= TARGET_S}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default=",".join(PROBLEMS),
                    help="comma-separated: " + ", ".join(PROBLEMS))
    ap.add_argument("--healthy-seconds", type=float, default=600,
                    help="length of the healthy run (0: none)")
    ap.add_argument("--onset", type=float, default=8, help="healthy seconds before the problem")
    ap.add_argument("--wait", type=float, default=90,
                    help="seconds after the onset a planted job runs at most")
    ap.add_argument("--interval", default="500ms", help="record's sampling interval")
    ap.add_argument("--quick", action="store_true",
                    help="the leak and a 30-s healthy run only (the test command's version)")
    ap.add_argument("--parallel", type=int, default=2,
                    help="jobs recorded at once, the healthy one included (default 2)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    a = ap.parse_args()
    problems = [p for p in a.problems.split(",") if p]
    healthy = a.healthy_seconds
    if a.quick:
        problems, healthy = ["leak"], min(healthy, 30)
    for p in problems:
        if p not in PROBLEMS:
            print(f"time_to_finding: unknown problem {p!r} (known: {', '.join(PROBLEMS)})",
                  file=sys.stderr)
            return 2
    try:
        rows = run(problems, healthy, a.onset, a.wait, a.interval, a.keep, max(1, a.parallel))
    except RuntimeError as e:
        print(f"time_to_finding: {e}", file=sys.stderr)
        return 2
    print(f"{'problem':<12} {'rule':<22} {'onset':>7} {'to finding':>11}  target   verdict")
    for r in rows:
        if r["problem"] == "healthy":
            what = ", ".join(r["findings"]) or "no finding"
            print(f"{'healthy':<12} {'(any)':<22} {'':>7} {'':>11}  none     "
                  f"{'met' if r['met'] else 'NOT met'} ({what})")
            for m in r["messages"]:
                print(f"    {m}")
            continue
        secs = "never" if r["seconds"] is None else f"{r['seconds']:.1f} s"
        print(f"{r['problem']:<12} {'/'.join(r['expected']):<22} {r['onset_s']:>6.1f}s "
              f"{secs:>11}  <= {TARGET_S:.0f} s  {'met' if r['met'] else 'NOT met'}")
        if r["message"]:
            print(f"    {r['message']}")
        if r["others"]:
            print(f"    also fired: {', '.join(r['others'])}")
    for r in rows:
        if r["problem"] == "healthy":
            results.add("ttf.healthy_findings", [len(r["findings"])])
        elif r["seconds"] is not None:
            results.add(f"ttf.{r['problem']}_s", [r["seconds"]])
        else:
            results.skip(f"ttf.{r['problem']}_s", "no finding within the run")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["met"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
