"""A detail range (operators or Python functions) still open when the job ends is closed and
stored, whatever the ending: the training loop finishing before the range's last step, a time
window outlasting the job, an exception, SIGTERM. The job's own exit status is kept. (Before
this, an open torch.profiler at interpreter exit killed the job with SIGSEGV, status 139, and
nothing of the detail was stored.)"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time

import pytest

torch = pytest.importorskip("torch")  # installed by scripts/setup.sh

import trainprof  # noqa: E402
from instrument_util import REPO, events_df, hooked_env, run_hooked  # noqa: E402

JOB = textwrap.dedent("""
    import os, pathlib, sys, time, torch
    from torch import nn
    steps, fail_at, ready_at = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    here = pathlib.Path(sys.argv[4])
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,))
    for i in range(steps):
        if i == fail_at:
            raise RuntimeError("planted failure")
        if i == ready_at:
            (here / "ready").write_text("1")
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        time.sleep(0.01)
""")


def _job(tmp_path, steps, fail_at=-1, ready_at=-1):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    return [str(script), str(steps), str(fail_at), str(ready_at), str(tmp_path)]


def _detail_annotations(run):
    return {a[2]: json.loads(a[3]) for a in trainprof.open(str(run)).annotations()
            if a[2].startswith("detail.")}


def _train_steps(run):
    s = trainprof.open(str(run)).steps().to_pandas()
    return sorted(s[s["mode"] == "train"]["step"].tolist())


def _check_ops_stored(run, lo, hi, python_too=True):
    """Operator events (and Python functions) stored for steps lo..hi, and an annotation that
    names the steps actually profiled and why the range ended."""
    ann = _detail_annotations(run)
    ops = events_df(run, categories=["cpu_op"])
    assert len(ops) > 20, ann
    assert set(ops["step"]) == set(range(lo, hi + 1)), sorted(set(ops["step"]))
    info = ann[f"detail.steps.{lo}-{hi}"]
    assert info["events"] >= len(ops)  # cpu_op and the other profiler categories
    if python_too:
        funcs = events_df(run, categories=["python_function"])
        assert len(funcs) > 5
        assert f"detail.python.{lo}-{hi}" in ann
    return info


def test_step_range_past_the_last_step_is_closed_and_stored(tmp_path):
    run = tmp_path / "run"
    proc = run_hooked(_job(tmp_path, 6), run, TRAINPROF_DETAIL_STEPS="3-40",
                      TRAINPROF_PYTHON_PROFILE="3-40")
    assert proc.returncode == 0
    assert _train_steps(run) == list(range(6))
    info = _check_ops_stored(run, 3, 5)
    assert info["requested"] == "3-40" and info["ended_by"] == "exit"


def test_time_window_outlasting_the_job_is_closed_and_stored(tmp_path):
    run = tmp_path / "run"
    now = time.time_ns()
    window = f"{now}-{now + 3600 * 10**9}"  # open from the start, closes in an hour
    proc = run_hooked(_job(tmp_path, 5), run, TRAINPROF_DETAIL_TIME=window,
                      TRAINPROF_PYTHON_PROFILE_TIME=window)
    assert proc.returncode == 0
    info = _check_ops_stored(run, 0, 4)
    assert info["ended_by"] == "exit" and info["window_ns"] == [now, now + 3600 * 10**9]


def test_exception_inside_the_range_keeps_the_jobs_status_and_the_detail(tmp_path):
    run = tmp_path / "run"
    proc = run_hooked(_job(tmp_path, 10, fail_at=6), run, check=False,
                      TRAINPROF_DETAIL_STEPS="3-8", TRAINPROF_PYTHON_PROFILE="3-8")
    assert proc.returncode == 1, proc.stderr  # the uncaught exception's status, not 139
    assert "planted failure" in proc.stderr and "Segmentation" not in proc.stderr
    info = _check_ops_stored(run, 3, 5)
    assert info["ended_by"] == "exception"


def test_sigterm_inside_the_range_stores_the_detail_and_still_dies_of_sigterm(tmp_path):
    run = tmp_path / "run"
    job = subprocess.Popen([sys.executable, *_job(tmp_path, 100000, ready_at=5)],
                           env=hooked_env(run, TRAINPROF_DETAIL_STEPS="2-100000",
                                          TRAINPROF_PYTHON_PROFILE="2-100000"),
                           cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (tmp_path / "ready").exists():
        assert job.poll() is None and time.time() < deadline, job.communicate()
        time.sleep(0.05)
    job.send_signal(signal.SIGTERM)
    _, err = job.communicate(timeout=120)
    assert job.returncode == -signal.SIGTERM, (job.returncode, err)  # as without trainprof
    ann = _detail_annotations(run)
    (key, info), = [(k, v) for k, v in ann.items() if k.startswith("detail.steps.")]
    lo, hi = (int(x) for x in key.rsplit(".", 1)[1].split("-"))
    assert lo == 2 and hi >= 4 and info["ended_by"] == "SIGTERM"
    ops = events_df(run, categories=["cpu_op"])
    assert len(ops) > 20 and set(ops["step"]) <= set(range(lo, hi + 1))
    assert any(k.startswith("detail.python.") for k in ann)


def test_a_job_that_handles_sigterm_itself_keeps_its_handler(tmp_path):
    """trainprof's SIGTERM handling only stands in for the default action: a job's own handler
    (here: finish the step, exit 0) is left alone, and the range is closed at its exit."""
    run = tmp_path / "run"
    script = tmp_path / "graceful.py"
    script.write_text(textwrap.dedent("""
        import pathlib, signal, sys, time, torch
        from torch import nn
        here = pathlib.Path(sys.argv[1])
        stop = []
        signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
        model = nn.Linear(16, 4)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        i = 0
        while not stop:
            opt.zero_grad()
            model(torch.randn(8, 16)).sum().backward()
            opt.step()
            time.sleep(0.01)
            i += 1
            if i == 5:
                (here / "ready").write_text("1")
        print("graceful", i)
    """))
    job = subprocess.Popen([sys.executable, str(script), str(tmp_path)],
                           env=hooked_env(run, TRAINPROF_DETAIL_STEPS="2-100000"), cwd=REPO,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while not (tmp_path / "ready").exists():
        assert job.poll() is None and time.time() < deadline, job.communicate()
        time.sleep(0.05)
    job.send_signal(signal.SIGTERM)
    out, err = job.communicate(timeout=120)
    assert job.returncode == 0 and "graceful" in out, err
    (info,) = [v for k, v in _detail_annotations(run).items() if k.startswith("detail.steps.")]
    assert info["ended_by"] == "exit" and info["events"] > 0
