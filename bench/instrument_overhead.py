"""Instrumentation overhead from Python, measured so that it can be resolved on a noisy VM.

1. One span (enter + exit) with the recorder running, against its peers in the same process:
   torch.profiler.record_function (no profiler active: its always-on cost), a plain-Python
   timing baseline (two perf_counter_ns reads and a list append) and an empty context manager;
   and record_span, the call the automatic instrumentation's hooks make.
2. Start-up: `python -c pass` with the startup hook (recording) against without.
3. The hooks' cost per training step: bench/tiny_train.py, a loop made of almost nothing but
   what the instrumentation hooks (DataLoader, forward, backward, optimizer; ~0.1 ms steps),
   bare vs instrumented, interleaved: the difference per step is large enough to resolve.
4. A real training loop (examples/train_resnet_synthetic.py, CPU), bare vs instrumented,
   interleaved: whole-process and training-loop wall times (the script's own clock), the
   spread of the bare runs (the noise this VM adds), and the recorder's own flush CPU read
   from each process store. The overhead attributable to trainprof is then
   (hook cost per step x steps + flush CPU) / bare loop time, set beside the wall-time ratio.

Usage: python bench/instrument_overhead.py [--spans 200000] [--repeat 7] [--train-runs 5]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench" / "lib"))
import results  # noqa: E402 - bench/lib/results.py: the figures for bench/out/results.json


def ns_per_op(fn, n: int) -> float:
    t0 = time.perf_counter_ns()
    fn(n)
    return (time.perf_counter_ns() - t0) / n


def span_costs(n: int, repeat: int) -> None:
    import trainprof
    from trainprof import _recorder as R

    run = tempfile.mkdtemp(prefix="trainprof-bench-")
    trainprof.start(out=run, auto=False)
    span = trainprof.span
    record_span = R.record_span

    def with_trainprof(k):
        for _ in range(k):
            with span("forward"):
                pass

    perf = time.perf_counter_ns

    def with_record_span(k):
        for _ in range(k):
            t0 = perf()
            record_span("forward", "forward", t0, perf())

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

    peers = {"trainprof.span": with_trainprof,
             "record_span (2 clocks + the hooks' call)": with_record_span,
             "plain-Python timing (2 clocks + append)": plain_timing,
             "empty context manager": empty_cm}
    try:
        from torch.profiler import record_function

        def torch_rf(k):
            for _ in range(k):
                with record_function("forward"):
                    pass

        peers["torch.profiler.record_function"] = torch_rf
    except ImportError as e:
        print("(torch not installed: record_function peer skipped)")
        results.peer("instrument.py_span_ns", skipped=f"torch not installed ({e})")
    runs = {name: [ns_per_op(fn, n) for _ in range(repeat)] for name, fn in peers.items()}
    trainprof.stop()
    medians = {name: statistics.median(v) for name, v in runs.items()}
    ours = medians["trainprof.span"]
    print(f"Python span enter+exit, median of {repeat} x {n}")
    for name, ns in medians.items():
        ratio = "" if name == "trainprof.span" else f"   (trainprof.span / this = {ours / ns:.2f}x)"
        print(f"  {name:<42} {ns:8.0f} ns{ratio}")
    results.add("instrument.py_span_ns", runs["trainprof.span"])
    if "torch.profiler.record_function" in runs:
        import torch

        results.peer("instrument.py_span_ns", runs["torch.profiler.record_function"],
                     detail=f"torch {torch.__version__}")


def hooked_env(run_dir: str) -> dict:
    import trainprof
    from trainprof import _core

    env = dict(os.environ)
    hook_pkg = Path(trainprof.__file__).resolve().parent
    env.update(_core.child_environment(run_dir, package_dir=str(hook_pkg), parent=env))
    return env


def flush_cpu_s(run_dir: str) -> float:
    """The recorder's own flush CPU in every process store of a run (meta written by it)."""
    total = 0
    for path in glob.glob(os.path.join(run_dir, "nodes", "*", "proc-*.sqlite")):
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'recorder.flush_cpu_ns'").fetchone()
            total += int(row[0]) if row else 0
    return total / 1e9


