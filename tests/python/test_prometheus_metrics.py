"""What `record --prometheus` serves, scraped live from a generated job with known truth (issue
17): the exposition passes Prometheus's own `promtool check metrics` (format and naming lint),
counters are `_total` and grow between scrapes, the step figures (count, step time, data wait,
throughput) match what the job measured itself, the bytes counters accumulated from the
sampled rates agree with the kernel's own /proc/net/dev counters, and `--prometheus-names`
gives node_exporter's names."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import trainprof_command

STEPS = 40
STEP_S = 0.05
WAIT_S = 0.01

# Steps of known length, each opening with a data wait of known length; the job writes what it
# measured itself, then stays alive (so the recorder keeps serving) until told to stop.
JOB = textwrap.dedent(f"""
    import json, os, sys, time
    import trainprof
    out = sys.argv[1]
    step_s, wait_s, waits, ends = [], [], [], []
    for i in range({STEPS}):
        with trainprof.step(mode="train"):
            t0 = time.perf_counter()
            with trainprof.span("next_batch", category="data_wait"):
                w0 = time.perf_counter()
                time.sleep({WAIT_S})
                wait_s.append(time.perf_counter() - w0)
            time.sleep({STEP_S - WAIT_S})
            step_s.append(time.perf_counter() - t0)
        ends.append(time.perf_counter())
    trainprof.flush()
    with open(out + ".tmp", "w") as f:
        json.dump({{"steps": len(step_s), "step_s": step_s, "wait_s": wait_s,
                   "period_s": (ends[-1] - ends[0]) / (len(ends) - 1)}}, f)
    os.rename(out + ".tmp", out)
    deadline = time.time() + 60
    while not os.path.exists(out + ".stop") and time.time() < deadline:
        time.sleep(0.05)
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _parse(body: str) -> dict:
    """{(name, frozenset(labels)): value} from an exposition."""
    out = {}
    for line in body.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
        assert m, line
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def _types(body: str) -> dict:
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", body, re.M))


def _value(metrics: dict, name: str, **labels) -> float:
    want = set(labels.items())
    found = [v for (n, ls), v in metrics.items() if n == name and want <= set(ls)]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()


