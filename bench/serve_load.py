#!/usr/bin/env python3
"""Dashboard load (issue 18): 50 concurrent clients watch a live run through `record --serve`
while a real training job trains; the job must not slow down and the API must stay quick.

Each client behaves like a browser on the nodes page (src/serve/assets/app.js): it holds the
run's live stream open (GET /api/runs/<id>/stream, server-sent events) and, at each update (at
most one a second when it has no stream), fetches what the page fetches: the run
(/api/runs/<id>) and the eight node charts (/api/runs/<id>/metric?metric=...&points=900), one
request after the other over a keep-alive connection, at most once a second (as the page). The bodies are read, not parsed (the
clients' own CPU is kept small: they share the machine with the job).

The job (bench/serve_load_job.py: a torch loop with steps of a few ms) runs under
`trainprof record --serve` twice per repeat: once with no client, once with the 50 clients for
--clients-s seconds; it writes the wall-clock start and duration of every step. The figure is
the median step time of the steps inside the clients' window (the same window, relative to the
job's first step, without clients), best of --repeats for each: the change must be <= 2 %, and
the p99 latency of the API requests (the stream excluded) <= 100 ms.

    bench/serve_load.py [--clients 50] [--clients-s 30] [--repeats 3] [--trainprof PATH]

Under bench/run_all.sh (section serve) the figures go to its results file
(serve.step_time_change_pct, serve.api_p99_ms, serve.api_requests_per_s).
"""

from __future__ import annotations

import argparse
import http.client
import json
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
        cat = "cpu_utilization_ratio"
        self.paths = [f"/api/runs/{run_id}"] + [
            f"/api/runs/{run_id}/metric?metric={m}&points=900" + ("&device=total" if m == cat else "")
            for m in NODE_METRICS]

    def stream(self) -> None:
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=15)
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
        threading.Thread(target=self.stream, daemon=True).start()
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


def one_job(exe: str, python: str, seconds: float, clients: int, clients_s: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        steps = Path(tmp) / "steps.json"
        cmd = [exe, "record", "--out", f"{tmp}/run", "--no-gpu", "--serve", f"127.0.0.1:{port}",
               "--", python, str(ROOT / "bench" / "serve_load_job.py"), "--seconds",
               str(seconds), "--out", str(steps)]
        job = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        latencies: list[float] = []
        errors: list[str] = []
        window = None
        try:
            run_id = None
            deadline = time.time() + 120
            while run_id is None and time.time() < deadline and job.poll() is None:
                try:
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                    c.request("GET", "/api/runs")
                    rows = json.loads(c.getresponse().read())["runs"]
                    c.close()
                    run_id = rows[0]["id"] if rows else None
                except (OSError, ValueError):
                    pass
                time.sleep(0.3)
            if run_id is None:
                raise RuntimeError("the run was not served: " + (job.stderr.read() if job.poll() is not None else "timeout"))
            # Wait for the first steps (torch imported, training).
            while time.time() < deadline and job.poll() is None:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", f"/api/runs/{run_id}/steps?points=2")
                st = json.loads(c.getresponse().read())
                c.close()
                if st.get("steps", 0) > 0:
                    break
                time.sleep(0.3)
            time.sleep(WARMUP_S)
            t0 = time.time()
            until = t0 + clients_s
            pool = [Client(port, run_id, until, latencies, errors) for _ in range(clients)]
            for c in pool:
                c.start()
            time.sleep(max(0.0, until - time.time()))
            for c in pool:
                c.join(timeout=20)
            window = (t0, until)
            streams = sum(1 for c in pool if c.streaming)
        finally:
            _, err = job.communicate(timeout=300)
        if job.returncode != 0:
            raise RuntimeError(f"record exited {job.returncode}: {err[-2000:]}")
        d = json.loads(steps.read_text())
    return {"start_s": d["start_s"], "duration_s": d["duration_s"], "window": window,
            "latencies": latencies, "errors": errors}


def median_in(job: dict, lo: float, hi: float) -> float:
    xs = [d for s, d in zip(job["start_s"], job["duration_s"]) if lo <= s < hi]
    if len(xs) < 20:
        raise RuntimeError(f"only {len(xs)} steps in the window")
    return statistics.median(xs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--clients-s", type=float, default=30)
    p.add_argument("--repeats", type=int, default=3)
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
    # The job trains for the warm-up, the clients' window and a margin (its first step seen
    # through the API), after torch's import.
    seconds = WARMUP_S + a.clients_s + 10
    bare, loaded, lat, errs, total_s = [], [], [], [], 0.0
    for i in range(a.repeats):
        for with_clients in ((False, True) if i % 2 == 0 else (True, False)):  # either first
            job = one_job(exe, a.python, seconds, a.clients if with_clients else 0, a.clients_s)
            first = job["start_s"][0]
            lo, hi = job["window"]
            # The window relative to the first step: the same part of the job in both runs.
            med = median_in(job, lo, hi)
            (loaded if with_clients else bare).append(med)
            if with_clients:
                lat += job["latencies"]
                errs += job["errors"]
                total_s += hi - lo
            print(f"  repeat {i + 1}: {'50 clients' if with_clients else 'no client '}"
                  .replace("50", str(a.clients)) +
                  f" median step {med * 1e3:.3f} ms ({lo - first:.1f}-{hi - first:.1f} s after the first step)"
                  + (f", {len(job['latencies'])} API requests, {len(job['errors'])} errors" if with_clients else ""))
    best_bare, best_loaded = min(bare), min(loaded)
    change = best_loaded / best_bare - 1
    lat.sort()
    if not lat:
        print("error: no API request answered", file=sys.stderr)
        return 1
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    p50 = lat[len(lat) // 2]
    results.add("serve.step_time_change_pct", change * 100)
    results.add("serve.api_p99_ms", p99 * 1e3)
    results.add("serve.api_requests_per_s", len(lat) / total_s)
    print(f"serve: {a.clients} clients for {a.clients_s:.0f} s, {a.repeats} repeats; "
          f"{len(lat)} API requests ({len(lat) / total_s:.0f}/s), {len(errs)} errors"
          + (f" (first: {errs[0]})" if errs else ""))
    print(f"median step time: {best_bare * 1e3:.3f} ms without clients, {best_loaded * 1e3:.3f} ms "
          f"with (best of {a.repeats}): change {change * 100:+.2f} % (target <= "
          f"{TARGET_CHANGE * 100:.0f} %): {'met' if change <= TARGET_CHANGE else 'NOT met'}")
    spread = (max(bare) - min(bare)) / min(bare)
    if a.repeats > 1 and spread > TARGET_CHANGE:
        print(f"  (not conclusive on this machine: the repeats without clients alone differ by "
              f"{spread * 100:.0f} %, more than the {TARGET_CHANGE * 100:.0f} % target; other load "
              "dominates, run it on a quiet machine)")
    print(f"API latency: p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms (target <= "
          f"{TARGET_P99_S * 1e3:.0f} ms): {'met' if p99 <= TARGET_P99_S else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
