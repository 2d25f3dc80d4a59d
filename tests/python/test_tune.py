"""`trainprof tune` as a user runs it: the native command hands over to python -m trainprof.tune,
which runs `trainprof record` trials.

- The planted bottleneck (examples/tune_planted.py: a slow transform in __getitem__, loaded with
  num_workers=0): tune finds num_workers=4 through its own zero-code knob, a separate
  confirmation run measured by the job itself is >= 2x the baseline's, the knob that does
  nothing (log_every) is reported as having no effect, and a batch size that exceeds the memory
  ceiling is recorded as out of memory and its combinations skipped.
- Measurement against known truth: a job of explicit trainprof steps that each sleep a known
  time with a known batch size; a crashing and a hanging setting; the catalog price read from
  the catalog file itself; resuming from the state directory; Ctrl-C.
- The own knobs inside a recorded PyTorch job (DataLoader arguments, torch threads), and usage
  errors.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import REPO, trainprof_command

PLANTED = REPO / "examples" / "tune_planted.py"


def tune(state: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    cmd = [*trainprof_command(), "tune", "--state", str(state), "--no-gpu", "-q", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def tune_json(state: Path, *args: str, timeout: float = 120) -> dict:
    proc = tune(state, "--json", *args, timeout=timeout)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout)


def by_settings(doc: dict, **settings) -> list[dict]:
    return [t for t in doc["trials"]
            if all(t["settings"].get(k) == v for k, v in settings.items())]


def own_rate(stdout: str) -> float:
    m = re.search(r"samples_per_second=([0-9.]+)", stdout)
    assert m, stdout
    return float(m.group(1))


def test_planted_bottleneck(tmp_path):
    state = tmp_path / "state"
    doc = tune_json(
        state, "--no-auto-knobs", "--try", "num_workers=4", "--try", "log_every=10,50",
        "--try", "batch_size=16,32768", "--max-memory-gib", "1.5", "--budget", "75s",
        "--steps", "15", "--warmup-steps", "3", "--min-effect", "0.25",
        "--", sys.executable, str(PLANTED), "--log-every", "{log_every}",
        "--batch-size", "{batch_size}", "--transform-ms", "5", timeout=150)
    base, best = doc["baseline"], doc["best"]
    assert base["status"] == "ok" and base["settings"] == {
        "num_workers": None, "log_every": 10, "batch_size": 16}
    assert base["observed"]["num_workers"] == 0  # the job's own DataLoader, as it was
    # the better setting, found through trainprof's own knob (an environment variable)
    assert best["status"] == "ok" and best["settings"]["num_workers"] == 4
    assert best["observed"]["num_workers"] == 4
    assert best["env"] == ["TRAINPROF_TUNE_NUM_WORKERS=4"]
    assert best["samples_per_second"] > base["samples_per_second"]
    # the useless knob: no effect; the planted one: an effect
    effects = {e["knob"]: e for e in doc["effects"]}
    assert effects["log_every"]["no_effect"], effects["log_every"]
    assert not effects["num_workers"]["no_effect"]
    assert effects["batch_size"]["changes_math"]
    # the setting over the memory ceiling: recorded, and nothing else ran with it
    crashed = by_settings(doc, batch_size=32768)
    assert len(crashed) == 1, crashed
    assert crashed[0]["status"] == "oom" and crashed[0]["exit_status"] == 1
    assert crashed[0]["samples_per_second"] is None
    assert "allocate" in crashed[0]["error"]
    for t in doc["trials"]:
        assert (Path(t["run"]) / "run.json").exists()
    assert doc["stop_reason"] == "every setting tried"
    assert (state / "tune.html").exists() and (state / "tune.json").exists()
    assert "best_command" in doc and doc["best_command"].startswith("TRAINPROF_TUNE_NUM_WORKERS=4 ")

    # confirmation: the job's own measure of the winning and the baseline command lines, run as
    # tune printed them (own knobs need `trainprof record` to apply)
    def confirm(trial):
        env = dict(os.environ, **dict(e.split("=", 1) for e in trial["env"]))
        cmd = [*trainprof_command(), "record", "--no-gpu", "--out",
               str(tmp_path / f"confirm-{trial['trial']}"), "--", *trial["command"],
               "--steps", "50"]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return own_rate(proc.stdout)

    assert confirm(best) >= 2 * confirm(base)


FAKE_JOB = """
import os, sys, time
import trainprof
delay = float(sys.argv[1])
mode = os.environ.get("MODE", "ok")
trainprof.annotate(**{"dataloader.0": {"batch_size": 8}})
for i in range(100000):
    if mode == "crash" and i == 2:
        raise RuntimeError("planted crash")
    if mode == "hang" and i == 3:
        time.sleep(3600)
    with trainprof.step():
        time.sleep(delay)
