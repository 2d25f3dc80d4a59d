#!/usr/bin/env python3
"""The psutil peer of collect_bench: the same node readings through psutil, timed the same way.

Readings per sample (what trainprof's collectors read): CPU times per core and for the node,
load average, virtual and swap memory, network counters per interface, disk counters per
device, disk usage of "/", and with --tree the process tree of this process with 20 sleeping
children (per process: CPU times, memory info, I/O counters, threads).

CPU cost is process CPU time (user + system) per sample, median of batches, as collect_bench
measures it. With --cpp PATH it also runs collect_bench and prints both and the ratios:

    python3 bench/collect_psutil_peer.py --cpp build/bench/bench/collect_bench
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
import results  # noqa: E402 - bench/lib/results.py: the figures for bench/out/results.json

try:
    import psutil
except ImportError as e:  # the C++ side still runs; the ratio is reported as skipped
    psutil = None
    PSUTIL_MISSING = f"psutil not installed ({e})"


def node_sample():
    psutil.cpu_times(percpu=True)
    psutil.cpu_times()
    os.getloadavg()
    psutil.virtual_memory()
    psutil.swap_memory()
    psutil.net_io_counters(pernic=True)
    psutil.disk_io_counters(perdisk=True)
    psutil.disk_usage("/")


def tree_sample(root):
    procs = [root] + root.children(recursive=True)
    for p in procs:
        try:
            with p.oneshot():  # psutil's own fast path: one read of /proc/<pid>/stat
                p.cpu_times()
                p.memory_info()
                p.num_threads()
            p.io_counters()
        except psutil.NoSuchProcess:
            pass


def measure(fn, batches, per_batch):
    for _ in range(20):
        fn()
    us = []
    for _ in range(batches):
        start = time.process_time()
        for _ in range(per_batch):
            fn()
        us.append((time.process_time() - start) * 1e6 / per_batch)
    return statistics.median(us), min(us), us


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=15)
    ap.add_argument("--per-batch", type=int, default=200)
    ap.add_argument("--cpp", help="path of collect_bench, to print both and the ratio")
    args = ap.parse_args()
    if psutil is None:
        print(f"psutil peer: {PSUTIL_MISSING}")
        if args.cpp:
            report_cpp(args, {})
        return

    peer = {}
    peer["node"] = measure(node_sample, args.batches, args.per_batch)
    children = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
                for _ in range(20)]
    try:
        root = psutil.Process()
        peer["node+tree20"] = measure(lambda: (node_sample(), tree_sample(root)),
                                      args.batches, args.per_batch)
    finally:
        for c in children:
            c.send_signal(signal.SIGKILL)
            c.wait()

    print(f"psutil {psutil.__version__}: CPU per node sample, median of {args.batches} "
          f"batches x {args.per_batch}")
    for name, (med, lo, _) in peer.items():
        print(f"  {name:<12} {med:8.2f} us/sample (min {lo:.2f})")
    if args.cpp:
        report_cpp(args, peer)


FIGURES = {"node": "collect.node_us", "node+tree20": "collect.tree20_us"}


def report_cpp(args, peer):
    """Runs collect_bench, prints its figures and the ratios, and records both sides."""
    out = subprocess.run([args.cpp, "--json", "--batches", str(args.batches),
                          "--samples-per-batch", str(args.per_batch)],
                         check=True, capture_output=True, text=True).stdout
    cpp = json.loads(out)
    print("trainprof collect_bench:")
    for name, r in cpp.items():
        print(f"  {name:<12} {r['median_us']:8.2f} us/sample (min {r['min_us']:.2f}), "
              f"{r['median_us'] / 1000:.4f} % of one core at 100 ms")
    if peer:
        print("ratio (psutil / trainprof, the same readings per sample; higher is better):")
    for name, r in cpp.items():
        if name in peer:
            print(f"  {name:<12} {peer[name][0] / r['median_us']:6.1f}x")
    for name, figure in FIGURES.items():
        if name in cpp:
            results.add(figure, cpp[name]["us"])
            if name in peer:
                results.peer(figure, peer[name][2], detail=f"psutil {psutil.__version__}")
            else:
                results.peer(figure, skipped=PSUTIL_MISSING)
    tick = cpp.get("node+tree20@100ms")
    if tick:
        share = tick["median_us"] / 1000
        print(f"at --interval 100ms (tree every 200 ms, the default): {share:.3f} % of one "
              "core with the 20-process tree")
        results.add("collect.tick_share_pct", [us / 1000 for us in tick["us"]])


if __name__ == "__main__":
    main()
