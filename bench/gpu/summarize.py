"""Prints what a recorded GPU run holds, next to what two independent readers saw over the same
time: nvidia-smi (a CSV from `nvidia-smi --query-gpu=... -lms`) and nvidia-ml-py (nvml_dump.py).

    python bench/gpu/summarize.py RUN_DIR [--smi smi.csv] [--dump nvml.json]
"""

from __future__ import annotations

import argparse
import json
import statistics

import trainprof


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--smi")
    ap.add_argument("--dump")
    args = ap.parse_args()
    run = trainprof.open(args.run)
    md = run.metadata
    print(f"== {args.run}\nexit_status={md.get('exit_status')} gpus={md.get('gpus') or md.get('hosts')}")
    print("problems:", run.problems)
    print("data quality:", run.data_quality())
    df = run.system_metrics().to_pandas()
    gpu = df[df["metric"].astype(str).str.startswith("gpu")]
    t0, t1 = (gpu["timestamp_ns"].min(), gpu["timestamp_ns"].max()) if len(gpu) else (None, None)
    print(f"gpu samples: {len(gpu)} rows, metrics recorded: {sorted(gpu['metric'].astype(str).unique())}")
    for (metric, device), g in gpu.groupby(["metric", "device"], observed=True):
        v = g["value"].dropna()
        if len(v):
            print(f"  {metric:36s} {device:8s} n={len(v):5d} min={v.min():.6g} "
                  f"median={v.median():.6g} max={v.max():.6g}")
    steps = run.steps().to_pandas()
    print(f"steps: {len(steps)} rows; columns {list(steps.columns)}")
    if len(steps):
        print(steps.describe().T.to_string())
    ev = run.events().to_pandas()
    if len(ev):
        print("event names:", ev.groupby(["category", "name"], observed=True).size().to_string())
    if args.smi and t0 is not None:
        rows = []
        with open(args.smi) as f:
            header = [h.strip() for h in f.readline().split(",")]
            for line in f:
                rows.append(dict(zip(header, [c.strip() for c in line.split(",")])))
        util = [float(r["utilization.gpu [%]"].split()[0]) for r in rows
                if r.get("utilization.gpu [%]", "").split()[:1] not in ([], ["[N/A]"])]
        mem = [float(r["memory.used [MiB]"].split()[0]) for r in rows if r.get("memory.used [MiB]")]
        power = [float(r["power.draw [W]"].split()[0]) for r in rows
                 if r.get("power.draw [W]", "").split()[:1] not in ([], ["[N/A]"])]
        tp = gpu[gpu["metric"].astype(str) == "gpu_utilization_ratio"]["value"].dropna()
        tm = gpu[gpu["metric"].astype(str) == "gpu_memory_used_bytes"]["value"].dropna()
        tw = gpu[gpu["metric"].astype(str) == "gpu_power_watts"]["value"].dropna()
        print("nvidia-smi vs trainprof over the run (medians):")
        if util and len(tp):
            print(f"  utilization: smi {statistics.median(util):.1f} %  trainprof {100 * tp.median():.1f} %")
        if mem and len(tm):
            print(f"  memory used: smi max {max(mem):.0f} MiB  trainprof max {tm.max() / 2**20:.0f} MiB")
        if power and len(tw):
            print(f"  power: smi {statistics.median(power):.1f} W  trainprof {tw.median():.1f} W")
    findings = run.findings()
    print(f"stored findings: {len(findings)}")
    for f in findings:
        print("  ", f)
    if args.dump:
        with open(args.dump) as f:
            dump = json.load(f)
        print("nvml dump:", json.dumps(dump["recorded_with"]))
        for d in dump["devices"]:
            keys = sorted({k for s in d["samples"] for k in s})
            print(f"  {d['name']}: {len(d['samples'])} samples; supported: {keys}")


if __name__ == "__main__":
    main()
