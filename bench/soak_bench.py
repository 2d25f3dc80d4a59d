"""A 24-hour, 8-GPU, 100 ms recording at accelerated speed (issue 20, "Load"): recorder memory
flat, reader and rules as fast at the end as at the start.

tests/soak/soak_recorder drives the recorder's own parts (the node's collectors, NVML through
the replay library serving 8 generated GPUs, the sampling loop, the store writer flushed every
simulated second, the live rules polled every --live-every-s simulated seconds as `record
--live-rules-every` does, a reader opened on the run every --query-every-s to read the last
--query-window-s as a dashboard does) tick after tick as fast as they go, the ticks' clock
simulated 100 ms apart. It samples its own VmRSS every simulated minute and times each live
poll and each reader query.

Judged here, after a warm-up (the first hour; a quarter of a shorter run):
  memory    the mean RSS of the last hour minus that of the first hour after the warm-up
            (target <= RSS_GROWTH_MIB);
  rules     the median live-rules poll in the last hour / in the first hour after warm-up;
  reader    the median dashboard query in the last hour / in the first hour after warm-up;
  read      after the run, the first hour and the last hour of the store read whole through
            the Python reader (interleaved, median of 5 each), last / first;
each ratio within RATIO_TARGET. What was stored is checked against what was generated: every GPU
series holds one value per tick, and the first minute of GPU 0's utilisation read back equals
the generated samples. `trainprof rules RUN` over the whole run is timed once, for the record.

Usage: python bench/soak_bench.py [--hours 24] [--keep DIR] [--recorder PATH] [--replay PATH]
The short form (one simulated hour) is tests/python/test_soak.py. Under bench/run_all.sh
(section soak) the figures go to its results file."""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "lib"))
import results  # noqa: E402

RSS_GROWTH_MIB = 8.0
RATIO_TARGET = 1.5
GPUS = 8
CYCLE = 600  # generated samples per GPU (one simulated minute at 100 ms), replayed in a cycle


def _find(names: list[str]) -> Path | None:
    for n in names:
        p = ROOT / n
        if p.exists():
            return p
    return None


def gpu_samples(gpu: int, n: int = CYCLE) -> list[dict]:
    """The generated NVML answers of one GPU: utilisation, memory, power, temperature and clocks
    that move (a slow wave per GPU plus a step pattern), PCIe/NVLink counters that grow within
    the cycle."""
    total = 141 * 1024**3
    out = []
    for k in range(n):
        wave = 0.5 + 0.45 * math.sin(2 * math.pi * (k / n + gpu / GPUS))
        util = int(round(100 * wave)) if k % 50 else 3  # an input stall every 5 s
        out.append({
            "utilization": [util, int(util * 0.6)],
            "memory": [int(total * (0.55 + 0.1 * wave)), total],
            "power_mw": int(150_000 + 500_000 * wave), "temperature_c": 40 + int(30 * wave),
            "clock_sm_mhz": 1980 if util > 10 else 1410, "clock_mem_mhz": 3201,
            "clock_event_reasons": 0 if util > 10 else 1, "ecc_corrected": 0, "ecc_uncorrected": 0,
            "fields": {"197": 10_000_000 * k, "198": 20_000_000 * k, "138": 4096 * k, "139": 4096 * k},
            "processes": []})
    return out


def write_replay(path: Path) -> list[list[dict]]:
    devices = [{"name": "NVIDIA H200", "uuid": f"GPU-50a4-{i:04d}", "cycle": True,
                "samples": gpu_samples(i)} for i in range(GPUS)]
    path.write_text(json.dumps({"devices": devices}))
    return [d["samples"] for d in devices]


def record(run: Path, hours: float, recorder: Path, replay_lib: Path, replay: Path, *,
           live_every_s: int = 5, query_every_s: int = 300, query_window_s: int = 300,
           rss_every_s: int = 60, seal_values: int = 4096) -> dict:
    """Runs soak_recorder; its JSON document (also saved as soak.json beside the run)."""
    env = dict(os.environ, TRAINPROF_NVML_LIBRARY=str(replay_lib), TRAINPROF_NVML_REPLAY=str(replay))
    cmd = [str(recorder), "--run", str(run), "--hours", str(hours), "--live-every-s",
           str(live_every_s), "--query-every-s", str(query_every_s), "--query-window-s",
           str(query_window_s), "--rss-every-s", str(rss_every_s), "--seal-values",
           str(seal_values)]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=None, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"soak_recorder failed ({p.returncode})")
    text = p.stdout.strip().splitlines()[-1]
    (run.parent / "soak.json").write_text(text)
    return json.loads(text)