def startup_cost(runs: int) -> float:
    bare, hooked = [], []
    for _ in range(runs):
        for kind in ("bare", "hooked"):
            env = dict(os.environ) if kind == "bare" else hooked_env(tempfile.mkdtemp(prefix="trainprof-bench-"))
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
            (bare if kind == "bare" else hooked).append(time.perf_counter() - t0)
    b, h = statistics.median(bare), statistics.median(hooked)
    # The added time of each pair (bare, then hooked right after): drifts of the load cancel.
    added = [(y - x) * 1e3 for x, y in zip(bare, hooked)]
    print(f"Start-up of a Python process (python -c pass), median of {runs}")
    print(f"  bare {b * 1e3:6.1f} ms   with the startup hook recording {h * 1e3:6.1f} ms"
          f"   (+{statistics.median(added):.1f} ms per process, median of the pairs)")
    results.add("instrument.startup_ms", added)
    return statistics.median(added) / 1e3


def hook_cost_per_step(runs: int, steps: int) -> float:
    timings = Path(tempfile.mkdtemp(prefix="trainprof-bench-timings-")) / "t.json"
    per_step = {"bare": [], "instrumented": []}
    for _ in range(runs):
        for kind in ("bare", "instrumented"):
            env = dict(os.environ) if kind == "bare" else hooked_env(tempfile.mkdtemp(prefix="trainprof-bench-"))
            subprocess.run([sys.executable, str(REPO / "bench/tiny_train.py"), "--steps", str(steps),
                            "--out", str(timings)], env=env, check=True, capture_output=True)
            t = json.loads(timings.read_text())
            per_step[kind].append(t["loop_s"] / t["steps"] * 1e6)
    b, m = statistics.median(per_step["bare"]), statistics.median(per_step["instrumented"])
    results.add("instrument.hook_us_per_step",
                [y - x for x, y in zip(per_step["bare"], per_step["instrumented"])])
    print(f"Hook cost per training step (bench/tiny_train.py, {steps} steps of ~0.1 ms), median of {runs} "
          "interleaved runs")
    print(f"  bare {b:7.1f} us/step (runs {min(per_step['bare']):.1f}-{max(per_step['bare']):.1f})"
          f"   instrumented {m:7.1f} us/step   -> +{m - b:.1f} us per step "
          "(data wait, fetch, forward, backward, optimizer, step records and their logic)")
    return m - b


