#!/usr/bin/env python3
"""Times HolisticTraceAnalysis loading the trace that bench/import_bench wrote, and prints the
ratios against trainprof's figures (passed on the command line by import_bench's last line).

    python3 bench/import_bench_hta.py TRACE TRAINPROF_EVENTS_PER_S TRAINPROF_BYTES_PER_EVENT
"""
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
import results  # noqa: E402 - bench/lib/results.py: the figures for bench/out/results.json


def main():
    trace, tp_rate, tp_bytes = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    try:
        from hta.trace_analysis import TraceAnalysis  # pip install HolisticTraceAnalysis
    except ImportError as e:
        print("HTA not installed (pip install HolisticTraceAnalysis): no ratio printed")
        for figure in ("import.synthetic_events_per_s", "import.synthetic_bytes_per_event"):
            results.peer(figure, skipped=f"HTA not installed ({e})")
        return 0
    d = tempfile.mkdtemp()
    shutil.copy(trace, os.path.join(d, "rank-0.json"))
    # Count the events without loading the file: a json.load here would raise the peak RSS
    # before HTA starts and hide HTA's own memory. import_bench writes one event a line.
    n = 0
    with open(trace) as f:
        for line in f:
            n += line.lstrip().startswith('{"ph"')
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    TraceAnalysis(trace_dir=d)
    wall = time.perf_counter() - t0
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rate = n / wall
    per = (rss1 - rss0) * 1024 / n
    print(f"HTA load: {wall:.2f} s, {rate:.0f} events/s, {per:.0f} bytes/event")
    try:
        from importlib.metadata import version
        detail = f"HolisticTraceAnalysis {version('HolisticTraceAnalysis')}"
    except Exception:  # noqa: BLE001 - the version is only a label
        detail = "HolisticTraceAnalysis"
    results.peer("import.synthetic_events_per_s", rate, detail=detail)
    results.peer("import.synthetic_bytes_per_event", per, detail=detail)
    print(f"ratio trainprof/HTA speed: {tp_rate / rate:.1f}x; memory HTA/trainprof: "
          f"{per / max(tp_bytes, 1e-9):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
