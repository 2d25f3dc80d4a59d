#!/usr/bin/env python3
"""Dashboard load (issue 18): 50 concurrent clients watch a live run through `record --serve`
while a real training job trains; the job must not slow down and the API must stay quick.

Each client behaves like a browser on the nodes page (src/serve/assets/app.js): it holds the
run's live stream open (GET /api/runs/<id>/stream, server-sent events) and, at each update (at
most one a second when it has no stream), fetches what the page fetches: the run
(/api/runs/<id>) and the eight node charts (/api/runs/<id>/metric?metric=...&points=900), one
request after the other over a keep-alive connection, at most once a second (as the page). The
bodies are read, not parsed (the clients' own CPU is kept small).

Measured fairly on a small shared machine:
- A/B inside one job: the job (bench/serve_load_job.py: a torch loop with steps of a few ms,
  one thread) trains under `trainprof record --serve` while the clients are switched on and off
  in alternating windows of --window-s (pairs ordered off-on, on-off, ... so that a drift of the
  machine's load cancels), --clients-s seconds of clients in all per repeat. The first 0.5 s of
  each window (clients connecting or leaving) is left out. Each pair gives the ratio of the
  median step time with clients to the one without; the change is the median of those ratios
  minus 1, with a 95 % bootstrap confidence interval over the pairs. Repeats of separate jobs
  (the old method) differed by up to 75 % on the shared VM; windows of one job share its warm
  caches and most of the machine's background.
- Cores: with 2 or more usable cores the job runs on one core (taskset) and the recorder with
  its server and these clients on the others, so the figure is what the server's work costs the
  job through shared caches, memory and the kernel, not through waiting for a CPU that a
  2-core VM has too few of (say --no-pin to share all cores, as a small VM without pinning does).
- Server CPU: the recorder's CPU time (which includes the dashboard server) in the windows with
  and without clients, per API request answered.

The verdict: met when the upper end of the interval is <= 2 %, NOT met when its lower end is
above 2 %, and "NOT met (inconclusive)" otherwise; the API's p99 against 100 ms.

    bench/serve_load.py [--clients 50] [--clients-s 30] [--window-s 5] [--repeats 1] [--no-pin]

Under bench/run_all.sh (section serve) the figures go to its results file
(serve.step_time_change_pct, serve.api_p99_ms, serve.api_requests_per_s).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "lib"))
import results  # noqa: E402 - bench/lib/results.py: the figures for bench/out/results.json

TARGET_CHANGE = 0.02
TARGET_P99_S = 0.100
NODE_METRICS = ["cpu_utilization_ratio", "gpu_utilization_ratio", "gpu_memory_used_ratio",
                "memory_used_bytes", "network_receive_bytes_per_second",
                "network_transmit_bytes_per_second", "disk_read_bytes_per_second",
                "disk_write_bytes_per_second"]
WARMUP_S = 6  # after the first step, before the clients start


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Client(threading.Thread):
    def __init__(self, port: int, run_id: str, until: float, latencies: list, errors: list):
        super().__init__(daemon=True)
        self.port, self.run_id, self.until = port, run_id, until
        self.latencies, self.errors = latencies, errors
        self.update = threading.Event()
        self.streaming = False
        self.stream_conn = None
        cat = "cpu_utilization_ratio"
        self.paths = [f"/api/runs/{run_id}"] + [
            f"/api/runs/{run_id}/metric?metric={m}&points=900" + ("&device=total" if m == cat else "")
            for m in NODE_METRICS]

    def stream(self) -> None:
        try:
            c = self.stream_conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15)
            c.request("GET", f"/api/runs/{self.run_id}/stream")
            r = c.getresponse()
            if r.status != 200:
                self.errors.append(f"stream: {r.status}")
                return
            self.streaming = True
            while time.time() < self.until:
                line = r.fp.readline()
                if not line:
                    break
                if line.startswith(b"event: update"):
                    self.update.set()
            c.close()
        except OSError as e:
            if time.time() < self.until:
                self.errors.append(f"stream: {e}")
        finally:
            self.streaming = False

    def run(self) -> None:
        streamer = threading.Thread(target=self.stream, daemon=True)
        streamer.start()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15)
        while time.time() < self.until:
            started = time.time()
            for path in self.paths:
                t0 = time.perf_counter()
                try:
                    conn.request("GET", path)
                    r = conn.getresponse()
                    r.read()
                    if r.status != 200:
                        self.errors.append(f"{path}: {r.status}")
                    if r.getheader("Connection", "").lower() == "close":
                        conn.close()
                except (OSError, http.client.HTTPException) as e:
                    self.errors.append(f"{path}: {e}")
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15)
                    continue
                self.latencies.append(time.perf_counter() - t0)
            # The page refetches at the stream's next update, at most once a second.
            time.sleep(max(0.0, started + 1.0 - time.time()))
            self.update.wait(timeout=1.0)
            self.update.clear()
        conn.close()
        # The page is closed: its stream too (else it would count against the server's bound on
        # live streams until the server's next write finds it gone).
        if self.stream_conn is not None and self.stream_conn.sock is not None:
            try:
                self.stream_conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        streamer.join(timeout=5)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (its threads included), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def get_json(port: int, path: str):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    c.request("GET", path)
    body = c.getresponse().read()
    c.close()
    return json.loads(body)


def one_job(exe: str, python: str, clients: int, clients_s: float, window_s: float,
            pin: tuple[list[int], list[int]] | None) -> dict:
    """One job under record --serve, clients on and off in alternating windows."""
    pairs = max(1, round(clients_s / window_s))
    order = []
    for k in range(pairs):  # off-on, on-off, off-on, ...: a linear drift cancels
        order += [False, True] if k % 2 == 0 else [True, False]
    # The job ends when told (a stop file), with a generous limit: on a loaded machine torch's
    # import alone can take most of a minute.
    seconds = WARMUP_S + len(order) * window_s + 300
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        steps = Path(tmp) / "steps.json"
        stop = Path(tmp) / "stop"
        job_cmd = [python, str(ROOT / "bench" / "serve_load_job.py"), "--seconds", str(seconds),
                   "--out", str(steps), "--stop-file", str(stop)]
        cmd = [exe, "record", "--out", f"{tmp}/run", "--no-gpu", "--serve", f"127.0.0.1:{port}",
               "--"]
        if pin:
            job_cores, other_cores = pin
            cmd = (["taskset", "-c", ",".join(map(str, other_cores))] + cmd +
                   ["taskset", "-c", ",".join(map(str, job_cores))])
        job = subprocess.Popen(cmd + job_cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
        latencies: list[float] = []
        errors: list[str] = []
        windows = []  # (with_clients, t_start, t_end, recorder cpu s, requests)
        try:
            run_id = None
            deadline = time.time() + 120
            while run_id is None and time.time() < deadline and job.poll() is None:
                try:
                    rows = get_json(port, "/api/runs")["runs"]
                    run_id = rows[0]["id"] if rows else None
                except (OSError, ValueError):
                    pass
                time.sleep(0.3)
            if run_id is None:
                raise RuntimeError("the run was not served: " + (job.stderr.read() if job.poll() is not None else "timeout"))
            while time.time() < deadline and job.poll() is None:  # torch imported, training
                if get_json(port, f"/api/runs/{run_id}/steps?points=2").get("steps", 0) > 0:
                    break
                time.sleep(0.3)
            time.sleep(WARMUP_S)
            for with_clients in order:
                t0 = time.time()
                until = t0 + window_s
                cpu0, n0 = cpu_seconds(job.pid), len(latencies)
                if with_clients:
                    pool = [Client(port, run_id, until, latencies, errors) for _ in range(clients)]
                    for c in pool:
                        c.start()
                time.sleep(max(0.0, until - time.time()))
                if with_clients:
                    for c in pool:
                        c.join(timeout=20)
                windows.append((with_clients, t0, until, cpu_seconds(job.pid) - cpu0,
                                len(latencies) - n0))
        finally:
            stop.touch()
            _, err = job.communicate(timeout=600)
        if job.returncode != 0:
            raise RuntimeError(f"record exited {job.returncode}: {err[-2000:]}")
        d = json.loads(steps.read_text())
    return {"start_s": d["start_s"], "duration_s": d["duration_s"], "windows": windows,
            "latencies": latencies, "errors": errors}


def median_in(job: dict, lo: float, hi: float) -> float:
    xs = [d for s, d in zip(job["start_s"], job["duration_s"]) if lo <= s < hi]
    if len(xs) < 20:
        raise RuntimeError(f"only {len(xs)} steps in a window")
    return statistics.median(xs)


def bootstrap_ci(xs: list[float], n: int = 4000, seed: int = 1) -> tuple[float, float]:
    """95 % interval of the median of xs, resampling xs with replacement."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--clients-s", type=float, default=30, help="seconds of clients per repeat")
    p.add_argument("--window-s", type=float, default=5)
    p.add_argument("--repeats", type=int, default=1, help="jobs, each with --clients-s of clients")
    p.add_argument("--no-pin", action="store_true", help="do not pin the job to its own core")
    p.add_argument("--trainprof", default=None, help="the trainprof executable")
    p.add_argument("--python", default=sys.executable, help="the job's interpreter")
    a = p.parse_args()
    exe = a.trainprof
    if exe is None:  # the executable the installed package ships (found without importing it)
        import importlib.util

        spec = importlib.util.find_spec("trainprof")
        if spec is None or spec.origin is None:
            print("error: trainprof is not installed (give --trainprof)", file=sys.stderr)
            return 1
        exe = str(Path(spec.origin).parent / "bin" / "trainprof")
    cores = sorted(os.sched_getaffinity(0))
    pin = None
    if not a.no_pin and len(cores) >= 2 and shutil.which("taskset"):
        pin = ([cores[-1]], cores[:-1])
        os.sched_setaffinity(0, pin[1])  # these clients beside the server, off the job's core
    where = (f"job on core {pin[0][0]}, recorder + server + clients on {','.join(map(str, pin[1]))}"
             if pin else f"job, server and clients sharing {len(cores)} cores")
    print(f"serve load: {os.uname().nodename}, {os.cpu_count()} cores ({where}), load average "
          f"{os.getloadavg()[0]:.1f}")
    ratios, lat, errs, on_s = [], [], [], 0.0
    cpu_on = cpu_off = 0.0
    requests_on = 0
    for i in range(a.repeats):
        job = one_job(exe, a.python, a.clients, a.clients_s, a.window_s, pin)
        w = job["windows"]
        for k in range(0, len(w) - 1, 2):
            meds = {}
            for with_clients, lo, hi, cpu, n in w[k:k + 2]:
                meds[with_clients] = median_in(job, lo + 0.5, hi)
                if with_clients:
                    cpu_on += cpu
                    requests_on += n
                    on_s += hi - lo
                else:
                    cpu_off += cpu
            ratios.append(meds[True] / meds[False])
            print(f"  repeat {i + 1} pair {k // 2 + 1}: median step {meds[False] * 1e3:.3f} ms without "
                  f"clients, {meds[True] * 1e3:.3f} ms with ({(ratios[-1] - 1) * 100:+.1f} %)")
        lat += job["latencies"]
        errs += job["errors"]
    lat.sort()
    if not lat:
        print("error: no API request answered", file=sys.stderr)
        return 1
    change = statistics.median(ratios) - 1
    lo, hi = (x - 1 for x in bootstrap_ci(ratios)) if len(ratios) >= 3 else (min(ratios) - 1, max(ratios) - 1)
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    p50 = lat[len(lat) // 2]
    results.add("serve.step_time_change_pct", change * 100)
    results.add("serve.api_p99_ms", p99 * 1e3)
    results.add("serve.api_requests_per_s", len(lat) / on_s)
    print(f"serve: {a.clients} clients, {on_s:.0f} s in {len(ratios)} windows of {a.window_s:.0f} s "
          f"interleaved with as many without; {len(lat)} API requests ({len(lat) / on_s:.0f}/s), "
          f"{len(errs)} errors" + (f" (first: {errs[0]})" if errs else ""))
    off_s = on_s  # as many windows without clients, of the same length
    print(f"recorder + server CPU: {cpu_on / on_s * 100:.1f} % of a core with clients, "
          f"{cpu_off / off_s * 100:.1f} % without: "
          f"{(cpu_on - cpu_off) / max(1, requests_on) * 1e3:.2f} ms per API request")
    verdict = ("met" if hi <= TARGET_CHANGE else "NOT met" if lo > TARGET_CHANGE
               else "NOT met (inconclusive: the interval straddles the target)")
    print(f"median step-time change with clients: {change * 100:+.2f} % (95 % CI {lo * 100:+.2f} .. "
          f"{hi * 100:+.2f} % over {len(ratios)} pairs; target <= {TARGET_CHANGE * 100:.0f} %): {verdict}")
    print(f"API latency: p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms (target <= "
          f"{TARGET_P99_S * 1e3:.0f} ms): {'met' if p99 <= TARGET_P99_S else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