def training_overhead(runs: int, steps: int, added_us_per_step: float, startup_s: float) -> None:
    args = [sys.executable, str(REPO / "examples/train_resnet_synthetic.py"), "--steps", str(steps),
            "--eval-batches", "0"]
    wall = {"bare": [], "instrumented": []}
    loop = {"bare": [], "instrumented": []}
    flush = []
    timings = Path(tempfile.mkdtemp(prefix="trainprof-bench-timings-")) / "t.json"
    for _ in range(runs):
        for kind in ("bare", "instrumented"):
            run_dir = tempfile.mkdtemp(prefix="trainprof-bench-run-")
            env = dict(os.environ) if kind == "bare" else hooked_env(run_dir)
            t0 = time.perf_counter()
            subprocess.run([*args, "--timings", str(timings)], env=env, check=True, capture_output=True)
            wall[kind].append(time.perf_counter() - t0)
            # The training loop alone, by the script's own clock: its steps' wall time.
            loop[kind].append(sum(s["step_ns"] for s in json.loads(timings.read_text())["steps"]) / 1e9)
            if kind == "instrumented":
                flush.append(flush_cpu_s(run_dir))
    b, m = statistics.median(wall["bare"]), statistics.median(wall["instrumented"])
    bl, ml = statistics.median(loop["bare"]), statistics.median(loop["instrumented"])
    noise = (max(loop["bare"]) - min(loop["bare"])) / bl
    fl = statistics.median(flush)
    print(f"Real training loop (ResNet, {steps} steps, CPU), median of {runs} interleaved runs")
    print(f"  whole process  bare {b:7.2f} s   instrumented {m:7.2f} s   ratio {m / b:.4f} "
          f"({100 * (m / b - 1):+.2f} %, start-up included)")
    print(f"  training loop  bare {bl:7.2f} s   instrumented {ml:7.2f} s   ratio {ml / bl:.4f} "
          f"({100 * (ml / bl - 1):+.2f} %); identical bare runs spread {100 * noise:.1f} %")
    print(f"  recorder flush CPU in the instrumented runs: {fl * 1e3:.1f} ms (median)")
    attributable = (added_us_per_step * 1e-6 * steps + fl) / bl
    print(f"  attributable to trainprof: ({added_us_per_step:.1f} us x {steps} steps + {fl * 1e3:.1f} ms flush)"
          f" / {bl:.2f} s = {100 * attributable:.3f} % of the loop"
          f" (+ {startup_s * 1e3:.1f} ms start-up = {100 * startup_s / b:.2f} % of the process)")
    # Per run: the hooks' cost (measured above) and that run's flush CPU over that run's bare loop.
    results.add("instrument.train_attributable_pct",
                [100 * (added_us_per_step * 1e-6 * steps + f) / x for f, x in zip(flush, loop["bare"])])
    results.add("instrument.train_loop_ratio", [y / x for x, y in zip(loop["bare"], loop["instrumented"])])


def sampled_share(steps: int) -> None:
    """An independent check of the attributable cost: py-spy samples the instrumented ResNet run
    from outside, and the share of samples whose innermost Python frame is trainprof's (its
    hooks and the C calls they make) is the share of the process's time spent in them."""
    import shutil

    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        print("Sampled share: py-spy not installed (pip install py-spy): skipped")
        return
    out = Path(tempfile.mkdtemp(prefix="trainprof-bench-spy-")) / "raw.txt"
    args = [sys.executable, str(REPO / "examples/train_resnet_synthetic.py"), "--steps", str(steps),
            "--eval-batches", "0"]
    proc = subprocess.run([spy, "record", "-r", "250", "-f", "raw", "-o", str(out), "--", *args],
                          env=hooked_env(tempfile.mkdtemp(prefix="trainprof-bench-run-")),
                          capture_output=True, text=True)
    if proc.returncode != 0 or not out.exists():
        print(f"Sampled share: py-spy failed ({proc.stderr.strip()[-200:]}): skipped")
        return
    total = ours = training = 0
    for line in out.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        total += int(n)
        in_loop = any("train_resnet_synthetic.py" in f and "main" in f for f in frames)
        training += int(n) if in_loop else 0
        # the innermost frame is trainprof's own code (not torch called through our wrappers)
        if frames and ("(trainprof/" in frames[-1] or "/trainprof/" in frames[-1]):
            ours += int(n)
    print(f"Sampled share (py-spy at 250 Hz on the instrumented ResNet run): {ours} of {total} samples "
          f"({100 * ours / max(total, 1):.2f} %) have trainprof's code innermost; "
          f"{100 * ours / max(training, 1):.2f} % of the {training} samples in main()")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--spans", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--train-runs", type=int, default=5)
    p.add_argument("--train-steps", type=int, default=60)
    p.add_argument("--tiny-steps", type=int, default=5000)
    a = p.parse_args()
    span_costs(a.spans, a.repeat)
    if a.train_runs > 0:
        startup = startup_cost(15)
        added = hook_cost_per_step(a.train_runs, a.tiny_steps)
        training_overhead(a.train_runs, a.train_steps, added, startup)
        sampled_share(a.train_steps)


if __name__ == "__main__":
    main()