def _promtool_ok(body: str, allowed_lint: str | None = None) -> None:
    """promtool exits 0 for a valid exposition without lint remarks, 3 with remarks (e.g. a
    counter without _total), 1 for a broken format. `allowed_lint`: a regex every remark must
    match (names other exporters chose, which their own output has too)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not installed (scripts/system-packages.txt has prometheus)")
    check = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True,
                           text=True, timeout=30)
    remarks = [x for x in (check.stdout + check.stderr).splitlines() if x.strip()]
    if allowed_lint is not None and check.returncode == 3:
        assert remarks and all(re.match(allowed_lint, x) for x in remarks), remarks
        return
    assert check.returncode == 0, remarks


def _lo_bytes() -> int:
    for line in Path("/proc/net/dev").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name.strip() == "lo":
            return int(rest.split()[0])
    pytest.fail("no loopback interface in /proc/net/dev")


def _send_over_loopback(n: int) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        got = []

        def drain():
            conn, _ = server.accept()
            with conn:
                total = 0
                while True:
                    data = conn.recv(1 << 16)
                    if not data:
                        break
                    total += len(data)
                got.append(total)

        t = threading.Thread(target=drain)
        t.start()
        with socket.create_connection(server.getsockname()) as c:
            c.sendall(b"x" * n)
        t.join(timeout=30)
        assert got == [n]


def _record(tmp_path, port, names=None):
    (tmp_path / "job.py").write_text(JOB)
    truth = tmp_path / "truth.json"
    cmd = [*trainprof_command(), "record", "--out", str(tmp_path / "run"), "--interval", "100ms",
           "--no-gpu", "--prometheus", f"127.0.0.1:{port}"]
    if names:
        cmd += ["--prometheus-names", names]
    cmd += ["--", sys.executable, str(tmp_path / "job.py"), str(truth)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True), truth


def _wait_for(port, predicate, timeout=30):
    deadline = time.time() + timeout
    body = ""
    while time.time() < deadline:
        try:
            body = _scrape(port)
            if predicate(body):
                return body
        except OSError:
            pass
        time.sleep(0.1)
    pytest.fail("condition not met; last scrape:\n" + body[:3000])


def test_live_record_counters_grow_and_steps_match_the_jobs_own_timing(tmp_path):
    port = _free_port()
    proc, truth = _record(tmp_path, port)
    try:
        # First scrape while the job steps (some steps already read).
        first = _wait_for(port, lambda b: re.search(r"^trainprof_steps_total\{.*\} [1-9]", b,
                                                    re.M) is not None)
        _promtool_ok(first)
        m1 = _parse(first)
        lo0 = _lo_bytes()
        time.sleep(0.3)  # the recorder's next ticks read /proc/net/dev after lo0
        before = _parse(_scrape(port))
        sent = 5 << 20
        _send_over_loopback(sent)
        time.sleep(0.3)  # ... and again after the bytes were sent
        after_body = _scrape(port)
        lo1 = _lo_bytes()
        after = _parse(after_body)

        # Every counter is _total and none went back; ticks and the CPU seconds went up.
        types = _types(after_body)
        for name, kind in types.items():
            if kind == "counter":
                assert name.endswith("_total"), name
        assert types["trainprof_step_duration_seconds"] == "histogram"
        for key, v in before.items():
            if types.get(key[0]) == "counter" and key in after:
                assert after[key] >= v, key
        ticks = "trainprof_sampling_ticks_total"
        assert _value(after, ticks) > _value(before, ticks)
        # Per core, busy + idle + iowait seconds grow by the time between the two scrapes'
        # latest ticks (each tick's shares of a core add up to 1).
        dt = _value(after, "trainprof_last_sample_timestamp_seconds") - \
            _value(before, "trainprof_last_sample_timestamp_seconds")
        assert dt > 0.2
        grown = sum(_value(after, f"trainprof_cpu_{s}_seconds_total", device="cpu0") -
                    _value(before, f"trainprof_cpu_{s}_seconds_total", device="cpu0")
                    for s in ("busy", "idle", "iowait"))
        assert grown == pytest.approx(dt, abs=0.02)
        # Loopback bytes accumulated from the sampled rate: at least what we sent, at most what
        # the kernel counted over a wider span.
        lo = ("trainprof_network_receive_bytes_total", "lo")
        got = _value(after, lo[0], device=lo[1]) - _value(before, lo[0], device=lo[1])
        assert sent <= got <= lo1 - lo0, (sent, got, lo1 - lo0)

        # The step figures, once the job has finished and its last steps were read.
        deadline = time.time() + 30
        while not truth.exists() and time.time() < deadline:
            time.sleep(0.1)
        facts = json.loads(truth.read_text())
        final_body = _wait_for(port, lambda b: re.search(
            rf'^trainprof_steps_total\{{.*mode="train".*\}} {STEPS}$', b, re.M) is not None)
        _promtool_ok(final_body)
        final = _parse(final_body)
        assert _value(m1, "trainprof_steps_total", mode="train") <= STEPS
        count = _value(final, "trainprof_step_duration_seconds_count", mode="train")
        total = _value(final, "trainprof_step_duration_seconds_sum", mode="train")
        assert count == facts["steps"] == STEPS
        # The step span encloses the job's own measurement by a few microseconds of overhead.
        assert total == pytest.approx(sum(facts["step_s"]), abs=0.002 * STEPS)
        # Buckets: cumulative, +Inf = count, and every step (>= 50 ms, < 250 ms) between the
        # 0.05 and 0.25 bounds as the job measured them.
        inf = _value(final, "trainprof_step_duration_seconds_bucket", mode="train", le="+Inf")
        assert inf == count
        below_50ms = sum(1 for s in facts["step_s"] if s <= 0.05)
        assert _value(final, "trainprof_step_duration_seconds_bucket", mode="train",
                      le="0.25") == count
        assert _value(final, "trainprof_step_duration_seconds_bucket", mode="train",
                      le="0.025") == 0
        assert abs(_value(final, "trainprof_step_duration_seconds_bucket", mode="train",
                          le="0.05") - below_50ms) <= 2
        wait = _value(final, "trainprof_data_wait_seconds_total", mode="train")
        assert wait == pytest.approx(sum(facts["wait_s"]), abs=0.001 * STEPS)
        # Throughput over the last 10 s of steps (the whole job here) and the data-wait share.
        rate = _value(final, "trainprof_throughput_steps_per_second", mode="train")
        assert rate == pytest.approx(1 / facts["period_s"], rel=0.05)
        ratio = _value(final, "trainprof_data_wait_ratio", mode="train")
        assert ratio == pytest.approx(sum(facts["wait_s"]) / sum(facts["step_s"]), rel=0.1)
        assert not math.isnan(ratio)
    finally:
        (tmp_path / "truth.json.stop").write_text("")
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def test_node_exporter_names_for_host_series(tmp_path):
    port = _free_port()
    proc, _ = _record(tmp_path, port, names="node_exporter")
    try:
        body = _wait_for(port, lambda b: "node_cpu_seconds_total{" in b and
                         "node_network_receive_bytes_total{" in b)
        # A valid exposition; the lint's only remark is node_exporter's own camelCase meminfo
        # names (node_exporter's output gets the same).
        _promtool_ok(body, allowed_lint=r"^node_memory_Mem(Total|Available)_bytes metric names "
                                        r"should be written in 'snake_case'")
        m = _parse(body)
        meminfo = dict(line.split(":", 1) for line in
                       Path("/proc/meminfo").read_text().splitlines())
        total_kib = int(meminfo["MemTotal"].split()[0])
        assert _value(m, "node_memory_MemTotal_bytes") == total_kib * 1024
        avail = _value(m, "node_memory_MemAvailable_bytes")
        now_avail = int(meminfo["MemAvailable"].split()[0]) * 1024
        assert abs(avail - now_avail) < 0.05 * total_kib * 1024
        assert _value(m, "node_cpu_seconds_total", cpu="0", mode="idle") >= 0
        assert _value(m, "node_cpu_seconds_total", cpu="0", mode="iowait") >= 0
        assert "node_network_receive_bytes_total" in _types(body)
        # Renamed series are not served twice; what has no counterpart keeps its name.
        assert "trainprof_memory_total_bytes" not in body
        assert "trainprof_cpu_utilization_ratio{" in body
    finally:
        (tmp_path / "truth.json.stop").write_text("")
        proc.communicate(timeout=60)


def test_unknown_naming_is_refused():
    proc = subprocess.run([*trainprof_command(), "record", "--out", "/nonexistent/x",
                           "--prometheus", "0", "--prometheus-names", "datadog", "--", "true"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    assert "datadog" in proc.stderr and "node_exporter" in proc.stderr


REPLAY_LIB = Path(__file__).resolve().parents[2] / "build" / "py" / "tests" / "nvml_replay" / \
    "libnvml_replay.so"


def test_dcgm_names_for_replayed_gpus(tmp_path):
    """Two GPUs answered by the NVML replay library (tests/nvml_replay) from planted samples:
    dcgm-exporter's names carry the planted values in its units."""
    if not REPLAY_LIB.exists():
        pytest.fail(f"{REPLAY_LIB} not built (scripts/setup.sh builds it with the tests)")

    def dev(i: int, util: int) -> dict:
        return {"name": "NVIDIA A100-SXM4-80GB", "uuid": f"GPU-planted-{i}",
                "samples": [{"utilization": [util, util // 2], "memory": [40 * 2**30, 80 * 2**30],
                             "power_mw": 250000 + i, "temperature_c": 61 + i}
                            for _ in range(600)]}

    replay = tmp_path / "two.json"
    replay.write_text(json.dumps({"devices": [dev(0, 90), dev(1, 30)]}))
    port = _free_port()
    (tmp_path / "job.py").write_text(JOB)
    env = dict(os.environ, TRAINPROF_NVML_LIBRARY=str(REPLAY_LIB),
               TRAINPROF_NVML_REPLAY=str(replay))
    proc = subprocess.Popen([*trainprof_command(), "record", "--out", str(tmp_path / "run"),
                             "--interval", "100ms", "--prometheus", f"127.0.0.1:{port}",
                             "--prometheus-names", "dcgm", "--", sys.executable,
                             str(tmp_path / "job.py"), str(tmp_path / "truth.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        body = _wait_for(port, lambda b: "DCGM_FI_DEV_GPU_UTIL{" in b and "gpu=\"1\"" in b)
        # Valid; the lint's only remarks are about dcgm-exporter's own choices (its label names
        # modelName, UUID, Hostname are camelCase; its counters have no _total).
        _promtool_ok(body, allowed_lint=r"^DCGM_FI_DEV_\w+ (label names should be written in "
                                        r"'snake_case'|counter metrics should have \"_total\")")
        m = _parse(body)
        for gpu, util in (("0", 90), ("1", 30)):
            labels = {"gpu": gpu, "UUID": f"GPU-planted-{gpu}", "device": f"nvidia{gpu}",
                      "modelName": "NVIDIA A100-SXM4-80GB"}
            assert _value(m, "DCGM_FI_DEV_GPU_UTIL", **labels) == util
            assert _value(m, "DCGM_FI_DEV_MEM_COPY_UTIL", **labels) == util // 2
            assert _value(m, "DCGM_FI_DEV_FB_USED", **labels) == 40 * 1024  # MiB
            assert _value(m, "DCGM_FI_DEV_POWER_USAGE", **labels) == (250000 + int(gpu)) / 1000
            assert _value(m, "DCGM_FI_DEV_GPU_TEMP", **labels) == 61 + int(gpu)
        assert "trainprof_gpu_utilization_ratio" not in body
        # No DCGM counterpart: kept under trainprof's name.
        assert "trainprof_gpu_memory_total_bytes{" in body
    finally:
        (tmp_path / "truth.json.stop").write_text("")
        proc.communicate(timeout=60)
