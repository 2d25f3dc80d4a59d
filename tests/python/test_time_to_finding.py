"""The short version of bench/time_to_finding.py (issue 19), in the test command: a real
PyTorch (CPU) job that starts keeping 4 MiB per step a few seconds into training, recorded by
`trainprof record --live-rules-every 1` with the default rules, is named by HostMemoryGrowth
within 60 s of the onset the job itself wrote down; a healthy job recorded alongside raises no
finding at all. The time of the finding is when the configured `command` action ran (the
bench's action writes its own wall clock), not anything trainprof reports about itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import trainprof_command

ROOT = Path(__file__).resolve().parents[2]


def test_a_memory_leak_is_named_within_a_minute_and_a_healthy_job_raises_nothing(tmp_path):
    out = tmp_path / "ttf.json"
    env = dict(os.environ, TRAINPROF_BIN=trainprof_command()[0])
    env.pop("BENCH_RESULTS", None)  # a test reports no bench figures
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "time_to_finding.py"), "--quick",
         "--healthy-seconds", "25", "--json", str(out)],
        capture_output=True, text=True, timeout=170, env=env)
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 2: a job failed
    rows = {r["problem"]: r for r in json.loads(out.read_text())}
    leak, healthy = rows["leak"], rows["healthy"]
    assert leak["seconds"] is not None, proc.stdout
    # Not before the onset (the rule cannot see the future), within the target after it.
    assert 0 <= leak["seconds"] <= 60, proc.stdout
    assert "HostMemoryGrowth" in leak["expected"]
    assert "grows" in leak["message"] and "MB/s" in leak["message"], leak["message"]
    assert healthy["findings"] == [], proc.stdout
    assert proc.returncode == 0, proc.stdout
