"""Speed of `trainprof analyze RUN --json` on imported Kineto traces (issue 19, "Speed":
`analyze` >= 5 M events/s). Not part of the test run.

It writes RANKS synthetic Kineto traces (the format of bench/import_bench.cc's: per launched
kernel an operator, its runtime call, the kernel and two flow events; a ProfilerStep#N span every
STEP_LAUNCHES launches; each rank's own distributedInfo), imports them once with
`trainprof import kineto` into one run, then times the whole command `trainprof analyze RUN
--json` (start the process, read the store, split by rank, analyse each rank, print the JSON)
REPS times. The figure is the run's events (`trainprof show --json`: spans and flows, all of
which analyze reads) per second of analyze wall (median), and analyze's CPU / wall (both cores in
use when above 1). The machine's load is printed beside it: on a shared 2-core machine other
processes take the cores away and the wall figure drops with them.

Its peer: HolisticTraceAnalysis has no one-call equivalent of analyze; bench/hta_ratio.py (section
hta) times analyze --hta-compat against HTA on real traces.

Usage: python3 bench/analyze_bench.py [--ranks 8] [--launches 25000] [--reps 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench" / "lib"))
import results  # noqa: E402

TARGET_EVENTS_PER_S = 5e6  # analyze.events_per_s (bench/targets.toml)
STEP_LAUNCHES = 100


def trainprof_cmd() -> list[str]:
    exe = os.environ.get("TRAINPROF_BIN")
    if exe:
        return [exe]
    try:
        import trainprof.cli

        native = trainprof.cli.native_executable()
        if native.exists():
            return [str(native)]
    except ImportError:
        pass
    found = shutil.which("trainprof")
    return [found] if found else [sys.executable, "-m", "trainprof"]


def us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def write_trace(path: Path, rank: int, ranks: int, launches: int) -> None:
    """One rank's trace: `launches` kernel launches (5 events each) in ProfilerStep spans."""
    out = [
        '{\n  "schemaVersion": 1,\n  "distributedInfo": {"backend": "nccl", "rank": %d, '
        '"world_size": %d},\n  "traceEvents": [\n' % (rank, ranks)
    ]
    ts = 1_000_000_000
    step_start = ts
    kernel = ("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_nn_align4>(Params)"
              if rank % 2 == 0 else "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)")
    for i in range(launches):
        corr = 1000 + i
        if i % STEP_LAUNCHES == 0 and i > 0:
            out.append('  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", '
                       '"pid": 1, "tid": 1, "ts": %s, "dur": %s, "args": {}},\n'
                       % (i // STEP_LAUNCHES - 1, us(step_start), us(ts - step_start - 100)))
            step_start = ts
        out.append('  {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, '
                   '"ts": %s, "dur": %s, "args": {"External id": %d, "Record function id": 0, '
                   '"Ev Idx": %d}},\n' % (us(ts), us(9000), i, i))
        out.append('  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, '
                   '"tid": 1, "ts": %s, "dur": %s, "args": {"External id": %d, "cbid": 211, '
                   '"correlation": %d}},\n' % (us(ts + 1000), us(4000), i, corr))
        out.append('  {"ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": 7, "ts": %s, '
                   '"dur": %s, "args": {"External id": %d, "queued": 0, "device": 0, '
                   '"context": 1, "stream": 7, "correlation": %d, "registers per thread": 128, '
                   '"shared memory": 16384, "blocks per SM": 2.5, "warps per SM": 20, '
                   '"grid": [512, 1, 1], "block": [256, 1, 1], '
                   '"est. achieved occupancy %%": 25}},\n'
                   % (kernel, us(ts + 3000), us(7000 + (i * 37 + rank * 11) % 900), i, corr))
        out.append('  {"ph": "s", "id": %d, "pid": 1, "tid": 1, "ts": %s, "cat": "ac2g", '
                   '"name": "ac2g"},\n' % (corr, us(ts + 1000)))
        out.append('  {"ph": "f", "id": %d, "pid": 0, "tid": 7, "ts": %s, "cat": "ac2g", '
                   '"name": "ac2g", "bp": "e"},\n' % (corr, us(ts + 3000)))
        ts += 10000 + (i % 7) * 13
    out.append('  {"ph": "i", "cat": "Trace", "name": "end", "pid": 1, "tid": 1, "ts": 1.0, '
               '"s": "g"}\n  ],\n  "traceName": "bench",\n'
               '  "baseTimeNanoseconds": 1727743122000000000\n}\n')
    path.write_text("".join(out))


def measure(args: list[str]) -> dict:
    """One trainprof command in a fresh helper process: wall, CPU (user + sys of the child), and
    its peak resident memory."""
    code = ("import json, resource, subprocess, sys, time\n"
            "t = time.perf_counter()\n"
            "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)\n"
            "wall = time.perf_counter() - t\n"
            "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "json.dump({'rc': p.returncode, 'wall_s': wall, 'cpu_s': u.ru_utime + u.ru_stime,\n"
            "           'peak_mib': u.ru_maxrss / 1024,\n"
            "           'out_bytes': len(p.stdout), 'stderr': p.stderr[-2000:].decode('utf-8',"
            " 'replace')}, sys.stdout)\n")
    p = subprocess.run([sys.executable, "-c", code, *trainprof_cmd(), *args], capture_output=True,
                       text=True, check=True)
    return json.loads(p.stdout)


def run_events(run: Path) -> int:
    """Events in the run, from `trainprof show --json` (analyze reads them all)."""
    p = subprocess.run([*trainprof_cmd(), "show", str(run), "--json"], capture_output=True,
                       text=True, check=True)
    doc = json.loads(p.stdout)
    for key in ("events", "event_count"):
        if isinstance(doc.get(key), int):
            return doc[key]
    raise RuntimeError("trainprof show --json gave no event count")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--launches", type=int, default=25000, help="kernel launches per rank")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--keep", help="generate into this directory and keep it")
    a = ap.parse_args()
    root = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="analyze-bench-"))
    try:
        root.mkdir(parents=True, exist_ok=True)
        run = root / "run"
        if not run.exists():
            traces = []
            for r in range(a.ranks):
                p = root / f"rank{r}.json"
                write_trace(p, r, a.ranks, a.launches)
                traces.append(str(p))
            subprocess.run([*trainprof_cmd(), "import", "kineto", *traces, "--out", str(run),
                            "-q"], check=True)
            for t in traces:
                os.unlink(t)
        events = run_events(run)
        walls, cpus, peaks, out_bytes = [], [], [], 0
        for _ in range(a.reps):
            m = measure(["analyze", str(run), "--json"])
            if m["rc"] != 0:
                raise RuntimeError(f"trainprof analyze exited {m['rc']}: {m['stderr']}")
            walls.append(m["wall_s"])
            cpus.append(m["cpu_s"])
            peaks.append(m["peak_mib"])
            out_bytes = m["out_bytes"]
        rates = [events / w for w in walls]
        wall = statistics.median(walls)
        cpu = statistics.median(cpus)
        rate = events / wall
        print(f"analyze --json of {a.ranks} ranks, {events:,} events "
              f"({out_bytes / 1e6:.1f} MB of JSON), median of {a.reps}: {wall:.3f} s wall, "
              f"{cpu:.3f} s CPU (CPU/wall {cpu / wall:.2f}): {rate / 1e6:.2f} M events/s wall, "
              f"{events / cpu / 1e6:.2f} M events/s CPU; peak memory "
              f"{statistics.median(peaks):.0f} MiB; load {os.getloadavg()[0]:.2f}")
        results.add("analyze.events_per_s", rates)
        results.add("analyze.cpu_per_wall", [c / w for c, w in zip(cpus, walls)])
        met = rate >= TARGET_EVENTS_PER_S
        print(f"analyze: {rate / 1e6:.2f} M events/s (target >= {TARGET_EVENTS_PER_S / 1e6:g} M): "
              f"{'met' if met else 'NOT met'}")
        return 0
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
