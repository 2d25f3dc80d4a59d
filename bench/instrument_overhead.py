"""Instrumentation overhead from Python.

1. One span (enter + exit) with the recorder running, against its peers in the same process:
   torch.profiler.record_function (no profiler active, i.e. its always-on cost), a plain-Python
   timing baseline (two perf_counter_ns reads and a list append) and an empty context manager.
2. A real training loop (examples/train_resnet_synthetic.py, CPU) instrumented automatically
   through the startup hook vs bare: wall-time ratio, median of several interleaved runs.

Usage: python bench/instrument_overhead.py [--spans 200000] [--repeat 7] [--train-runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def ns_per_op(fn, n: int) -> float:
    t0 = time.perf_counter_ns()
    fn(n)
    return (time.perf_counter_ns() - t0) / n


def span_costs(n: int, repeat: int) -> None:
    import trainprof

    run = tempfile.mkdtemp(prefix="trainprof-bench-")
    trainprof.start(out=run, auto=False)
    span = trainprof.span

    def with_trainprof(k):
        for _ in range(k):
            with span("forward"):
                pass

    perf = time.perf_counter_ns
    sink = []

    def plain_timing(k):
        append = sink.append
        for _ in range(k):
            t0 = perf()
            t1 = perf()
            append((t0, t1))
        sink.clear()

    class Empty:
        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    def empty_cm(k):
        for _ in range(k):
            with Empty():
                pass

    peers = {"trainprof.span": with_trainprof, "plain-Python timing (2 clocks + append)": plain_timing,
             "empty context manager": empty_cm}
    try:
        from torch.profiler import record_function

        def torch_rf(k):
            for _ in range(k):
                with record_function("forward"):
                    pass

        peers["torch.profiler.record_function"] = torch_rf
    except ImportError:
        print("(torch not installed: record_function peer skipped)")
    results = {name: statistics.median(ns_per_op(fn, n) for _ in range(repeat)) for name, fn in peers.items()}
    trainprof.stop()
    ours = results["trainprof.span"]
    print(f"Python span enter+exit, median of {repeat} x {n}")
    for name, ns in results.items():
        ratio = "" if name == "trainprof.span" else f"   (trainprof / this = {ours / ns:.2f}x)"
        print(f"  {name:<42} {ns:8.0f} ns{ratio}")
    print(f"  target <= 1000 ns per span: {'met' if ours <= 1000 else 'NOT met'}")


def training_overhead(runs: int, steps: int) -> None:
    import trainprof
    from trainprof import _core

    hook_pkg = Path(trainprof.__file__).resolve().parent
    args = [sys.executable, str(REPO / "examples/train_resnet_synthetic.py"), "--steps", str(steps),
            "--eval-batches", "0"]
    bare, instrumented = [], []
    bare_loop, instrumented_loop = [], []
    timings = Path(tempfile.mkdtemp(prefix="trainprof-bench-timings-")) / "t.json"
    for i in range(runs):
        for kind in ("bare", "instrumented"):
            env = dict(os.environ)
            if kind == "instrumented":
                run_dir = tempfile.mkdtemp(prefix="trainprof-bench-run-")
                env.update(_core.child_environment(run_dir, package_dir=str(hook_pkg), parent=env))
            t0 = time.perf_counter()
            subprocess.run([*args, "--timings", str(timings)], env=env, check=True,
                           capture_output=True)
            (bare if kind == "bare" else instrumented).append(time.perf_counter() - t0)
            # The training loop alone, by the script's own clock: its steps' wall time.
            loop_s = sum(s["step_ns"] for s in json.loads(timings.read_text())["steps"]) / 1e9
            (bare_loop if kind == "bare" else instrumented_loop).append(loop_s)
    b, m = statistics.median(bare), statistics.median(instrumented)
    bl, ml = statistics.median(bare_loop), statistics.median(instrumented_loop)
    print(f"Real training loop (ResNet, {steps} steps, CPU), median of {runs} interleaved runs")
    print(f"  whole process, bare          {b:8.2f} s")
    print(f"  whole process, instrumented  {m:8.2f} s   (ratio {m / b:.4f}, "
          f"overhead {100 * (m / b - 1):+.2f} %: start-up included)")
    print(f"  training steps, bare         {bl:8.2f} s")
    print(f"  training steps, instrumented {ml:8.2f} s   (ratio {ml / bl:.4f}, "
          f"overhead {100 * (ml / bl - 1):+.2f} %)")
    print(f"  target <= 1 % (training steps): {'met' if ml / bl <= 1.01 else 'NOT met'}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--spans", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--train-runs", type=int, default=5)
    p.add_argument("--train-steps", type=int, default=60)
    a = p.parse_args()
    span_costs(a.spans, a.repeat)
    if a.train_runs > 0:
        training_overhead(a.train_runs, a.train_steps)


if __name__ == "__main__":
    main()
