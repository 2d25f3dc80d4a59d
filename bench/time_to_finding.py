#!/usr/bin/env python3
"""Seconds from a problem's onset to its finding, on real PyTorch (CPU) training jobs recorded
by `trainprof record --live-rules-every 1` with the default rules (issue 19).

Each planted job (bench/ttf_job.py) runs healthy for a few seconds after its first step, then
plants its problem and writes the wall time of the onset to a file: the truth, from the job
itself. The problems: host memory leak, data-loader starvation, step-time outliers, slow
initialisation (MaxInitializationTime's threshold set to 15 s: the onset is the moment it
passed), CPU-bound steps and I/O-bound input (with a replayed GPU that idles from the onset),
low GPU utilisation and GPU memory growth (replayed NVML, tests/nvml_replay: the job's onset
file switches the replayed GPU to its planted samples), one rank slower than the other (two
processes, gloo), repeated torch.compile recompilation, and training health (a learning rate
x 1e6: the loss becomes NaN; a learning rate of 0: the loss stops falling). The rules' actions are configured
with one `command` action (under ProfilerReport: every rule) that appends the wall time at which
it ran and the finding to a JSON-lines file: the time the finding was acted on, as a user's
checkpoint hook would see it. Time to finding = the first finding of an expected rule minus the
onset; target <= 60 s. Any other rule that fires is listed (on the healthy run, which has a
replayed healthy GPU, any finding at all is a failure).

    .venv/bin/python bench/time_to_finding.py                 # every problem, 10-minute healthy run
    .venv/bin/python bench/time_to_finding.py --quick         # the test command's short version
    .venv/bin/python bench/time_to_finding.py --problems leak,starvation --healthy-seconds 60

Prints one row per problem (onset -> finding, met / NOT met) and, with $BENCH_RESULTS set (by
bench/run_all.sh), reports figures ttf.<problem>_s and ttf.healthy_findings through
bench/lib/results.py. --json FILE writes the rows. Exit status 0 when every target is met, 1
when not, 2 on a bench error (a job that failed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "lib"))
import results  # noqa: E402

JOB = ROOT / "bench" / "ttf_job.py"
TARGET_S = 60.0

# problem -> (job mode, the rules whose finding names it)
PROBLEMS = {
    "leak": ("leak", {"HostMemoryGrowth"}),
    "starvation": ("starvation", {"DataLoaderStarvation"}),
    "outliers": ("outliers", {"StepOutlier"}),
    "slow_init": ("slow_init", {"MaxInitializationTime"}),
    "cpu_bound": ("cpu_bound", {"CPUBottleneck"}),
    "io_bound": ("io_bound", {"IOBottleneck", "DataLoaderStarvation"}),
    "low_gpu": ("low_gpu", {"LowGPUUtilization"}),
    "gpu_memory": ("gpu_memory", {"GPUMemoryGrowth", "GPUMemoryIncrease"}),
    "straggler": ("straggler", {"StragglerRank"}),
    "recompile": ("recompile", {"Recompilation"}),
    "loss_nan": ("loss_nan", {"LossNaN"}),
    "loss_flat": ("loss_flat", {"LossNotDecreasing"}),
}
# What the replayed GPU does from the onset on, for the problems recorded with one (NVML replay
# library, tests/nvml_replay; the job creates the switch file at its onset). The healthy run
# has the same GPU, healthy throughout.
GPU_ONSET = {"cpu_bound": "idle", "io_bound": "idle", "low_gpu": "low", "gpu_memory": "grows"}
GPU_PROBLEMS = set(GPU_ONSET)
REPLAY_LIB = ROOT / "build" / "py" / "tests" / "nvml_replay" / "libnvml_replay.so"
GPU_TOTAL = 80 * 2**30
# MaxInitializationTime judges minutes (20 by default): the planted slow start is judged
# against 15 s, and its onset is the moment initialisation passed them.
SLOW_INIT_THRESHOLD_S = 15.0
QUICK = ["leak", "low_gpu", "gpu_memory", "recompile"]
# The action: append {"t": wall time, "finding": ...} to the file named by its argument.
ACTION = ("import json, sys, time; f = json.load(sys.stdin); "
          "open(sys.argv[1], 'a').write(json.dumps({'t': time.time(), 'finding': f}) + '\\n')")


def trainprof_command() -> list[str]:
    """The installed CLI next to this interpreter, else $TRAINPROF_BIN, else `trainprof`."""
    if os.environ.get("TRAINPROF_BIN"):
        return [os.environ["TRAINPROF_BIN"]]
    here = Path(sys.executable).parent / "trainprof"
    if here.exists():
        return [str(here)]
    found = shutil.which("trainprof")
    if found is None:
        raise SystemExit("time_to_finding: no trainprof CLI (set TRAINPROF_BIN)")
    return [found]


def replay_file(path: Path, onset: str | None, onset_file: Path) -> None:
    """A one-GPU NVML replay (format: tests/nvml_replay/README.md): a busy GPU (88-99 %
    utilisation, 30 GiB of 80 GiB in use) whose samples switch, once `onset_file` exists, to
    the planted ones: idle (0-5 %), low (20-40 %) or memory growing 0.6 % of the GPU a sample."""
    rnd = random.Random(19)

    def sample(util: float, used: float) -> dict:
        return {"utilization": [round(util), round(util / 2)], "memory": [int(used), GPU_TOTAL],
                "temperature_c": 60, "power_mw": 300000}

    healthy = [sample(rnd.uniform(88, 99), 30 * 2**30) for _ in range(4000)]
    dev = {"name": "NVIDIA H100 80GB HBM3 (replayed)", "uuid": "GPU-ttf-0", "samples": healthy}
    if onset is not None:
        if onset == "idle":
            after = [sample(rnd.uniform(0, 5), 30 * 2**30) for _ in range(4000)]
        elif onset == "low":
            after = [sample(rnd.uniform(20, 40), 30 * 2**30) for _ in range(4000)]
        else:
            after = [sample(rnd.uniform(88, 99),
                            min(GPU_TOTAL * 0.995, 30 * 2**30 + 0.006 * GPU_TOTAL * k))
                     for k in range(400)]
        dev["onset_file"] = str(onset_file)
        dev["onset_samples"] = after
    path.write_text(json.dumps({"devices": [dev]}))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(name: str, mode: str, work: Path, seconds: float, onset: float,
          interval: str) -> dict:
    """Starts `trainprof record` of one planted job; returns its handles."""
    d = work / name
    d.mkdir(parents=True)
    findings = d / "findings.jsonl"
    config = {"rules": {"ProfilerReport": {"actions": [
        {"type": "log"},
        {"type": "command", "command": [sys.executable, "-c", ACTION, str(findings)]}]}}}
    if mode == "slow_init":
        config["rules"]["MaxInitializationTime"] = {
            "parameters": {"threshold": SLOW_INIT_THRESHOLD_S / 60}}
    (d / "rules.json").write_text(json.dumps(config))
    env = dict(os.environ)
    gpu = mode in GPU_PROBLEMS or mode == "healthy"
    job_args = ["--mode", mode, "--seconds", str(seconds), "--onset", str(onset),
                "--onset-file", str(d / "onset.json"), "--stop-file", str(d / "stop")]
    if gpu:
        if not REPLAY_LIB.exists():
            raise RuntimeError(f"{REPLAY_LIB} not built (tpbuild nvml_replay)")
        replay_file(d / "nvml.json", GPU_ONSET.get(mode), d / "gpu_onset")
        env["TRAINPROF_NVML_LIBRARY"] = str(REPLAY_LIB)
        env["TRAINPROF_NVML_REPLAY"] = str(d / "nvml.json")
        job_args += ["--gpu-onset-file", str(d / "gpu_onset")]
    if mode == "slow_init":
        job_args += ["--init-seconds", str(SLOW_INIT_THRESHOLD_S + 45),
                     "--init-threshold", str(SLOW_INIT_THRESHOLD_S)]
    launcher = [sys.executable, str(JOB)]
    if mode == "straggler":  # two processes, gloo
        launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                    f"--master_port={free_port()}", str(JOB)]
    cmd = [*trainprof_command(), "record", "--out", str(d / "run"), "--interval", interval,
           *([] if gpu else ["--no-gpu"]), "--rules-config", str(d / "rules.json"),
           "--live-rules-every", "1", "--", *launcher, *job_args]
    log = open(d / "record.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
    return {"name": name, "mode": mode, "dir": d, "proc": proc, "log": log,
            "findings": findings, "began": time.time()}


def read_findings(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line being written
    return rows


def run(problems: list[str], healthy_seconds: float, onset: float, wait_s: float,
        interval: str, keep: bool, parallel: int) -> list[dict]:
    """The healthy job runs alongside; the planted ones `parallel` at a time with it (a job's
    steps on a busy 2-core machine are themselves slowed by the others)."""
    work = Path(tempfile.mkdtemp(prefix="ttf_"))
    jobs: list[dict] = []
    queue = list(problems)
    try:
        if healthy_seconds > 0:
            jobs.append(start("healthy", "healthy", work, healthy_seconds, onset, interval))
        while queue or any(j["proc"].poll() is None for j in jobs):
            running = sum(j["proc"].poll() is None for j in jobs)
            if queue and running < parallel:
                p = queue.pop(0)
                jobs.append(start(p, PROBLEMS[p][0], work, onset + wait_s + 15, onset, interval))
                continue
            # Stop each planted job once its finding arrived (2 s later: the stored finding
            # settles).
            for j in jobs:
                if j["name"] == "healthy" or j["proc"].poll() is not None:
                    continue
                wanted = PROBLEMS[j["name"]][1]
                seen = [r for r in read_findings(j["findings"])
                        if r["finding"].get("rule") in wanted]
                if seen and time.time() - seen[0]["t"] > 2:
                    (j["dir"] / "stop").touch()
            time.sleep(0.5)
        rows = []
        for j in jobs:
            j["log"].close()
            if j["proc"].returncode != 0:
                tail = (j["dir"] / "record.log").read_text()[-2000:]
                raise RuntimeError(f"{j['name']}: record exited {j['proc'].returncode}:\n{tail}")
            rows.append(judge(j))
        return rows
    finally:
        for j in jobs:
            if j["proc"].poll() is None:
                j["proc"].kill()
        if keep:
            print(f"(runs kept in {work})")
        else:
            shutil.rmtree(work, ignore_errors=True)


def judge(j: dict) -> dict:
    got = read_findings(j["findings"])
    if j["name"] == "healthy":
        return {"problem": "healthy", "expected": [], "onset_s": None, "seconds": None,
                "findings": [r["finding"]["rule"] for r in got],
                "messages": [r["finding"]["message"] for r in got],
                "met": not got}
    wanted = PROBLEMS[j["name"]][1]
    onset_file = j["dir"] / "onset.json"
    if not onset_file.exists():
        raise RuntimeError(f"{j['name']}: the job never planted its problem")
    onset = json.loads(onset_file.read_text())["onset_unix_s"]
    hit = next((r for r in got if r["finding"].get("rule") in wanted), None)
    seconds = hit["t"] - onset if hit else None
    return {"problem": j["name"], "expected": sorted(wanted),
            "onset_s": round(onset - j["began"], 1),
            "seconds": None if seconds is None else round(seconds, 1),
            "rule": hit["finding"]["rule"] if hit else None,
            "message": hit["finding"]["message"] if hit else None,
            "evidence": hit["finding"].get("evidence") if hit else None,
            "others": sorted({r["finding"]["rule"] for r in got} - wanted),
            "met": seconds is not None and 0 <= seconds <= TARGET_S}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default=",".join(PROBLEMS),
                    help="comma-separated: " + ", ".join(PROBLEMS))
    ap.add_argument("--healthy-seconds", type=float, default=600,
                    help="length of the healthy run (0: none)")
    ap.add_argument("--onset", type=float, default=8, help="healthy seconds before the problem")
    ap.add_argument("--wait", type=float, default=90,
                    help="seconds after the onset a planted job runs at most")
    ap.add_argument("--interval", default="500ms", help="record's sampling interval")
    ap.add_argument("--quick", action="store_true",
                    help="the test command's version: " + ", ".join(QUICK) + " and a 30-s "
                    "healthy run, all at once (the jobs mostly sleep)")
    ap.add_argument("--parallel", type=int, default=None,
                    help="jobs recorded at once, the healthy one included (default 2; "
                    "--quick: all)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    a = ap.parse_args()
    problems = [p for p in a.problems.split(",") if p]
    healthy = a.healthy_seconds
    parallel = a.parallel or 2
    if a.quick:
        problems, healthy = list(QUICK), min(healthy, 30)
        parallel = a.parallel or len(problems) + 1
    for p in problems:
        if p not in PROBLEMS:
            print(f"time_to_finding: unknown problem {p!r} (known: {', '.join(PROBLEMS)})",
                  file=sys.stderr)
            return 2
    try:
        rows = run(problems, healthy, a.onset, a.wait, a.interval, a.keep, max(1, parallel))
    except RuntimeError as e:
        print(f"time_to_finding: {e}", file=sys.stderr)
        return 2
    machine = f"{platform.node()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    print(f"time to finding on {machine}")
    print(f"{'problem':<12} {'rule':<22} {'onset':>7} {'to finding':>11}  target   verdict")
    for r in rows:
        if r["problem"] == "healthy":
            what = ", ".join(r["findings"]) or "no finding"
            print(f"{'healthy':<12} {'(any)':<22} {'':>7} {'':>11}  none     "
                  f"{'met' if r['met'] else 'NOT met'} ({what})")
            for m in r["messages"]:
                print(f"    {m}")
            continue
        secs = "never" if r["seconds"] is None else f"{r['seconds']:.1f} s"
        rule = r["rule"] or "/".join(r["expected"])
        print(f"{r['problem']:<12} {rule:<22} {r['onset_s']:>6.1f}s "
              f"{secs:>11}  <= {TARGET_S:.0f} s  {'met' if r['met'] else 'NOT met'}")
        if r["message"]:
            print(f"    {r['message']}")
        if r["others"]:
            print(f"    also fired: {', '.join(r['others'])}")
    for r in rows:
        if r["problem"] == "healthy":
            results.add("ttf.healthy_findings", [len(r["findings"])])
        elif r["seconds"] is not None:
            results.add(f"ttf.{r['problem']}_s", [r["seconds"]])
        else:
            results.skip(f"ttf.{r['problem']}_s", "no finding within the run")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["met"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