def windows(total_s: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """(first window after the warm-up, last window), in simulated seconds: an hour each after
    an hour's warm-up, a quarter of the run each in a shorter one."""
    length = min(3600.0, total_s / 4)
    return (length, 2 * length), (total_s - length, total_s + 1)


def _in(points: list, w: tuple[float, float], col: int = 1) -> list[float]:
    return [p[col] for p in points if w[0] <= p[0] < w[1]]


def judge(doc: dict) -> dict:
    total = doc["hours"] * 3600
    first, last = windows(total)
    rss_first = statistics.mean(_in(doc["rss_kb"], first)) / 1024
    rss_last = statistics.mean(_in(doc["rss_kb"], last)) / 1024
    poll_first = statistics.median(_in(doc["live_poll_ms"], first))
    poll_last = statistics.median(_in(doc["live_poll_ms"], last))
    q_first = statistics.median(_in(doc["query_ms"], first))
    q_last = statistics.median(_in(doc["query_ms"], last))
    # the heap in use (mallinfo2: what the recorder holds, not what the allocator keeps)
    heap_first = statistics.mean(_in(doc["rss_kb"], first, 5)) / 1024
    heap_last = statistics.mean(_in(doc["rss_kb"], last, 5)) / 1024
    return {"windows_s": [first, last],
            "heap_first_mib": heap_first, "heap_last_mib": heap_last,
            "heap_growth_mib": heap_last - heap_first,
            "rss_first_mib": rss_first, "rss_last_mib": rss_last,
            "rss_peak_mib": max(p[1] for p in doc["rss_kb"]) / 1024,
            "rss_growth_mib": rss_last - rss_first,
            "poll_first_ms": poll_first, "poll_last_ms": poll_last,
            "poll_ratio": poll_last / poll_first,
            "query_first_ms": q_first, "query_last_ms": q_last, "query_ratio": q_last / q_first}


def read_hours(run: Path, doc: dict, generated: list[list[dict]], repeat: int = 5) -> dict:
    """The first and the last hour (a quarter of a shorter run) read whole through the Python
    reader, timed (interleaved, median of `repeat` each: the machine's load changes between
    them); the stored GPU values checked against the generated ones."""
    import trainprof

    r = trainprof.open(str(run))
    length_ns = int(min(3600.0, doc["hours"] * 900) * 1e9)
    start, end = doc["start_ns"], doc["end_ns"]
    spans = {"first": (start, start + length_ns), "last": (end - length_ns + 1, end + 1)}
    samples: dict = {name: [] for name in spans}
    rows = {}
    for _ in range(repeat):
        for name, (a, b) in spans.items():
            t = time.perf_counter()
            table = r.system_metrics(a, b)
            samples[name].append(time.perf_counter() - t)
            rows[name] = len(table)
    times = {name: statistics.median(ts) for name, ts in samples.items()}
    problems = []
    ticks = doc["ticks"]
    gpu = r.system_metrics(metrics="gpu_utilization_ratio").to_pandas()
    counts = gpu.groupby("device").size()
    if len(counts) != GPUS or (counts != ticks).any():
        problems.append(f"GPU utilisation values per GPU {counts.to_dict()}, not {ticks} each")
    g0 = gpu[gpu["device"] == "gpu0"].sort_values("timestamp_ns")["value"].head(CYCLE).tolist()
    want = [s["utilization"][0] / 100 for s in generated[0]][:len(g0)]
    if len(g0) < min(CYCLE, ticks) or any(abs(a - b) > 1e-9 for a, b in zip(g0, want)):
        problems.append("GPU 0's stored utilisation differs from the generated samples")
    return {"read_first_s": times["first"], "read_last_s": times["last"],
            "read_ratio": times["last"] / times["first"], "rows_first": rows["first"],
            "rows_last": rows["last"], "problems": problems}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--keep", help="record into this directory and keep it")
    ap.add_argument("--recorder", help="the soak_recorder program (default: the bench build's, "
                                       "else the test build's)")
    ap.add_argument("--replay", help="libnvml_replay.so (default: beside the recorder's build)")
    ap.add_argument("--trainprof", help="the trainprof executable for the whole-run rules timing")
    ap.add_argument("--recorded", help="judge a recording kept by an earlier --keep DIR instead")
    a = ap.parse_args()
    if a.recorded:
        a.keep = a.recorded
    recorder = Path(a.recorder) if a.recorder else _find(
        ["build/bench/tests/soak/soak_recorder", "build/py/tests/soak/soak_recorder"])
    replay_lib = Path(a.replay) if a.replay else _find(
        ["build/bench/tests/nvml_replay/libnvml_replay.so", "build/py/tests/nvml_replay/libnvml_replay.so"])
    if not a.recorded and (recorder is None or replay_lib is None):
        print("soak_recorder or libnvml_replay.so is not built (cmake --build ... --target "
              "soak_recorder nvml_replay)")
        return 1
    root = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="soak-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        run = root / "run"
        replay = root / "gpus.json"
        if a.recorded:
            generated = [d["samples"] for d in json.loads(replay.read_text())["devices"]]
            doc = json.loads((root / "soak.json").read_text())
            a.hours = doc["hours"]
        else:
            generated = write_replay(replay)
            doc = record(run, a.hours, recorder, replay_lib, replay)
        size = sum(f.stat().st_size for f in run.rglob("*") if f.is_file())
        print(f"recorded {a.hours:g} simulated hours ({doc['ticks']:,} ticks of 100 ms, "
              f"{doc['gpus']} GPUs, {doc['values_written']:,} values, store {size / 1e6:.1f} MB) "
              f"in {doc['record_wall_s']:.1f} s wall ({a.hours * 3600 / doc['record_wall_s']:.0f}x "
              f"real time); dropped {doc['dropped_values']}, write errors {doc['write_errors']}, "
              f"collector errors {doc['collector_errors']}, findings {doc['findings']}")
        j = judge(doc)
        rd = read_hours(run, doc, generated)
        problems = list(rd["problems"])
        if doc["gpus"] != GPUS:
            problems.append(f"{doc['gpus']} GPUs recorded, not {GPUS}")
        if doc["dropped_values"] or doc["write_errors"]:
            problems.append("values dropped or write errors")
        (f0, f1), (l0, l1) = j["windows_s"]
        print(f"  windows (simulated): first [{f0 / 3600:.2f} h, {f1 / 3600:.2f} h), last "
              f"[{l0 / 3600:.2f} h, {a.hours:.2f} h]")
        print(f"  RSS: first {j['rss_first_mib']:.1f} MiB, last {j['rss_last_mib']:.1f} MiB, growth "
              f"{j['rss_growth_mib']:+.2f} MiB (target <= {RSS_GROWTH_MIB:g}), peak "
              f"{j['rss_peak_mib']:.1f} MiB; heap in use: first {j['heap_first_mib']:.1f} MiB, last "
              f"{j['heap_last_mib']:.1f} MiB, growth {j['heap_growth_mib']:+.2f} MiB")
        print(f"  live rules poll (median): first {j['poll_first_ms']:.2f} ms, last "
              f"{j['poll_last_ms']:.2f} ms, ratio {j['poll_ratio']:.2f} (target <= {RATIO_TARGET:g})")
        print(f"  dashboard query of the last {doc['query_window_s']} s (median): first "
              f"{j['query_first_ms']:.2f} ms, last {j['query_last_ms']:.2f} ms, ratio "
              f"{j['query_ratio']:.2f} (target <= {RATIO_TARGET:g})")
        print(f"  reading a whole hour after the run: first {rd['read_first_s']:.3f} s "
              f"({rd['rows_first']:,} rows), last {rd['read_last_s']:.3f} s ({rd['rows_last']:,} "
              f"rows), ratio {rd['read_ratio']:.2f} (target <= {RATIO_TARGET:g})")
        exe = a.trainprof or os.environ.get("TRAINPROF_BIN")
        if exe:
            t = time.perf_counter()
            p = subprocess.run([exe, "rules", str(run), "--json"], capture_output=True, text=True)
            rules_s = time.perf_counter() - t
            ok = p.returncode in (0, 2)
            print(f"  `trainprof rules` over the whole run: {rules_s:.1f} s "
                  f"({'ok' if ok else 'FAILED: ' + p.stderr[-300:]})")
            if not ok:
                problems.append("trainprof rules failed on the run")
        for p in problems:
            print(f"  WRONG: {p}")
        met = {"memory flat": j["rss_growth_mib"] <= RSS_GROWTH_MIB,
               "live rules as fast at the end": j["poll_ratio"] <= RATIO_TARGET,
               "dashboard reader as fast at the end": j["query_ratio"] <= RATIO_TARGET,
               "an hour read as fast at the end": rd["read_ratio"] <= RATIO_TARGET}
        for what, ok in met.items():
            print(f"{a.hours:g} h soak: {what}: {'met' if ok and not problems else 'NOT met'}")
        if a.hours >= 24 and not problems:
            results.add("soak.rss_growth_mib", j["rss_growth_mib"])
            results.add("soak.heap_growth_mib", j["heap_growth_mib"])
            results.add("soak.live_poll_ratio", j["poll_ratio"])
            results.add("soak.query_ratio", j["query_ratio"])
            results.add("soak.read_hour_ratio", rd["read_ratio"])
            results.add("soak.speedup", a.hours * 3600 / doc["record_wall_s"])
        return 0 if not problems else 1
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
