"""Training health on real PyTorch (CPU) jobs under `trainprof record`: the loss passed to
backward and the gradient norm before the optimizer step, sampled by the automatic
instrumentation (the job does not import trainprof), against the truth the job writes itself
(tests/python/health_train.py: its own loss.item() and clip_grad_norm_'s return value each step),
and the rules LossNaN, LossNotDecreasing, ExplodingGradient, VanishingGradient on them.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

import trainprof
from conftest import trainprof_command

JOB = Path(__file__).resolve().parent / "health_train.py"
HEALTH_RULES = ("LossNaN", "LossNotDecreasing", "ExplodingGradient", "VanishingGradient")


def record(tmp_path: Path, mode: str, *options: str, job_args=(), timeout=180):
    run_dir, log = tmp_path / "run", tmp_path / "truth.jsonl"
    cmd = [*trainprof_command(), "record", "--out", str(run_dir), "--interval", "200ms",
           "--no-gpu", *options, "--", sys.executable, str(JOB), "--mode", mode, "--log", str(log),
           *job_args]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    truth = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return proc, run_dir, truth, time.monotonic() - t0


def as_float(v) -> float:
    return float(v)  # "nan" / "inf" strings too


def stored(run_dir: Path, name: str) -> dict[int, float]:
    """The sampled values by step, as Run.logged_metric reads them back."""
    rows = trainprof.open(str(run_dir)).logged_metric(name)
    out = {}
    for _ts, value, step in rows:
        assert step not in out, f"{name}: step {step} stored twice"
        out[step] = value
    return out


def check_against_truth(run_dir: Path, truth: list[dict], every: int, upto: int | None = None):
    """Every sampled step (multiples of `every`) holds the job's own loss and clip_grad_norm_
    value of that step; no other step is stored."""
    loss, norm = stored(run_dir, "train_loss"), stored(run_dir, "grad_norm")
    steps = [t["step"] for t in truth if t["step"] % every == 0]
    if upto is not None:
        steps = [s for s in steps if s <= upto]
    assert steps
    assert set(steps) <= set(loss) and set(steps) <= set(norm)
    assert all(s % every == 0 for s in loss) and all(s % every == 0 for s in norm)
    by_step = {t["step"]: t for t in truth}
    compared = 0
    for s in steps:
        want_loss, want_norm = as_float(by_step[s]["loss"]), as_float(by_step[s]["grad_norm"])
        if math.isfinite(want_loss):
            assert loss[s] == pytest.approx(want_loss, rel=1e-6), s
        else:
            assert not math.isfinite(loss[s]), s
        if math.isfinite(want_norm):
            assert norm[s] == pytest.approx(want_norm, rel=1e-5), s
            compared += 1
    return compared


def rules_json(run_dir: Path) -> dict:
    proc = subprocess.run([*trainprof_command(), "rules", str(run_dir), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return {r["name"]: r for r in json.loads(proc.stdout)["rules"]}


def test_nan_loss_is_named_at_its_step_live_and_the_stop_action_ends_the_job(tmp_path):
    """The learning rate blown up at step 200: the job's own log says which step first has a
    non-finite loss; sampled every step, the live LossNaN names exactly that step, and its stop
    action ends a job that would have gone on for 60 s."""
    cfg = tmp_path / "rules.json"
    cfg.write_text(json.dumps({"rules": {
        "LossNaN": {"actions": [{"type": "stop", "grace_s": 5}]}, "ExplodingGradient": {}}}))
    proc, run_dir, truth, wall = record(
        tmp_path, "nan", "--health-every", "1", "--rules-config", str(cfg),
        "--live-rules-every", "1", job_args=("--blowup-step", "200", "--seconds", "60"))
    # SIGTERM from the stop action (the job itself exits 0 after 60 s; `wall` is not asserted:
    # on a loaded machine the live engine's 10-s lag and the poll can take long)
    assert proc.returncode == 143, proc.stdout + proc.stderr
    first_bad = next(t["step"] for t in truth if not math.isfinite(as_float(t["loss"])))
    assert first_bad > 200
    findings = trainprof.open(str(run_dir)).findings()  # stored live, before the job ended
    nan = [f for f in findings if f.rule == "LossNaN"]
    assert len(nan) == 1, [f.message for f in findings]
    assert nan[0].evidence["step"] == first_bad, nan[0].message
    assert nan[0].severity == "critical"
    assert nan[0].evidence["sample_every_steps"] == 1
    assert f"at step {first_bad}" in nan[0].message
    # The gradient grew by orders of magnitude from step 201 (lr x 1e6): found there already.
    grad = [f for f in findings if f.rule == "ExplodingGradient"]
    assert len(grad) == 1 and 200 < grad[0].evidence["step"] <= first_bad, grad
    # The stored values are the job's own, step for step, up to the blow-up and beyond.
    assert check_against_truth(run_dir, truth, every=1, upto=first_bad + 5) > 200


def test_flat_loss_fires_loss_not_decreasing_with_the_default_sampling(tmp_path):
    """Learning rate 0: the loss only moves with the batch. Sampled every 10 steps (default),
    LossNotDecreasing fires once 50 samples exist; nothing else of the health rules does."""
    proc, run_dir, truth, _ = record(tmp_path, "flat", job_args=("--steps", "600"))
    assert proc.returncode == 0, proc.stderr
    assert check_against_truth(run_dir, truth, every=10) == 60
    rules = rules_json(run_dir)
    r = rules["LossNotDecreasing"]
    assert r["triggered"], r
    ev = r["findings"][0]["evidence"]
    assert ev["samples"] == 50 and ev["first_step"] % 10 == 0
    assert ev["mann_kendall"]["p_decrease"] >= 0.05
    assert abs(ev["relative_change"]) < 0.05
    # The stored window is the job's own losses.
    by_step = {t["step"]: t["loss"] for t in truth}
    for _ts, step, value in ev["points"]:
        assert value == pytest.approx(by_step[step], rel=1e-6)
    for name in ("LossNaN", "ExplodingGradient", "VanishingGradient"):
        assert not rules[name]["triggered"], rules[name]["findings"]
        assert rules[name]["datapoints"] == 60


def test_healthy_run_raises_no_health_finding(tmp_path):
    """Through torch.amp.GradScaler: the loss passed to backward is the scaled one (x 65536);
    train_loss is the job's own loss all the same."""
    proc, run_dir, truth, _ = record(tmp_path, "healthy",
                                     job_args=("--steps", "600", "--grad-scaler"))
    assert proc.returncode == 0, proc.stderr
    assert check_against_truth(run_dir, truth, every=10) == 60
    rules = rules_json(run_dir)
    for name in HEALTH_RULES:
        assert not rules[name]["triggered"], rules[name]["findings"]
        assert rules[name]["datapoints"] == 60, name
