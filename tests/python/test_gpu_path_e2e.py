"""The GPU path end to end, without a GPU: `record` and `agent --prometheus` load the NVML
replay library (tests/nvml_replay) in place of libnvidia-ml, answering from a real H200
recording or from a planted two-GPU file. What is checked comes from the replay file itself
(the k-th NVML call answers the k-th sample), not from what trainprof wrote: the stored GPU
series, a GPU rule firing on the GPU planted idle (and only it), and what Prometheus scrapes,
validated by Prometheus's own `promtool check metrics`."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

import trainprof
from conftest import REPO, trainprof_command

REPLAY_LIB = REPO / "build" / "py" / "tests" / "nvml_replay" / "libnvml_replay.so"
H200 = REPO / "tests" / "testdata" / "nvml" / "h200_real.json"

STEPPING_JOB = textwrap.dedent("""
    import sys, time
    import trainprof
    deadline = time.time() + float(sys.argv[1])
    while time.time() < deadline:
        with trainprof.step(mode="train"):
            with trainprof.span("forward", category="forward"):
                time.sleep(0.02)
""")


@pytest.fixture
def replay_env():
    if not REPLAY_LIB.exists():
        pytest.fail(f"{REPLAY_LIB} not built (scripts/setup.sh builds it with the tests)")

    def env(replay: Path) -> dict:
        e = dict(os.environ)
        e["TRAINPROF_NVML_LIBRARY"] = str(REPLAY_LIB)
        e["TRAINPROF_NVML_REPLAY"] = str(replay)
        return e

    return env


def _contiguous_in(stored: list, truth: list) -> bool:
    """Whether `stored` appears in `truth` as one contiguous run (the replay answers its
    samples in order; the collector may have made calls before the first stored sample)."""
    n = len(stored)
    return any(truth[i:i + n] == stored for i in range(len(truth) - n + 1))


def _series(run_dir: Path, metric: str) -> dict:
    df = trainprof.open(str(run_dir)).system_metrics(metrics=metric).to_pandas()
    df = df.sort_values("timestamp_ns")
    return {str(d): g["value"].tolist() for d, g in df.groupby("device", observed=True)}


def test_record_stores_the_replayed_h200_series(tmp_path, replay_env):
    """The H200's training section (its first 50 samples are the idle GPU before the job): the
    replay starts where utilisation varies, so that an order or scaling slip cannot pass."""
    recording = json.loads(H200.read_text())
    first_busy = next(i for i, s in enumerate(recording["devices"][0]["samples"])
                      if s["utilization"][0] > 0)
    recording["devices"][0]["samples"] = recording["devices"][0]["samples"][first_busy:]
    replay = tmp_path / "h200_training.json"
    replay.write_text(json.dumps(recording))
    run = tmp_path / "run"
    proc = subprocess.run([*trainprof_command(), "record", "--out", str(run), "--interval", "100ms",
                           "--", sys.executable, "-c", STEPPING_JOB, "3"],
                          env=replay_env(replay), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    samples = recording["devices"][0]["samples"]
    (info,) = trainprof.open(str(run)).node_info.values()
    assert "H200" in json.dumps(info), info

    util = _series(run, "gpu_utilization_ratio")
    assert list(util) == ["gpu0"], util.keys()
    stored = util["gpu0"]
    assert len(stored) >= 15  # ~3 s at 100 ms
    assert len(set(stored)) >= 5, stored  # the varied part of the recording
    truth = [s["utilization"][0] / 100 for s in samples]
    assert _contiguous_in(stored, truth), stored[:20]

    power = _series(run, "gpu_power_watts")["gpu0"]
    assert _contiguous_in(power, [s["power_mw"] / 1000 for s in samples]), power[:10]
    temp = _series(run, "gpu_temperature_celsius")["gpu0"]
    assert _contiguous_in(temp, [float(s["temperature_c"]) for s in samples]), temp[:10]


def _planted_two_gpus(path: Path, samples: int = 400) -> Path:
    """GPU 0 busy (90 %), GPU 1 idle (0 %) for the whole run, 80 GB each."""
    total = 80 * 2**30

    def dev(i: int, util: int) -> dict:
        return {"name": "NVIDIA A100-SXM4-80GB", "uuid": f"GPU-planted-{i}",
                "samples": [{"utilization": [util, util // 2],
                             "memory": [(40 if util else 1) * 2**30, total],
                             "power_mw": 300000 if util else 60000, "temperature_c": 60}
                            for _ in range(samples)]}

    path.write_text(json.dumps({"devices": [dev(0, 90), dev(1, 0)]}))
    return path


def test_a_gpu_rule_fires_on_the_gpu_planted_idle_and_only_on_it(tmp_path, replay_env):
    run = tmp_path / "run"
    replay = _planted_two_gpus(tmp_path / "two.json")
    cfg = tmp_path / "rules.json"
    # Judged from the first step (settle_s 0); under-used once 52 values below 70 % bound the
    # share at or above it under 5 % (5.2 s at 100 ms): an 8-s job.
    cfg.write_text(json.dumps({"rules": {"LowGPUUtilization": {
        "parameters": {"settle_s": 0, "min_window_s": 2}}}}))
    proc = subprocess.run([*trainprof_command(), "record", "--out", str(run), "--interval", "100ms",
                           "--rules-config", str(cfg), "--", sys.executable, "-c", STEPPING_JOB,
                           "8"],
                          env=replay_env(replay), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    util = _series(run, "gpu_utilization_ratio")
    assert set(util) == {"gpu0", "gpu1"}
    assert set(util["gpu0"]) == {0.9} and set(util["gpu1"]) == {0.0}

    rules = subprocess.run([*trainprof_command(), "rules", str(run), "--config", str(cfg),
                            "--json"], capture_output=True, text=True, timeout=120)
    assert rules.returncode == 0, rules.stderr
    (entry,) = [r for r in json.loads(rules.stdout)["rules"] if r["name"] == "LowGPUUtilization"]
    assert entry["datapoints"] >= 2 * 20, entry  # both GPUs' samples were read
    assert entry["triggered"], entry
    assert {f["device"] for f in entry["findings"]} == {"gpu1"}, entry["findings"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_agent_prometheus_endpoint_serves_the_replayed_gpus_and_promtool_accepts_it(
        tmp_path, replay_env):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not installed (scripts/system-packages.txt has prometheus)")
    replay = _planted_two_gpus(tmp_path / "two.json")
    port = _free_port()
    agent = subprocess.Popen([*trainprof_command(), "agent", "--out", str(tmp_path / "run"),
                              "--interval", "100ms", "--duration", "30",
                              "--prometheus", f"127.0.0.1:{port}"],
                             env=replay_env(replay), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        body = ""
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    body = r.read().decode()
                if "gpu_utilization_ratio" in body:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        assert "gpu_utilization_ratio" in body, body[:2000]
        check = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True,
                               text=True, timeout=30)
        # promtool exits 0 for a valid exposition; lint remarks (naming advice) are on stdout
        # with exit 1 only for errors of format.
        assert check.returncode == 0, check.stdout + check.stderr

        values = {}
        for line in body.splitlines():
            if line.startswith("trainprof_gpu_utilization_ratio{") or \
                    line.startswith("gpu_utilization_ratio{"):
                labels, value = line.rsplit(" ", 1)
                values[labels] = float(value)
        by_gpu = {("gpu0" if 'device="gpu0"' in k else "gpu1" if 'device="gpu1"' in k else k): v
                  for k, v in values.items()}
        assert by_gpu == {"gpu0": 0.9, "gpu1": 0.0}, values
    finally:
        agent.terminate()
        agent.communicate(timeout=60)
