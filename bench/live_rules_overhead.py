"""What the live rules add to `trainprof record`: the recorder's CPU time with
--live-rules-every 5 (the default) against --live-rules-every 0, on the same idle job at the
default 500 ms interval, as a share of one core (issue 6: <= 0.1 %). The job sleeps, so the
CPU time of the children is the recorder's own plus a constant Python start-up.

    python bench/live_rules_overhead.py [--seconds 40] [--reps 3] [--trainprof PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile


def cpu_of(cmd: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--trainprof", default=shutil.which("trainprof") or "build/py/src/cli/trainprof")
    args = ap.parse_args()
    job = [sys.executable, "-c", f"import time; time.sleep({args.seconds})"]
    cpu = {"5": [], "0": []}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            for every in ("5", "0"):
                out = os.path.join(tmp, f"run-{every}-{rep}")
                cpu[every].append(cpu_of([args.trainprof, "record", "--out", out, "--no-gpu",
                                          "--live-rules-every", every, "--", *job]))
    on, off = statistics.median(cpu["5"]), statistics.median(cpu["0"])
    share = (on - off) / args.seconds * 100
    print(f"record CPU over {args.seconds:.0f} s at 500 ms: live rules every 5 s {on:.3f} s, "
          f"off {off:.3f} s (medians of {args.reps}); live adds {(on - off) * 1000:.0f} ms = "
          f"{share:.3f} % of one core (target <= 0.1 %: {'ok' if share <= 0.1 else 'MISSED'})")


if __name__ == "__main__":
    main()
