"""Read throughput into pandas through trainprof's Python reader, and SageMaker Debugger's
LocalSystemMetricsReader on the same samples in its own JSON format (when smdebug is installed),
in the same run. Prints medians and the ratio.

Usage: python bench/store_read_bench.py RUN_DIR SMDEBUG_PROFILER_OUTPUT_DIR [--repeat 5]
(bench/run_all.sh prepares both with build/bench/bench/store_bench.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import trainprof

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
import results  # noqa: E402 - bench/lib/results.py: the figures for bench/out/results.json


def time_trainprof(run_dir: str, repeat: int) -> tuple[list[float], int]:
    rates, n = [], 0
    for _ in range(repeat):
        run = trainprof.open(run_dir)
        start = time.perf_counter()
        df = run.system_metrics().to_pandas()
        elapsed = time.perf_counter() - start
        n = len(df)
        rates.append(n / elapsed)
    return rates, n


def time_smdebug(path: str, repeat: int) -> tuple[list[float], int, str] | None:
    try:
        import smdebug
        from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader
    except Exception as e:  # noqa: BLE001 - any import problem means "peer not available"
        print(f"smdebug peer: not available ({type(e).__name__}: {e})")
        results.peer("store.read_python", skipped=f"smdebug not available ({type(e).__name__})")
        return None
    rates, n = [], 0
    for _ in range(min(repeat, 3)):
        reader = LocalSystemMetricsReader(path)
        start = time.perf_counter()
        events = reader.get_events(0, 2**62)  # whole range, microseconds
        elapsed = time.perf_counter() - start
        n = len(events)
        rates.append(n / elapsed)
    return rates, n, getattr(smdebug, "__version__", "?")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("smdebug_dir")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    our_rates, n = time_trainprof(args.run_dir, args.repeat)
    ours = statistics.median(our_rates)
    results.add("store.read_python", [r / 1e6 for r in our_rates])
    print(f"trainprof Python reader -> pandas: median {ours / 1e6:.1f} M values/s over {n} values")
    peer = time_smdebug(args.smdebug_dir, args.repeat)
    if peer:
        rates, m, version = peer
        rate = statistics.median(rates)
        results.peer("store.read_python", [r / 1e6 for r in rates], detail=f"smdebug {version}")
        print(f"smdebug LocalSystemMetricsReader.get_events: median {rate / 1e6:.3f} M values/s "
              f"over {m} values")
        print(f"ratio trainprof/smdebug (values/s): {ours / rate:.0f}x")


if __name__ == "__main__":
    main()
