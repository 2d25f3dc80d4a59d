"""Framework adapters, each with the real library: PyTorch Lightning, Hugging Face transformers
(a tiny model built from a config, no downloads) and Keras 3 on the torch backend. Each runs in
its own process (the recorder is per process) without the startup hook: the callback starts it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from instrument_util import REPO, events_df, steps_df

import trainprof


def run_script(code: str, run_dir, timeout=600, **env_extra):
    """Runs `code` (Python source, or "examples/<file>.py": the runnable example itself) with
    the run directory as its argument."""
    env = dict(os.environ, **env_extra)
    env.pop("TRAINPROF_RUN_DIR", None)
    program = [code] if code.startswith("examples/") else ["-c", textwrap.dedent(code)]
    proc = subprocess.run([sys.executable, *program, str(run_dir)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


def _phases(run_dir):
    ev = events_df(run_dir, categories=["phase"])
    return set(ev["name"])


def test_lightning_callback_records_steps_parts_and_phases(tmp_path):
    run = tmp_path / "run"
    run_script("examples/lightning_callback.py", run)
    steps = steps_df(run)
    train = steps[steps["mode"] == "train"]
    assert len(train) == 6  # optimizer steps, each of 2 accumulated micro-batches
    assert train["forward_ns"].notna().all() and train["backward_ns"].notna().all()
    assert train["optimizer_ns"].notna().all()
    step_args = [json.loads(a) for a in events_df(run, categories=["step"])["args"] if a]
    assert all(a["micro_batches"] == 2 for a in step_args)
    assert (steps["mode"] == "eval").sum() >= 2  # validation batches
    assert {"training", "evaluation"} <= _phases(run)
    ann = {a[2]: a[3] for a in trainprof.open(str(run)).annotations()}
    assert json.loads(ann["lightning.config"])["accumulate_grad_batches"] == 2


def test_transformers_trainer_callback_with_a_tiny_model(tmp_path):
    run = tmp_path / "run"
    run_script("examples/hf_trainer_callback.py", run, timeout=900)
    steps = steps_df(run)
    train = steps[steps["mode"] == "train"]
    assert len(train) == 5
    assert train["forward_ns"].notna().all() and train["backward_ns"].notna().all()
    assert train["data_wait_ns"].notna().all()
    assert "training" in _phases(run)
    ann = {a[2]: a[3] for a in trainprof.open(str(run)).annotations()}
    assert json.loads(ann["transformers.args"])["gradient_accumulation_steps"] == 2


def test_keras3_callback_torch_backend(tmp_path):
    run = tmp_path / "run"
    run_script("examples/keras_callback.py", run, KERAS_BACKEND="torch")
    steps = steps_df(run)
    assert (steps["mode"] == "train").sum() == 8  # 2 epochs x 4 batches
    assert (steps["mode"] == "eval").sum() == 4  # 2 validations x 2 batches
    assert (steps["mode"] == "predict").sum() == 2
    assert {"training", "evaluation"} <= _phases(run)


KERAS_TF_JOB = "examples/keras_callback.py"


def test_keras3_callback_tensorflow_backend(tmp_path):
    """Keras 3 on TensorFlow 2.x (tensorflow-cpu), no PyTorch in the process."""
    run = tmp_path / "run"
    proc = run_script(KERAS_TF_JOB, run, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    assert "BACKEND tensorflow False" in proc.stdout, proc.stdout
    steps = steps_df(run)
    assert (steps["mode"] == "train").sum() == 8  # 2 epochs x 4 batches
    assert (steps["mode"] == "eval").sum() == 4
    assert (steps["duration_ns"] > 0).all()
    assert {"training", "evaluation"} <= _phases(run)
    ann = {a[2]: a[3] for a in trainprof.open(str(run)).annotations()}
    assert ann["keras.backend"] == "tensorflow"


def test_keras_tensorflow_detail_steps_store_tf_profiler_events(tmp_path):
    """--detail-steps with the TensorFlow backend: tf.profiler runs for exactly those training
    steps and its operator events are stored, each in its step."""
    run = tmp_path / "run"
    run_script(KERAS_TF_JOB, run, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2",
               TRAINPROF_DETAIL_STEPS="2-3")
    ev = events_df(run, categories=["tf_op"])
    assert len(ev) > 10, ev
    assert set(ev["step"].astype(int)) == {2, 3}
    assert (ev["mode"] == "train").all()
    # TensorFlow's own names: the step's function and the ops inside it.
    names = set(ev["name"])
    assert any("MatMul" in n or "matmul" in n.lower() for n in names) or \
        any("__inference" in n for n in names), sorted(names)[:30]
    steps = steps_df(run)
    train = steps[steps["mode"] == "train"].set_index("step")
    for n in (2, 3):
        mine = ev[ev["step"] == n]
        assert mine["start_ns"].min() >= train.loc[n, "start_ns"]
        assert mine["start_ns"].max() < train.loc[n, "start_ns"] + train.loc[n, "duration_ns"]
    ann = {a[2]: a[3] for a in trainprof.open(str(run)).annotations()}
    detail = json.loads(ann["detail.steps.2-3"])
    assert detail["profiler"] == "tf.profiler" and detail["events"] == len(ev)
