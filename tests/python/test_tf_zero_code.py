"""Zero-code-change TensorFlow instrumentation (tensorflow-cpu, Keras 3 on the TensorFlow
backend): one unmodified script under `trainprof record` runs Keras `fit` (with validation), a
custom tf.function/GradientTape loop over a paced tf.data pipeline (with an evaluation function
between epochs), an eager loop, and at last a failure inside trainprof's hooks. The script counts
and times everything itself (the optimizers' own update counters, perf_counter around each
batch fetch, call and phase); the stored steps are checked against those counts and timers.
TensorFlow's import takes seconds, so the job runs once for the whole module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("tensorflow")  # installed by scripts/setup.sh (requirements-dev.txt)

import trainprof  # noqa: E402
from conftest import trainprof_command  # noqa: E402
from instrument_util import events_df, steps_df  # noqa: E402

PACE_S = 0.02  # the custom loop's pipeline sleeps this long before each batch
DETAIL = (17, 18)  # --detail-steps: two steps of the custom loop (fit makes steps 0-14)
EXIT_STATUS = 3  # the script's own exit status

JOB = r'''
import importlib.util, json, os, sys, time
os.environ["KERAS_BACKEND"] = "tensorflow"
# libraries look for TensorFlow before importing it (transformers, keras): the hook still waits
assert importlib.util.find_spec("tensorflow") is not None
import numpy as np
import tensorflow as tf
import keras

from trainprof import _rec  # already loaded by the zero-code capture; read only for the windows
clock = time.perf_counter_ns
# Windows on the recorder's own clock, CLOCK_MONOTONIC plus the offset to the epoch it took at
# its start: time.time_ns() can drift or jump from it by milliseconds while the VM's wall clock
# is slewed or stepped, which put a step outside its window.
assert _rec.clock_offset_ns() != 0
wall = lambda: clock() + _rec.clock_offset_ns()
rng = np.random.default_rng(0)
x = rng.random((80, 8), dtype=np.float32)
y = rng.random((80, 1), dtype=np.float32)
out = {"torch_imported_before": "torch" in sys.modules}


def model():
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"),
                             keras.layers.Dense(1)])


# 1. Keras fit: 3 epochs x 5 batches, validation of 2 batches after each epoch.
class Timer(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.train, self.test = [], 0
    def on_train_batch_begin(self, batch, logs=None):
        self.t = clock()
    def on_train_batch_end(self, batch, logs=None):
        self.train.append(clock() - self.t)
    def on_test_batch_end(self, batch, logs=None):
        self.test += 1

m = model()
m.compile(optimizer="sgd", loss="mse")
timer = Timer()
t0 = wall()
m.fit(x, y, batch_size=16, epochs=3, verbose=0, validation_data=(x[:32], y[:32]),
      callbacks=[timer])
out["fit"] = {"updates": int(m.optimizer.iterations.numpy()), "batch_ns": timer.train,
              "eval_batches": timer.test, "window": [t0, wall()]}

# 2. A custom loop: tf.function train step over a paced tf.data pipeline, 2 epochs x 8 batches,
#    an evaluation tf.function over 2 batches after each epoch.
PACE = float(sys.argv[1])
def batches():
    for i in range(8):
        time.sleep(PACE)
        yield x[10 * i:10 * i + 10], y[10 * i:10 * i + 10]
spec = (tf.TensorSpec((None, 8), tf.float32), tf.TensorSpec((None, 1), tf.float32))
ds = tf.data.Dataset.from_generator(batches, output_signature=spec)
m2, opt, mse = model(), keras.optimizers.Adam(1e-3), keras.losses.MeanSquaredError()

@tf.function
def train_step(xb, yb):
    with tf.GradientTape() as tape:
        loss = mse(yb, m2(xb, training=True))
    grads = tape.gradient(loss, m2.trainable_variables)
    opt.apply_gradients(zip(grads, m2.trainable_variables))
    return loss

@tf.function
def eval_step(xb, yb):
    return mse(yb, m2(xb, training=False))

waits, calls, n = [], [], 0
t0 = wall()
for epoch in range(2):
    it = iter(ds)
    while True:
        a = clock()
        try:
            xb, yb = next(it)
        except StopIteration:
            break
        b = clock()
        train_step(xb, yb)
        c = clock()
        waits.append(b - a)
        calls.append(c - b)
        n += 1
    for xb, yb in ds.take(2):
        eval_step(xb, yb)
out["custom"] = {"updates": int(opt.iterations.numpy()), "loop_count": n, "wait_ns": waits,
                 "call_ns": calls, "window": [t0, wall()]}

# 3. An eager loop (no tf.function): 6 updates, each phase timed.
m3, opt3 = model(), keras.optimizers.SGD(0.01)
phases = []
t0 = wall()
for i in range(6):
    xb, yb = tf.constant(x[10 * i:10 * i + 10]), tf.constant(y[10 * i:10 * i + 10])
    a = clock()
    with tf.GradientTape() as tape:
        loss = mse(yb, m3(xb, training=True))
    b = clock()
    grads = tape.gradient(loss, m3.trainable_variables)
    c = clock()
    opt3.apply_gradients(zip(grads, m3.trainable_variables))
    d = clock()
    phases.append({"forward": b - a, "backward": c - b, "optimizer": d - c, "step": d - a})
out["eager"] = {"updates": int(opt3.iterations.numpy()), "phases": phases,
                "window": [t0, wall()]}
print("RESULT " + json.dumps(out), flush=True)

# 4. trainprof's hooks failing: the job goes on, with one warning.
import trainprof._recorder as R
def broken(*args, **kwargs):
    raise RuntimeError("planted failure")
R.record_span = broken
for i in range(3):
    train_step(tf.constant(x[:10]), tf.constant(y[:10]))
for xb, yb in ds.take(2):  # to the dataset's end (StopIteration) through the broken hooks
    train_step(xb, yb)
m.fit(x[:32], y[:32], batch_size=16, epochs=1, verbose=0)
print("AFTER", int(opt.iterations.numpy()), int(m.optimizer.iterations.numpy()), flush=True)
sys.exit(int(sys.argv[2]))
'''


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tf")
    script, run = tmp / "train.py", tmp / "run"
    script.write_text(textwrap.dedent(JOB))
    proc = subprocess.run([*trainprof_command(), "record", "--out", str(run), "--no-gpu",
                           "--detail-steps", f"{DETAIL[0]}-{DETAIL[1]}", "--",
                           sys.executable, str(script), str(PACE_S), str(EXIT_STATUS)],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return {"proc": proc, "run": run, "own": json.loads(lines[0][len("RESULT "):])}


def _in(steps, window):
    lo, hi = window
    return steps[(steps["start_ns"] >= lo) & (steps["start_ns"] < hi)].sort_values("step")


def test_steps_are_the_optimizer_updates_the_script_counted(job):
    run, own = job["run"], job["own"]
    assert not own["torch_imported_before"]
    steps = steps_df(run)
    train = steps[steps["mode"] == "train"]
    fit, custom, eager = own["fit"], own["custom"], own["eager"]
    assert (fit["updates"], custom["updates"], eager["updates"]) == (15, 16, 6)
    assert custom["loop_count"] == custom["updates"]
    # every training step is one optimizer update, numbered 0.. in order, each in its window
    assert sorted(train["step"]) == list(range(15 + 16 + 6))
    for part, first in ((fit, 0), (custom, 15), (eager, 31)):
        mine = _in(train, part["window"])
        assert mine["step"].tolist() == list(range(first, first + part["updates"]))
        assert (mine["duration_ns"] > 0).all()
        lo, hi = part["window"]
        ends = mine["start_ns"] + mine["duration_ns"]
        assert (ends <= hi).all() and mine["duration_ns"].sum() < hi - lo
        # steps do not overlap
        assert (mine["start_ns"].iloc[1:].to_numpy() >= ends.iloc[:-1].to_numpy()).all()
    # Keras validation batches are eval steps; the custom loop's eval_step makes none
    evals = steps[steps["mode"] == "eval"]
    assert len(evals) == fit["eval_batches"] == 6
    assert len(_in(evals, custom["window"])) == 0
    ann = {a[2]: a[3] for a in trainprof.open(str(run)).annotations()}
    assert ann["framework"] == "tensorflow" and ann["tensorflow.version"].startswith("2.")
    assert ann["keras.backend"] == "tensorflow"
    phases = events_df(run, categories=["phase"])
    # fit's phase, from the job (the recorder adds one derived from the steps: args "from")
    derived = phases["args"].fillna("").str.contains("from")
    training = phases[(phases["name"] == "training") & ~derived]
    assert len(training) == 1
    assert training["start_ns"].iloc[0] >= fit["window"][0]
    assert training["start_ns"].iloc[0] + training["duration_ns"].iloc[0] <= fit["window"][1]


def test_step_times_agree_with_the_scripts_own_timers(job):
    run, own = job["run"], job["own"]
    train = steps_df(run)
    train = train[train["mode"] == "train"].sort_values("step")
    # fit: the train function call is inside the script's on_train_batch_begin..end
    fit = _in(train, own["fit"]["window"])
    theirs = own["fit"]["batch_ns"]
    assert len(theirs) == len(fit)
    assert (fit["duration_ns"].to_numpy() <= theirs).all()
    assert fit["duration_ns"].sum() >= 0.8 * sum(theirs)
    # custom loop: step = batch wait + the tf.function call; the wait is next() on the dataset
    custom = _in(train, own["custom"]["window"])
    waits, calls = own["custom"]["wait_ns"], own["custom"]["call_ns"]
    spans = [w + c for w, c in zip(waits, calls)]
    assert custom["data_wait_ns"].notna().all()
    assert (custom["data_wait_ns"].to_numpy() <= waits).all()
    assert custom["data_wait_ns"].sum() >= 0.9 * sum(waits)
    # the pipeline sleeps 16 x PACE_S; tf.data may fetch ahead during a ~1 ms step
    assert custom["data_wait_ns"].sum() >= 0.5 * 16 * PACE_S * 1e9
    assert (custom["duration_ns"].to_numpy() <= spans).all()
    assert custom["duration_ns"].sum() >= 0.9 * sum(spans)
    # a compiled step has no other parts: one graph
    assert custom[["forward_ns", "backward_ns", "optimizer_ns"]].isna().all().all()
    # eager loop: forward = the tape's region, backward = tape.gradient, optimizer = the update
    eager = _in(train, own["eager"]["window"])
    phases = own["eager"]["phases"]
    for col, key in (("forward_ns", "forward"), ("backward_ns", "backward"),
                     ("optimizer_ns", "optimizer"), ("duration_ns", "step")):
        mine = eager[col].to_numpy()
        ref = [p[key] for p in phases]
        assert (mine > 0).all() and (mine <= ref).all(), (col, mine, ref)
        assert mine.sum() >= 0.8 * sum(ref), (col, mine, ref)
    args = [json.loads(a) for a in events_df(run, categories=["step"]).query(
        "mode == 'train'").sort_values("step")["args"].iloc[31:]]
    assert all(a == {"micro_batches": 1} for a in args)


def test_a_failing_hook_does_not_change_the_job(job):
    proc = job["proc"]
    assert proc.returncode == EXIT_STATUS, proc.stderr
    # the steps after the failure trained: 16 + 3 + 2 custom updates, 15 + 2 fit updates
    assert "AFTER 21 17" in proc.stdout, proc.stdout
    warnings = [ln for ln in proc.stderr.splitlines() if "RuntimeWarning: trainprof:" in ln]
    assert warnings and all("planted failure" in ln for ln in warnings), proc.stderr
    assert len(set(warnings)) == len(warnings), warnings  # each warning once


def test_detail_steps_profile_custom_loop_steps_with_tf_profiler(job):
    run, own = job["run"], job["own"]
    train = steps_df(run)
    train = train[train["mode"] == "train"].set_index("step")
    custom = _in(train.reset_index(), own["custom"]["window"])
    assert set(DETAIL) <= set(custom["step"])
    ops = events_df(run, categories=["tf_op"])
    assert len(ops) > 20
    assert set(ops["step"].astype(int)) == set(DETAIL)
    names = set(ops["name"])
    # TensorFlow's op names (oneDNN builds fuse MatMul: _FusedMatMul / _MklMatMul)
    assert "ReadVariableOp" in names and any("MatMul" in n for n in names), sorted(names)[:40]
    for n in DETAIL:
        mine = ops[ops["step"] == n]
        assert mine["start_ns"].min() >= train.loc[n, "start_ns"]
        assert mine["start_ns"].max() < train.loc[n, "start_ns"] + train.loc[n, "duration_ns"]
    ann = {a[2]: json.loads(a[3]) for a in trainprof.open(str(run)).annotations()
           if a[2].startswith("detail.steps.")}
    info = ann[f"detail.steps.{DETAIL[0]}-{DETAIL[1]}"]
    assert info["profiler"] == "tf.profiler" and info["events"] == len(ops)


def test_rules_and_analyze_read_the_tensorflow_steps(job):
    run, own = job["run"], job["own"]
    cli = trainprof_command()
    # The custom loop has 16 steps: the rule's shortest span (min_steps, 20 by default) set
    # to 10 so that a loop this short is judged.
    out = subprocess.run([*cli, "rules", str(run), "--json", "--rule",
                          "DataLoaderStarvation.min_steps=10"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rules = {r["name"]: r for r in json.loads(out.stdout)["rules"]}
    # the paced pipeline: nearly all of each custom-loop step is waiting for the batch
    (finding,) = rules["DataLoaderStarvation"]["findings"]
    ev = finding["evidence"]
    train = steps_df(run)
    custom = _in(train[train["mode"] == "train"], own["custom"]["window"])["step"].tolist()
    # the span that decided it: whole clusters of the custom loop's steps, the last one included
    assert ev["steps"] in (10, 15) and ev["last_step"] - ev["first_step"] + 1 == ev["steps"]
    assert custom[0] <= ev["first_step"] and ev["last_step"] <= custom[-1]
    first = custom.index(ev["first_step"])
    waits_ms = sum(own["custom"]["wait_ns"][first:first + ev["steps"]]) / 1e6
    assert 0.9 * waits_ms <= ev["mean_data_wait_ms"] * ev["steps"] <= waits_ms + 0.1  # (µs)
    assert ev["share_lower"] > ev["threshold_ratio"]
    out = subprocess.run([*cli, "analyze", str(run), "--json"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    rank = json.loads(out.stdout)["ranks"][0]
    assert rank["steps_total"] == 15 + 16 + 6
    avg = rank["phase_average"]
    # the parts' averages are over the steps that carry them: 16 custom + 6 eager steps
    assert avg["steps"] == 16 + 6
    waits = sum(own["custom"]["wait_ns"]) / 1e3
    assert 0.9 * waits <= avg["data_wait_us"] * avg["steps"] <= waits
