"""What the live rules add to `trainprof record`: the recorder's CPU time with
--live-rules-every 5 (the default) against --live-rules-every 0, on the same job at the
default 500 ms interval, as a share of one core (issues 6 and 19; targets: bench/targets.toml).
Three jobs:
  idle      sleeps: the CPU time of the children is the recorder's own plus a constant
            Python start-up;
  stepping  20 steps a second through trainprof.step() with data_wait / forward / backward
            spans (what a training loop writes), so every poll has new steps and events to
            read; its own CPU is the same in both arms and cancels out in the median;
  busy      a busy 8-GPU, 32-core node's data volume: 8 ranks (processes) each stepping 10
            times a second with data_wait / forward / backward / optimizer spans, 8 GPUs
            answered by the NVML replay library (tests/nvml_replay, from the real H200
            recording's training section, cycled) and 32 cores: the recorder reads its /proc
            from a tree (TRAINPROF_PROC_ROOT) whose `stat` this script rewrites every 100 ms
            with 32 busy cores' counters (every other entry links to the real /proc). The
            stored run is checked to hold 32 cores' and 8 GPUs' series.
It prints two figures per job: the difference of the whole process tree's CPU time between the
two settings (noisy: it includes the job and Python's start-up), and the recorder's own count
of the thread CPU time its polls took, which it prints when the job ends (the precise one).

    python bench/live_rules_overhead.py [--seconds 40] [--reps 3] [--trainprof PATH]
                                        [--jobs idle,stepping,busy]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
import results  # noqa: E402 - bench/lib/results.py: the figures for bench/out/results.json


POLL_CPU = re.compile(r"CPU ([0-9.]+) ms in polls = ([0-9.]+) % of one core")


ROOT = Path(__file__).resolve().parent.parent
REPLAY_LIB = ROOT / "build" / "py" / "tests" / "nvml_replay" / "libnvml_replay.so"
H200 = ROOT / "tests" / "testdata" / "nvml" / "h200_real.json"
CORES, GPUS, RANKS = 32, 8, 8


def cpu_of(cmd: list[str], polls: list[float], env: dict | None = None) -> float:
    """CPU seconds of the command and its children; appends the recorder's own figure for its
    live polls (thread CPU time, % of one core) to `polls` when it prints one."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = POLL_CPU.search(done.stderr)
    if m:
        polls.append(float(m.group(2)))
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


