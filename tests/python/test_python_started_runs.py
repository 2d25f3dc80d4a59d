"""Runs started from Python (trainprof.start() without `trainprof record`: notebooks, the
Lightning / Hugging Face / Keras callbacks) are complete: run.json has the script's name, its
command line, and its end time and exit status however the process ends; the node's system
metrics are sampled in the process (checked against psutil's view of the same machine) or a
warning says why not."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import trainprof

psutil = pytest.importorskip("psutil")

SCRIPT = textwrap.dedent("""
    import sys, time
    import trainprof
    run = trainprof.start(out=sys.argv[1], gpus=False, system_interval_s=0.1)
    assert run, "recording did not start"
    how = sys.argv[2]
    t_end = time.time() + 1.5
    while time.time() < t_end:
        with trainprof.step(mode="train"):
            sum(i * i for i in range(20000))
    if how == "exit3":
        sys.exit(3)
    if how == "raise":
        raise ValueError("planted")
    if how == "sigterm":
        open(sys.argv[1] + ".ready", "w").close()
        time.sleep(60)
""")


def _run(tmp_path, how):
    script = tmp_path / "train_here.py"
    script.write_text(SCRIPT)
    out = tmp_path / "run"
    return script, out, subprocess.Popen([sys.executable, str(script), str(out), how],
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("how,status", [("normal", 0), ("exit3", 3), ("raise", 1),
                                        ("sigterm", 128 + signal.SIGTERM)])
def test_run_json_is_closed_with_the_processs_end_and_status(tmp_path, how, status):
    script, out, proc = _run(tmp_path, how)
    if how == "sigterm":
        deadline = time.time() + 60
        while not os.path.exists(str(out) + ".ready"):
            assert proc.poll() is None and time.time() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    expected_rc = -signal.SIGTERM if how == "sigterm" else status
    assert proc.returncode == expected_rc, err
    meta = json.loads((out / "run.json").read_text())
    assert meta["name"] == "train_here"
    assert meta["command"][1:] == [str(script), str(out), how]
    assert meta["exit_status"] == status
    assert meta["end_ns"] and meta["end_ns"] > meta["start_ns"]
    run = trainprof.open(str(out))
    assert len(run.steps()) > 0


def test_system_metrics_sampled_in_process_agree_with_psutil(tmp_path):
    _, out, proc = _run(tmp_path, "normal")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    run = trainprof.open(str(out))
    mem_total = run.system_metrics(metrics="memory_total_bytes").to_pandas()
    assert len(mem_total) >= 5  # ~1.5 s at 100 ms
    assert set(mem_total["value"]) == {float(psutil.virtual_memory().total)}
    cpu = run.system_metrics(metrics="cpu_utilization_ratio").to_pandas()
    assert set(cpu["device"]) == {"total"} | {f"cpu{i}" for i in range(psutil.cpu_count())}
    # the process tree sampled is this job's: its RSS is what the job held (a Python process
    # of tens of MB, not the whole machine)
    rss = run.system_metrics(metrics="process_resident_memory_bytes").to_pandas()
    assert len(rss) > 0 and 5e6 < rss["value"].max() < 2e9


def test_system_metrics_off_says_so(tmp_path):
    out = tmp_path / "run"
    code = ("import sys, trainprof; trainprof.start(out=sys.argv[1], system_metrics=False); "
            "import time; time.sleep(0.3)")
    proc = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    run = trainprof.open(str(out))
    assert run.metrics() == []
    notes = {a[2]: a[3] for a in run.annotations()}
    assert "off" in notes["system_metrics"]
    assert json.loads((out / "run.json").read_text())["name"] == "python"