"""


def catalog_price(instance_type: str) -> float:
    """The price straight from the shipped catalog file (not through trainprof)."""
    with open(REPO / "data" / "catalog" / "instances.csv") as f:
        for row in csv.DictReader(line for line in f if not line.startswith("#")):
            if row.get("instance_type") == instance_type:
                return float(row["price_usd_per_hour"])
    raise AssertionError(f"{instance_type} not in the catalog")


def test_known_truth_failures_price_and_resume(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(FAKE_JOB))
    state = tmp_path / "state"
    args = ["--no-auto-knobs", "--try", "delay=0.02,0.01", "--env", "MODE=ok,crash,hang", "--steps", "20",
            "--warmup-steps", "2", "--trial-timeout", "3", "--instance-type", "ml.m5.large",
            "--epoch-samples", "80000", "--budget", "60s"]
    cmd = ["--", sys.executable, str(job), "{delay}"]
    # first only two trials, then a re-run continues from the state directory
    first = tune_json(state, *args, "--max-trials", "2", *cmd)
    assert [t["trial"] for t in first["trials"]] == [0, 1]
    doc = tune_json(state, *args, *cmd)
    assert [t["trial"] for t in doc["trials"][:2]] == [0, 1]
    assert doc["trials"][0]["samples_per_second"] == first["trials"][0]["samples_per_second"]
    price = catalog_price("ml.m5.large")
    for t in doc["trials"]:
        if t["status"] != "ok":
            continue
        # known truth: 8 samples per step of `delay` seconds (plus the loop's own microseconds)
        truth = 8 / t["settings"]["delay"]
        assert truth * 0.85 < t["samples_per_second"] <= truth * 1.01, t
        assert t["usd_per_hour"] == pytest.approx(price)
        assert t["samples_per_usd"] == pytest.approx(t["samples_per_second"] * 3600 / price)
        assert t["usd_per_epoch"] == pytest.approx(80000 / t["samples_per_second"] / 3600 * price)
    statuses = {t["settings"]["MODE"]: t for t in doc["trials"] if t["settings"]["delay"] == 0.02}
    assert statuses["crash"]["status"] == "failed" and statuses["crash"]["exit_status"] == 1
    assert "planted crash" in statuses["crash"]["error"]
    assert statuses["hang"]["status"] == "timeout"
    assert doc["best"]["settings"] == {"delay": 0.01, "MODE": "ok"}
    # crashed values are not combined with others
    assert len(by_settings(doc, MODE="crash")) == 1 and len(by_settings(doc, MODE="hang")) == 1
    assert doc["stop_reason"] == "every setting tried"
    # a third run has nothing left to do
    again = tune_json(state, *args, *cmd)
    assert again["trials_run_now"] == 0 and len(again["trials"]) == len(doc["trials"])


def test_own_knobs_that_do_not_apply_are_not_run(tmp_path):
    # a job without PyTorch: trainprof's own knobs (on by default) cannot change it
    job = tmp_path / "job.py"
    job.write_text("import time, trainprof\n"
                   "for i in range(10000):\n"
                   "    with trainprof.step():\n"
                   "        time.sleep(0.01)\n")
    doc = tune_json(tmp_path / "state", "--steps", "10", "--warmup-steps", "1", "--",
                    sys.executable, str(job))
    assert len(doc["trials"]) == 1 and doc["best"]["trial"] == 0
    assert doc["best"]["throughput_unit"] == "steps"  # no batch size seen
    assert 80 < doc["best"]["samples_per_second"] <= 101
    effects = {e["knob"]: e["verdict"] for e in doc["effects"]}
    assert effects == {k: "does not apply to this job" for k in (
        "num_workers", "torch_threads", "channels_last", "autocast", "compile")}


def test_interrupt_then_resume(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(FAKE_JOB))
    state = tmp_path / "state"
    args = [*trainprof_command(), "tune", "--state", str(state), "--no-gpu", "-q", "--json",
            "--no-auto-knobs", "--try", "delay=0.05", "--steps", "1000", "--warmup-steps", "1", "--",
            sys.executable, str(job), "{delay}"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (state / "trials" / "000" / "run.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert doc["trials"][0]["status"] == "interrupted"
    # the re-run runs the interrupted setting again (a short one this time: --steps differs
    # but the study is the same command and space)
    doc = tune_json(state, "--no-auto-knobs", "--try", "delay=0.05", "--steps", "5", "--warmup-steps", "1",
                    "--", sys.executable, str(job), "{delay}")
    assert [t["status"] for t in doc["trials"]] == ["interrupted", "ok"]
    assert doc["best"]["trial"] == 1


def test_own_knobs_in_a_recorded_torch_job(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import json, torch
        from torch.utils.data import DataLoader
        a = DataLoader(list(range(8)), batch_size=2)
        b = DataLoader(list(range(8)), 2, False, None, None, 3, prefetch_factor=5)
        print(json.dumps({"threads": torch.get_num_threads(), "a": [a.num_workers, a.prefetch_factor],
                          "b": [b.num_workers, b.prefetch_factor, b.persistent_workers]}))
    """))
    env = dict(os.environ, TRAINPROF_TUNE_NUM_WORKERS="0", TRAINPROF_TUNE_TORCH_THREADS="1")
    proc = subprocess.run([*trainprof_command(), "record", "--no-gpu", "--out",
                           str(tmp_path / "r0"), "--", sys.executable, str(script)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # num_workers=0 everywhere; prefetch_factor (given positionally-adjacent) dropped with it
    assert got == {"threads": 1, "a": [0, None], "b": [0, None, False]}
    env = dict(os.environ, TRAINPROF_TUNE_NUM_WORKERS="2", TRAINPROF_TUNE_PERSISTENT_WORKERS="1")
    proc = subprocess.run([*trainprof_command(), "record", "--no-gpu", "--out",
                           str(tmp_path / "r1"), "--", sys.executable, str(script)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["a"] == [2, 2] and got["b"] == [2, 5, True]


@pytest.mark.parametrize("args,message", [
    ([], "no command to tune"),
    (["--try", "x=1,2", "--", "true"], "the command has no {x}"),
    (["--try", "x", "--", "true", "{x}"], "expected NAME=V1,V2"),
    (["--try", "num_workers=two", "--", "true"], "not an integer"),
    (["--budget", "soon", "--try", "x=1", "--", "true", "{x}"], "expected e.g. 90s"),
    (["--instance-type", "no.such.type", "--try", "x=1", "--", "true", "{x}"],
     "not in the instance catalog"),
])
def test_usage_errors(tmp_path, args, message):
    proc = tune(tmp_path / "state", *args, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr


def test_state_of_another_command_is_refused(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "spec.json").write_text(json.dumps({"fingerprint": "0", "command": ["other"]}))
    proc = tune(state, "--try", "x=1", "--", "true", "{x}")
    assert proc.returncode == 2 and "another command or search space" in proc.stderr


MODEL_JOB = """
import json, os, sys, torch
from torch.utils.data import DataLoader
conv = os.environ.get("KIND") == "conv"
if conv:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.LazyLinear(2))
    data = [torch.randn(3, 8, 8) for _ in range(8)]
else:
    model = torch.nn.Linear(4, 2)
    data = [torch.randn(4) for _ in range(8)]
seen = {}
def hook(mod, args, out):
    seen["autocast"] = torch.is_autocast_enabled("cpu")
    seen["autocast_dtype"] = str(torch.get_autocast_dtype("cpu"))
    seen["out_dtype"] = str(out.dtype)
    if args[0].dim() == 4:
        seen["input_channels_last"] = args[0].is_contiguous(memory_format=torch.channels_last)
model.register_forward_hook(hook)
loader = DataLoader(data, batch_size=2)
for x in loader:
    model(x)
    seen["batch"] = len(x)
    break
w = model[0].weight if conv else model.weight
print(json.dumps(dict(seen, loader_batch_size=loader.batch_size,
                      weight_channels_last=w.dim() == 4 and w.is_contiguous(
                          memory_format=torch.channels_last) and not w.is_contiguous(),
                      compiled=getattr(model, "_compiled_call_impl", None) is not None)))
"""


def _run_model_job(tmp_path, name, kind, **tune_env):
    script = tmp_path / "model_job.py"
    script.write_text(textwrap.dedent(MODEL_JOB))
    env = dict(os.environ, KIND=kind, TRAINPROF_TUNE_OBSERVE="1",
               **{f"TRAINPROF_TUNE_{k.upper()}": v for k, v in tune_env.items()})
    out = tmp_path / name
    proc = subprocess.run([*trainprof_command(), "record", "--no-gpu", "--out", str(out), "--",
                           sys.executable, str(script)],
                          capture_output=True, text=True, env=env, timeout=180)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), out, proc.stderr


def test_model_knobs_inside_a_recorded_torch_job(tmp_path):
    from trainprof import _tune_results as TR

    # the job's own view: nothing changed without settings
    got, run, _ = _run_model_job(tmp_path, "r0", "conv")
    assert got["autocast"] is False and got["out_dtype"] == "torch.float32"
    assert got["input_channels_last"] is False and got["weight_channels_last"] is False
    assert got["compiled"] is False and got["batch"] == 2 and got["loader_batch_size"] == 2
    obs = TR.observe(run, None)["observed"]
    assert obs["conv2d"] is True and obs["channels_last"] is False and obs["autocast"] == "off"
    # channels_last + bf16 autocast + batch size, each seen by the job itself
    got, run, _ = _run_model_job(tmp_path, "r1", "conv", channels_last="1", autocast="bf16",
                                 batch_size="4")
    assert got["autocast"] is True and got["autocast_dtype"] == "torch.bfloat16"
    assert got["out_dtype"] == "torch.bfloat16"
    assert got["input_channels_last"] is True and got["weight_channels_last"] is True
    assert got["batch"] == 4 and got["loader_batch_size"] == 4
    obs = TR.observe(run, None)["observed"]
    assert obs["channels_last"] is True and obs["autocast"] == "bf16"
    # a model without 2-D convolutions: channels_last does not apply and is left alone
    # (and an invalid value, refused by tune, is ignored with a warning inside the job)
    got, run, err = _run_model_job(tmp_path, "r2", "linear", channels_last="1", compile="fastest")
    assert got["weight_channels_last"] is False
    assert got["compiled"] is False and "not one of" in err
    obs = TR.observe(run, None)["observed"]
    assert obs["conv2d"] is False and obs["model"] == "Linear"


def test_a_knob_that_does_not_apply_is_not_named_as_a_change():
    from trainprof import _tune_report as TS
    from trainprof import _tune_results as TR
    from trainprof import tune as T

    o = T.parser().parse_args(["--try", "channels_last=1", "--try", "torch_threads=1",
                               "--no-auto-knobs", "--", "python", "train.py"])
    T._check_options(o)
    knobs = T.build_spec(o).knobs
    settings = {k.name: k.baseline for k in knobs} | {"channels_last": "1", "torch_threads": "1"}
    assert TR.changed(knobs, settings) == ["channels_last=1", "torch_threads=1"]
    # the baseline saw no 2-D convolution (channels_last cannot apply) and ran with 4 threads
    base = {"observed": {"conv2d": False, "dataloader": False, "torch_threads": 4}}
    canon = TS.canonical_values(knobs, base)
    assert TR.changed_as_run(knobs, settings, canon) == ["torch_threads=1"]
    # with a convolution both are changes
    canon = TS.canonical_values(knobs, {"observed": {"conv2d": True, "torch_threads": 4}})
    assert TR.changed_as_run(knobs, settings, canon) == ["channels_last=1", "torch_threads=1"]


def test_the_command_to_run_sets_only_the_knobs_that_apply():
    """A winning trial that ran with channels_last=1 on a model without 2-D convolutions: the
    command printed for it sets the threads alone; with neither applying, it needs no
    `trainprof record` and sets nothing."""
    from trainprof import _tune_report as TS
    from trainprof import _tune_trials as TT
    from trainprof import tune as T

    o = T.parser().parse_args(["--try", "channels_last=1", "--try", "torch_threads=1",
                               "--no-auto-knobs", "--", "python", "train.py"])
    T._check_options(o)
    knobs = T.build_spec(o).knobs
    settings = {k.name: k.baseline for k in knobs} | {"channels_last": "1", "torch_threads": "1"}
    r = {"raw_settings": settings, "env": TT.env_assignments(knobs, settings),
         "command": ["python", "train.py"]}
    assert sorted(r["env"]) == ["TRAINPROF_TUNE_CHANNELS_LAST=1", "TRAINPROF_TUNE_TORCH_THREADS=1"]
    canon = TS.canonical_values(knobs, {"observed": {"conv2d": False, "torch_threads": 4}})
    assert TS.command_as_run(r, knobs, canon) == (
        "TRAINPROF_TUNE_TORCH_THREADS=1 trainprof record -- python train.py")
    canon = TS.canonical_values(knobs, {"observed": {"conv2d": False, "torch_threads": 1}})
    assert TS.command_as_run(r, knobs, canon) == "python train.py"
    canon = TS.canonical_values(knobs, {"observed": {"conv2d": True, "torch_threads": 4}})
    assert TS.command_as_run(r, knobs, canon) == (
        "TRAINPROF_TUNE_CHANNELS_LAST=1 TRAINPROF_TUNE_TORCH_THREADS=1 trainprof record -- "
        "python train.py")


def test_compile_knob_wraps_the_model(tmp_path):
    got, run, err = _run_model_job(tmp_path, "c", "linear", compile="default")
    from trainprof import _tune_results as TR

    assert got["compiled"] is True, err
    assert TR.observe(run, None)["observed"]["compile"] == "default"


def test_model_and_batch_knobs_in_the_space():
    from trainprof import _tune_trials as TT
    from trainprof import tune as T

    o = T.parser().parse_args(["--try", "autocast=bf16,fp16", "--try", "batch_size=64",
                               "--try", "compile=max-autotune", "--no-auto-knobs", "--",
                               "python", "train.py"])
    T._check_options(o)
    knobs = {k.name: k for k in T.build_spec(o).knobs}
    assert knobs["autocast"].changes_math and knobs["batch_size"].changes_math
    assert not knobs["compile"].changes_math
    assert knobs["autocast"].values == ["default", "bf16", "fp16"]
    env = TT.trial_environment(list(knobs.values()),
                              {"autocast": "bf16", "batch_size": "default", "compile": "default"})
    assert env["TRAINPROF_TUNE_AUTOCAST"] == "bf16" and env["TRAINPROF_TUNE_OBSERVE"] == "1"
    assert "TRAINPROF_TUNE_BATCH_SIZE" not in env
    o = T.parser().parse_args(["--try", "autocast=fp8", "--", "python", "train.py"])
    with pytest.raises(T.UsageError, match="not one of off, bf16, fp16"):
        T.build_spec(o)


LOSS_JOB = """
import math, sys, time
import trainprof
if len(sys.argv) > 2:
    trainprof.start(out=sys.argv[2])
scale = float(sys.argv[1])
for i in range(12):
    with trainprof.step():
        time.sleep(0.01)
    trainprof.log_metric("loss", scale / (i + 1), step=i)
    print(f"loss=999 (not the logged one)", flush=True)
trainprof.log_metric("loss", "not a number")
trainprof.log_metric("acc", float("nan"))
trainprof.stop() if len(sys.argv) > 2 else None
"""


def test_log_metric_read_back_and_used_for_the_loss_curve(tmp_path):
    import trainprof

    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(LOSS_JOB))
    # under trainprof.start(): read back through the reader, equal to what the job logged
    proc = subprocess.run([sys.executable, str(job), "2", str(tmp_path / "started")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "not a number" in proc.stderr
    rows = trainprof.open(str(tmp_path / "started")).logged_metric("loss")
    assert [(v, s) for _ts, v, s in rows] == [(2 / (i + 1), i) for i in range(12)]
    assert all(a[0] <= b[0] for a, b in zip(rows, rows[1:]))
    acc = trainprof.open(str(tmp_path / "started")).logged_metric("acc")
    assert len(acc) == 1 and math.isnan(acc[0][1])
    # under tune (record): a knob flagged as changing the math shows the logged loss curve
    doc = tune_json(tmp_path / "state", "--no-auto-knobs", "--try", "lr=1,3", "--steps", "100",
                    "--warmup-steps", "2", "--", sys.executable, str(job), "{lr}")
    for t in doc["trials"]:
        assert t["status"] == "ok", t
        scale = t["settings"]["lr"]
        assert t["loss"]["source"] == "log_metric"
        assert t["loss"]["values"] == [scale / (i + 1) for i in range(12)]
        assert t["changes_math"] == (scale != 1)


def _accelerator_row(model: str) -> dict:
    with open(REPO / "data" / "catalog" / "accelerators.csv") as f:
        for row in csv.DictReader(line for line in f if not line.startswith("#")):
            if row["accel_model"] == model:
                return row
    raise AssertionError(f"{model} not in the accelerator catalog")


def test_projections_onto_other_instance_types(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(FAKE_JOB))
    common = ["--no-auto-knobs", "--try", "delay=0.01", "--steps", "10", "--warmup-steps", "1",
              "--epoch-samples", "8000"]
    # trials priced as an A10G machine, projected onto a V100 type, a CPU type and itself
    doc = tune_json(tmp_path / "s1", *common, "--instance-type", "ml.g5.xlarge",
                    "--instance-types", "ml.p3.2xlarge,ml.c5.xlarge,ml.g5.xlarge",
                    "--", sys.executable, str(job), "{delay}")
    best = doc["best"]
    rows = {p["instance_type"]: p for p in doc["projections"]}
    assert all(p["projection"] and p["from_trial"] == best["trial"] for p in rows.values())
    # by hand from the catalog files: the slower of the 16-bit peak and the bandwidth ratios
    a10g, v100 = _accelerator_row("A10G"), _accelerator_row("V100-16GB")
    t16 = lambda r: float(r["bf16_tensor_tflops_dense"] or r["fp16_tensor_tflops_dense"])  # noqa
    factor = max(t16(a10g) / t16(v100), float(a10g["mem_bw_gbs"]) / float(v100["mem_bw_gbs"]))
    p3 = rows["ml.p3.2xlarge"]
    assert p3["factor"] == pytest.approx(factor) and f"x{factor:.2f}" in p3["basis"]
    sps = best["samples_per_second"] / factor
    assert p3["samples_per_second"] == pytest.approx(sps)
    assert p3["samples_per_usd"] == pytest.approx(sps * 3600 / catalog_price("ml.p3.2xlarge"))
    assert p3["usd_per_epoch"] == pytest.approx(8000 / sps / 3600 * catalog_price("ml.p3.2xlarge"))
    same = rows["ml.g5.xlarge"]
    assert same["factor"] == 1.0 and same["samples_per_usd"] == pytest.approx(
        best["samples_per_second"] * 3600 / catalog_price("ml.g5.xlarge"))
    assert rows["ml.c5.xlarge"]["samples_per_usd"] is None
    assert "no usable scaling model" in rows["ml.c5.xlarge"]["basis"]
    # ranked by samples per dollar, the rows without a projection last
    spd = [p["samples_per_usd"] for p in doc["projections"]]
    assert spd[-1] is None and spd[:-1] == sorted(spd[:-1], reverse=True)
    # CPU trials: CPU types on the rightsizing basis (same step time), GPU types without a model
    doc = tune_json(tmp_path / "s2", *common, "--instance-types", "ml.m5.large,ml.g5.xlarge",
                    "--", sys.executable, str(job), "{delay}")
    rows = {p["instance_type"]: p for p in doc["projections"]}
    m5 = rows["ml.m5.large"]
    assert m5["factor"] == 1.0 and "same step time" in m5["basis"]
    assert m5["samples_per_usd"] == pytest.approx(
        doc["best"]["samples_per_second"] * 3600 / catalog_price("ml.m5.large"))
    assert rows["ml.g5.xlarge"]["factor"] is None
    assert "without an accelerator" in rows["ml.g5.xlarge"]["basis"]
    assert "projections of trial" in tune(tmp_path / "s2", *common, "--instance-types",
                                          "ml.m5.large,ml.g5.xlarge", "--", sys.executable,
                                          str(job), "{delay}").stdout
    # `trainprof report STATE` gives the result table, with each trial's report linked
    state = tmp_path / "s2"
    (state / "tune.html").unlink()
    proc = subprocess.run([*trainprof_command(), "report", str(state)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {state / 'tune.html'}" in proc.stdout
    page = (state / "tune.html").read_text()
    assert (state / "trials" / "000" / "report.html").exists()
    assert 'href="trials/000/report.html"' in page and "Projections onto other" in page
    proc = subprocess.run([*trainprof_command(), "report", str(state), "--json", "x.json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "tune state directory" in proc.stderr
