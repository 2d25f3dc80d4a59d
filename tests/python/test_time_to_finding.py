"""The short version of bench/time_to_finding.py (issue 19), in the test command: real PyTorch
(CPU) jobs recorded by `trainprof record --live-rules-every 1` with the default rules, each
healthy for a few seconds after its first step and then planting one problem at an onset the
job itself writes down, all recorded at once (the jobs mostly sleep):

- a host memory leak (4 MiB kept per step) -> HostMemoryGrowth;
- low GPU utilisation (the replayed GPU, tests/nvml_replay, drops to 20-40 % when the job
  creates its onset file) -> LowGPUUtilization, from its confidence bound;
- GPU memory growth (the replayed GPU's memory in use grows 0.6 % a sample) -> GPUMemoryGrowth
  or GPUMemoryIncrease;
- repeated torch.compile recompilation (a new batch size every 2 s) -> Recompilation;

each named within 60 s of its onset; a healthy job (with a replayed, healthy GPU) recorded
alongside raises no finding at all. The time of a finding is when the configured `command`
action ran (the bench's action writes its own wall clock), not anything trainprof reports about
itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import trainprof_command

ROOT = Path(__file__).resolve().parents[2]


def test_planted_problems_are_named_within_a_minute_and_a_healthy_job_raises_nothing(tmp_path):
    out = tmp_path / "ttf.json"
    env = dict(os.environ, TRAINPROF_BIN=trainprof_command()[0])
    env.pop("BENCH_RESULTS", None)  # a test reports no bench figures
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "time_to_finding.py"), "--quick",
         "--healthy-seconds", "25", "--json", str(out)],
        capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 2: a job failed
    rows = {r["problem"]: r for r in json.loads(out.read_text())}
    assert set(rows) == {"leak", "low_gpu", "gpu_memory", "recompile", "healthy"}, proc.stdout
    for name, row in rows.items():
        if name == "healthy":
            continue
        assert row["seconds"] is not None, proc.stdout
        # Not before the onset (a rule cannot see the future), within the target after it.
        assert 0 <= row["seconds"] <= 60, proc.stdout
        assert row["rule"] in row["expected"], proc.stdout
    leak = rows["leak"]
    assert "grows" in leak["message"] and "MB/s" in leak["message"], leak["message"]
    # The low GPU's evidence: the share of values at or above 70 % is bounded below 5 %, as the
    # replayed values (20-40 % after the onset) make it.
    low = rows["low_gpu"]["evidence"]
    assert low["kind"] == "underutilized" and low["busy_share_upper"] < 0.05, low
    assert 20 <= low["mean_percent"] <= 40, low
    assert rows["recompile"]["evidence"]["recompiles_in_window"] >= 3
    assert rows["healthy"]["findings"] == [], proc.stdout
    assert proc.returncode == 0, proc.stdout
