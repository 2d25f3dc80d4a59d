#!/usr/bin/env python3
"""Tuning overhead (issue 22): the share of `trainprof tune`'s wall time spent outside its
trials (starting Python and Optuna, the study's journal, reading each trial's run directory,
choosing the next setting), which is budget not spent measuring. Target: <= 5 %.

Runs `trainprof tune` on the planted job (examples/tune_planted.py) with a real search space,
times the whole command from outside (process start to exit), and subtracts the trials' own
wall times (each from spawning `trainprof record` to its exit) from tune's JSON.

    bench/tune_overhead.py [--budget 90s] [--trainprof PATH]

Under bench/run_all.sh (section tune, $BENCH_RESULTS set) the share and the seconds outside the
trials also go to its results file (tune.outside_trials_pct, tune.outside_trials_s).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "lib"))
import results  # noqa: E402 - bench/lib/results.py: the figures for bench/out/results.json

TARGET_SHARE = 0.05


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", default="90s")
    p.add_argument("--trainprof", default=None, help="the trainprof executable")
    p.add_argument("--python", default=sys.executable, help="the job's interpreter")
    a = p.parse_args()
    exe = a.trainprof
    if exe is None:  # the executable the installed package ships (found without importing it)
        import importlib.util

        spec = importlib.util.find_spec("trainprof")
        if spec is None or spec.origin is None:
            print("error: trainprof is not installed (give --trainprof)", file=sys.stderr)
            return 1
        exe = str(Path(spec.origin).parent / "bin" / "trainprof")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [exe, "tune", "--state", f"{tmp}/state", "--no-gpu", "--json", "-q",
               "--no-auto-knobs", "--try", "num_workers=1,2,4", "--try", "log_every=10,50",
               "--budget", a.budget, "--steps", "20", "--warmup-steps", "3",
               "--", a.python, str(ROOT / "examples" / "tune_planted.py"),
               "--log-every", "{log_every}", "--transform-ms", "5"]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        doc = json.loads(proc.stdout)
    trials = sum(t["wall_s"] for t in doc["trials"])
    outside = wall - trials
    share = outside / wall
    results.add("tune.outside_trials_pct", share * 100)
    results.add("tune.outside_trials_s", outside)
    verdict = "met" if share <= TARGET_SHARE else "NOT met"
    print(f"tune: {len(doc['trials'])} trials in {wall:.1f} s (budget {a.budget}); "
          f"trials {trials:.1f} s, outside trials {outside:.2f} s "
          f"(start-up before the first trial {doc['setup_s']:.2f} s inside Python, "
          f"tune's own count {doc['outside_trials_s']:.2f} s)")
    print(f"share of the time outside trials: {share * 100:.1f} % "
          f"(target <= {TARGET_SHARE * 100:.0f} %): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
