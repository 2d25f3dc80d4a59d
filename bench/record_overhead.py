#!/usr/bin/env python3
"""End-to-end overhead of `trainprof record` on a CPU-bound command.

Runs the same CPU-bound Python command bare and under `trainprof record` (default interval,
500 ms, and the 100 ms interval), alternating the two so that machine load drifts affect both
alike, and prints the median wall time of each and the ratio recorded / bare. Target: <= 1.01.

    python3 bench/record_overhead.py [--bin build/dev/src/cli/trainprof] [--runs 7] [--work 3.0]

The command burns a fixed amount of work (not a fixed time) on one core: the recorder's own
CPU use shows up as longer wall time only if it competes for that core.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

WORK = """
import sys
n = int(float(sys.argv[1]) * 12_000_000)
x = 0
for i in range(n):
    x += i * i
"""


def timed(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default=os.environ.get("TRAINPROF_BIN",
                                                   str(REPO / "build/dev/src/cli/trainprof")))
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

    bare = statistics.median(times["bare"])
    print(f"record_overhead: CPU-bound python, ~{args.work:.1f} s of work, "
          f"median of {args.runs} runs ({os.cpu_count()} CPUs)")
    print(f"  bare                       median {bare:8.3f} s")
    for interval in intervals:
        m = statistics.median(times[interval])
        print(f"  trainprof record {interval:>6}    median {m:8.3f} s   ratio {m / bare:.4f}"
              f"   (target <= 1.01)")


if __name__ == "__main__":
    main()
