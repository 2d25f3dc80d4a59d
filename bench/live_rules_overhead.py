"""What the live rules add to `trainprof record`: the recorder's CPU time with
--live-rules-every 5 (the default) against --live-rules-every 0, on the same job at the
default 500 ms interval, as a share of one core (issue 6; target: bench/targets.toml). Two jobs:
  idle      sleeps: the CPU time of the children is the recorder's own plus a constant
            Python start-up;
  stepping  20 steps a second through trainprof.step() with data_wait / forward / backward
            spans (what a training loop writes), so every poll has new steps and events to
            read; its own CPU is the same in both arms and cancels out in the median.
It prints two figures per job: the difference of the whole process tree's CPU time between the
two settings (noisy: it includes the job and Python's start-up), and the recorder's own count
of the thread CPU time its polls took, which it prints when the job ends (the precise one).

    python bench/live_rules_overhead.py [--seconds 40] [--reps 3] [--trainprof PATH]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
import results  # noqa: E402 - bench/lib/results.py: the figures for bench/out/results.json


POLL_CPU = re.compile(r"CPU ([0-9.]+) ms in polls = ([0-9.]+) % of one core")


def cpu_of(cmd: list[str], polls: list[float]) -> float:
    """CPU seconds of the command and its children; appends the recorder's own figure for its
    live polls (thread CPU time, % of one core) to `polls` when it prints one."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = POLL_CPU.search(done.stderr)
    if m:
        polls.append(float(m.group(2)))
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--trainprof", default=shutil.which("trainprof") or "build/py/src/cli/trainprof")
    args = ap.parse_args()
    jobs = {
        "idle": f"import time; time.sleep({args.seconds})",
        "stepping": STEPPING.format(seconds=args.seconds),
    }
    for job_name, code in jobs.items():
        job = [sys.executable, "-c", code]
        cpu = {"5": [], "0": []}
        polls: list[float] = []
        with tempfile.TemporaryDirectory() as tmp:
            for rep in range(args.reps):
                for every in ("5", "0"):
                    out = os.path.join(tmp, f"run-{every}-{rep}")
                    cpu[every].append(cpu_of([args.trainprof, "record", "--out", out, "--no-gpu",
                                              "--live-rules-every", every, "--", *job],
                                             polls))
        on, off = statistics.median(cpu["5"]), statistics.median(cpu["0"])
        share = (on - off) / args.seconds * 100
        print(f"{job_name:8s} job, record CPU over {args.seconds:.0f} s at 500 ms: live rules "
              f"every 5 s {on:.3f} s, off {off:.3f} s (medians of {args.reps}); live adds "
              f"{(on - off) * 1000:.0f} ms = {share:.3f} % of one core")
        if polls:
            poll_share = statistics.median(polls)
            print(f"{job_name:8s} job, the recorder's own count of its polls' thread CPU: "
                  f"{poll_share:.3f} % of one core (median of {len(polls)})")
            results.add(f"rules.live_{job_name}_pct", polls)
        else:
            results.skip(f"rules.live_{job_name}_pct",
                         "the recorder printed no count of its polls' CPU")


STEPPING = """
import time, trainprof
trainprof.start(auto=False)
end = time.monotonic() + {seconds}
while time.monotonic() < end:
    with trainprof.step():
        with trainprof.span("data_wait", category="data_wait"):
            time.sleep(0.01)
        with trainprof.span("forward", category="forward"):
            time.sleep(0.015)
        with trainprof.span("backward", category="backward"):
            time.sleep(0.02)
trainprof.stop()
"""


if __name__ == "__main__":
    main()