class BusyProc:
    """A /proc for the recorder with CORES busy cores. Every entry of the real /proc is linked
    (process directories too, re-linked every 100 ms as processes start); `stat` is a file of
    fixed width rewritten in place every 100 ms (the collector keeps it open and preads it)
    with each core's counters advancing 10 jiffies a tick: about 85 % user, 5 % system, 10 %
    idle, varying a little per core and tick."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir()
        self.rng = random.Random(7)
        self.cpu = [[0] * 10 for _ in range(CORES)]
        self.ctxt = 0
        self.linked: set[str] = set()
        self.fd = os.open(root / "stat", os.O_RDWR | os.O_CREAT, 0o644)
        self._link()
        self._write()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _link(self) -> None:
        for name in os.listdir("/proc"):
            if name == "stat" or name in self.linked:
                continue
            try:
                os.symlink(f"/proc/{name}", self.root / name)
            except FileExistsError:
                pass
            self.linked.add(name)

    def _write(self) -> None:
        for c in self.cpu:
            idle = self.rng.choice((0, 1, 1, 2))
            system = self.rng.choice((0, 0, 1, 1))
            c[0] += 10 - idle - system  # user
            c[2] += system
            c[3] += idle
        self.ctxt += 40_000
        total = [sum(c[i] for c in self.cpu) for i in range(10)]
        lines = ["cpu  " + " ".join(f"{v:14d}" for v in total)]
        lines += [f"cpu{i:<3d}" + " ".join(f"{v:14d}" for v in c) for i, c in enumerate(self.cpu)]
        lines += [f"ctxt {self.ctxt:16d}", "btime 1700000000", "processes 1000",
                  "procs_running   32", "procs_blocked    0"]
        os.pwrite(self.fd, ("\n".join(lines) + "\n").encode(), 0)

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            self._write()
            self._link()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        os.close(self.fd)


def busy_replay(path: Path, seconds: float) -> None:
    """GPUS devices from the H200 recording's training section (utilisation > 0), cycled to
    outlast the run at 500 ms (the replay repeats its last sample once a list runs out), each
    device starting at another offset; the energy counter kept increasing across the cycles."""
    rec = json.loads(H200.read_text())
    dev0 = rec["devices"][0]
    busy = [x for x in dev0["samples"] if x["utilization"][0] > 0]
    n = int(seconds * 2) + 40
    devices = []
    for d in range(GPUS):
        samples, energy, last = [], 0, None
        for k in range(n):
            x = dict(busy[(k + 13 * d) % len(busy)])
            e = x.get("energy_mj", 0)
            energy += 0 if last is None or e < last else e - last
            last = e
            x["energy_mj"] = energy
            x["processes"] = []
            samples.append(x)
        devices.append({"name": dev0["name"], "uuid": f"GPU-00000000-0000-0000-0000-00000000000{d}",
                        "memory_reserved": dev0.get("memory_reserved", 0), "samples": samples})
    path.write_text(json.dumps({"devices": devices}))


def check_busy_run(run_dir: str) -> str:
    """What the live thread had to read: the run's series and values, checked to be a busy
    node's (32 cores, 8 GPUs, 8 ranks' steps)."""
    import trainprof
    run = trainprof.open(run_dir)
    m = run.system_metrics().to_pandas()
    series = m.groupby(["metric", "device"], observed=True).size()
    cores = {str(d) for d in m["device"].unique() if str(d).startswith("cpu")}
    gpus = {str(d) for met, d in series.index if str(met).startswith("gpu")}
    steps = run.steps().to_pandas()
    if len(cores) < CORES or len(gpus) < GPUS or steps["pid"].nunique() < RANKS:
        raise SystemExit(f"busy run is not a busy node: {len(cores)} cores, {len(gpus)} GPUs, "
                         f"{steps['pid'].nunique()} ranks with steps")
    return (f"{len(series)} series ({len(cores)} cores, {len(gpus)} GPUs), {len(m):,} values, "
            f"{len(steps):,} steps of {steps['pid'].nunique()} ranks")


def target_of(figure: str) -> float:
    with open(ROOT / "bench" / "targets.toml", "rb") as f:
        return float(tomllib.load(f)["figure"][figure]["target"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--trainprof", default=shutil.which("trainprof") or "build/py/src/cli/trainprof")
    ap.add_argument("--jobs", default="idle,stepping,busy")
    args = ap.parse_args()
    jobs = {
        "idle": f"import time; time.sleep({args.seconds})",
        "stepping": STEPPING.format(seconds=args.seconds),
        "busy": BUSY_LAUNCHER.format(ranks=RANKS, rank_job=BUSY_RANK.format(seconds=args.seconds)),
    }
    for job_name in args.jobs.split(","):
        code = jobs[job_name]
        job = [sys.executable, "-c", code]
        cpu = {"5": [], "0": []}
        polls: list[float] = []
        volume = ""
        with tempfile.TemporaryDirectory() as tmp:
            env = None
            gpu_flag = ["--no-gpu"]
            proc = None
            if job_name == "busy":
                if not REPLAY_LIB.exists():
                    results.skip("rules.live_busy_pct", f"{REPLAY_LIB} not built")
                    print(f"busy     job: skipped, {REPLAY_LIB} not built")
                    continue
                replay = Path(tmp) / "gpus.json"
                busy_replay(replay, args.seconds)
                proc = BusyProc(Path(tmp) / "proc")
                env = dict(os.environ, TRAINPROF_NVML_LIBRARY=str(REPLAY_LIB),
                           TRAINPROF_NVML_REPLAY=str(replay), TRAINPROF_PROC_ROOT=str(proc.root))
                gpu_flag = []
            try:
                for rep in range(args.reps):
                    for every in ("5", "0"):
                        out = os.path.join(tmp, f"run-{every}-{rep}")
                        cpu[every].append(cpu_of([args.trainprof, "record", "--out", out,
                                                  *gpu_flag, "--live-rules-every", every, "--",
                                                  *job], polls, env))
                        if job_name == "busy" and every == "5" and rep == 0:
                            volume = check_busy_run(out)
            finally:
                if proc is not None:
                    proc.close()
        on, off = statistics.median(cpu["5"]), statistics.median(cpu["0"])
        share = (on - off) / args.seconds * 100
        print(f"{job_name:8s} job, record CPU over {args.seconds:.0f} s at 500 ms: live rules "
              f"every 5 s {on:.3f} s, off {off:.3f} s (medians of {args.reps}); live adds "
              f"{(on - off) * 1000:.0f} ms = {share:.3f} % of one core")
        if volume:
            print(f"{job_name:8s} job, what the run held (first live run): {volume}")
        if polls:
            poll_share = statistics.median(polls)
            target = target_of(f"rules.live_{job_name}_pct")
            print(f"{job_name:8s} job, the recorder's own count of its polls' thread CPU: "
                  f"{poll_share:.3f} % of one core (median of {len(polls)}: "
                  f"{', '.join(f'{x:.3f}' for x in polls)}; target <= "
                  f"{target:g} %: {'met' if poll_share <= target else 'NOT met'})")
            results.add(f"rules.live_{job_name}_pct", polls)
        else:
            results.skip(f"rules.live_{job_name}_pct",
                         "the recorder printed no count of its polls' CPU")


STEPPING = """
import time, trainprof
trainprof.start(auto=False)
end = time.monotonic() + {seconds}
while time.monotonic() < end:
    with trainprof.step():
        with trainprof.span("data_wait", category="data_wait"):
            time.sleep(0.01)
        with trainprof.span("forward", category="forward"):
            time.sleep(0.015)
        with trainprof.span("backward", category="backward"):
            time.sleep(0.02)
trainprof.stop()
"""

# One rank of the busy node: 10 steps a second with their four parts (sleeps: the ranks' own
# CPU is the same with live rules on and off).
BUSY_RANK = """
import time, trainprof
trainprof.start(auto=False)
end = time.monotonic() + {seconds}
while time.monotonic() < end:
    with trainprof.step():
        with trainprof.span("data_wait", category="data_wait"):
            time.sleep(0.01)
        with trainprof.span("forward", category="forward"):
            time.sleep(0.03)
        with trainprof.span("backward", category="backward"):
            time.sleep(0.05)
        with trainprof.span("optimizer", category="optimizer"):
            time.sleep(0.01)
trainprof.stop()
"""

BUSY_LAUNCHER = """
import os, subprocess, sys
rank_job = {rank_job!r}
ps = [subprocess.Popen([sys.executable, "-c", rank_job],
                       env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="{ranks}"))
      for r in range({ranks})]
sys.exit(max(p.wait() for p in ps))
"""


if __name__ == "__main__":
    main()
