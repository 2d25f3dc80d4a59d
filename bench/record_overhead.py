#!/usr/bin/env python3
"""End-to-end overhead of `trainprof record` on a CPU-bound command.

Runs the same CPU-bound Python command bare and under `trainprof record` (default interval,
500 ms, and the 100 ms interval), alternating the two so that machine load drifts affect both
alike. Two figures, each the median of the per-run ratios recorded / bare (a recorded run is
compared with the bare run just before it, so that slow phases of a shared machine cancel):
  job     the command's own time for its work (it prints it): how much recording slows the job
          down (its target: bench/targets.toml).
  end to end  the wall time of the whole command line, including the recorder's start and
          what it does after the job (rules, cost, report): fixed costs that a real training
          job amortises; shown with the seconds they add.

    python3 bench/record_overhead.py [--bin build/dev/src/cli/trainprof] [--runs 7] [--work 3.0]

The command burns a fixed amount of work (not a fixed time) on one core: the recorder's own
CPU use shows up as longer wall time only if it competes for that core.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench" / "lib"))
import results  # noqa: E402 - bench/lib/results.py: the figures for bench/out/results.json

WORK = """
import sys
n = int(float(sys.argv[1]) * 12_000_000)
x = 0
import time
t0, c0 = time.perf_counter(), time.process_time()
for i in range(n):
    x += i * i
print(f"work {time.perf_counter() - t0:.6f} {time.process_time() - c0:.6f}")
"""


def timed(cmd):
    """(wall seconds of the command, wall and CPU seconds the work itself reported)"""
    t0 = time.perf_counter()
    done = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    wall = time.perf_counter() - t0
    work = [line.split() for line in done.stdout.splitlines() if line.startswith("work ")]
    own = re.search(r"trainprof used [0-9]+ ms of CPU = ([0-9.]+) % of one core", done.stderr)
    return wall, float(work[-1][1]), float(work[-1][2]), float(own.group(1)) if own else None


def default_bin():
    for build in ("build/bench", "build/dev", "build/py"):
        p = REPO / build / "src/cli/trainprof"
        if p.is_file():
            return str(p)
    return "trainprof"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default=os.environ.get("TRAINPROF_BIN") or default_bin())
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--work", type=float, default=3.0, help="approximate seconds of work")
    p.add_argument("--intervals", default="500ms,100ms")
    args = p.parse_args()

    work = [sys.executable, "-c", WORK, str(args.work)]
    tmp = Path(tempfile.mkdtemp(prefix="trainprof_overhead_"))
    intervals = args.intervals.split(",")
    times = {"bare": []}
    times.update({i: [] for i in intervals})
    try:
        timed(work)  # warm caches
        for r in range(args.runs):
            times["bare"].append(timed(work))
            for interval in intervals:
                out = tmp / f"run-{interval}-{r}"
                times[interval].append(timed([args.bin, "record", "--no-gpu", "--interval",
                                              interval, "--out", str(out), "--", *work]))
                shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    bare_wall = statistics.median(t[0] for t in times["bare"])
    bare_work = statistics.median(t[1] for t in times["bare"])
    works = [t[1] for t in times["bare"]]
    print(f"record_overhead: CPU-bound python, ~{args.work:.1f} s of work, {args.runs} runs "
          f"({os.cpu_count()} CPUs); medians of per-run ratios to the bare run before each")
    print(f"  bare                    work {bare_work:7.3f} s   wall {bare_wall:7.3f} s   "
          f"(bare runs spread {min(works):.3f}-{max(works):.3f} s: the noise floor)")
    for interval in intervals:
        pairs = list(zip(times["bare"], times[interval]))
        job = statistics.median(r[1] / b[1] for b, r in pairs)
        job_cpu = statistics.median(r[2] / b[2] for b, r in pairs)
        e2e = statistics.median(r[0] / b[0] for b, r in pairs)
        fixed = statistics.median((r[0] - r[1]) - (b[0] - b[1]) for b, r in pairs)
        own = [r[3] for _, r in pairs if r[3] is not None]
        figure = f"record.job_ratio_{interval}"
        if figure in results.load_targets():
            results.add(figure, [r[1] / b[1] for b, r in pairs])
        print(f"  record --interval {interval:>5}  job wall {job:.4f}, job CPU {job_cpu:.4f}"
              f"   end to end "
              f"{e2e:.4f} (+{fixed:.2f} s outside the work: start, rules, cost, report)")
        if own:
            print(f"      the recorder's own CPU while the job ran (its summary): "
                  f"{statistics.median(own):.3f} % of one core, start-up included: the most "
                  f"it can take from a job that keeps every core busy")


if __name__ == "__main__":
    main()
