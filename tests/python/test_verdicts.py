"""`trainprof analyze --json` on real inputs, checked against values this test computes itself
from the input: an imported CPU-only Kineto trace (HTA's test data) and a CPU-only run recorded
from the README's ResNet job with operator detail for two of its steps.

What must hold: averages are over the steps that carry the data (and say how many), the parts
the instrumentation records for every step are averaged over every step, and a machine without
a GPU gets no GPU advice.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, trainprof_command

CPU_ONLY_TRACE = ("traces/HolisticTraceAnalysis/tests/data/cpu_only/"
                  "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
GPU_WORDS = ("GPU is idle", "Move work to the GPU", "CUDA", "kernel")


def _run(*args, timeout=600):
    proc = subprocess.run(trainprof_command() + list(args), capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _union_length(intervals):
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def _no_gpu_advice(rank):
    assert rank["machine"]["has_gpu"] is False
    for item in rank["advice"]:
        for word in GPU_WORDS:
            assert word not in item["text"], item
    for text in rank["recommendations"]:
        for word in GPU_WORDS:
            assert word not in text, text


def test_analyze_imported_cpu_only_trace(tmp_path, shared_data):
    src = shared_data / CPU_ONLY_TRACE
    run = tmp_path / "run"
    _run("import", "kineto", str(src), "--out", str(run))
    doc = json.loads(_run("analyze", str(run), "--json"))
    # Independently: the one ProfilerStep and the CPU spans (cpu_op, user_annotation) inside it.
    events = json.load(gzip.open(src))["traceEvents"]
    steps = [e for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
    assert len(steps) == 1
    s0 = float(steps[0]["ts"])
    s1 = s0 + float(steps[0]["dur"])
    spans = [(max(s0, float(e["ts"])), min(s1, float(e["ts"]) + float(e["dur"])), e["name"])
             for e in events
             if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
             and not e["name"].startswith("ProfilerStep#")]
    spans = [(a, b, name) for a, b, name in spans if b > a]
    cpu_exec_us = _union_length([(a, b) for a, b, _ in spans])
    coll_us = _union_length([(a, b) for a, b, name in spans if name.startswith("gloo:")])
    (rank,) = doc["ranks"]
    assert rank["steps_total"] == 1 and rank["steps_with_operators"] == 1
    avg = rank["step_average"]
    assert avg["step_us"] == pytest.approx(s1 - s0, abs=0.002)
    assert avg["cpu_exec_us"] == pytest.approx(cpu_exec_us, abs=0.002)
    assert avg["other_us"] == pytest.approx(s1 - s0 - cpu_exec_us, abs=0.004)
    _no_gpu_advice(rank)
    # The CPU time inside the step is gloo all_reduce (waiting for other ranks), not compute:
    # communication advice with the share, no "CPU-bound".
    ids = {a["id"]: a for a in rank["advice"]}
    assert "cpu_bound" not in ids
    assert ids["exposed_communication"]["evidence"]["collective_share"] == pytest.approx(
        round(coll_us / (s1 - s0), 4), abs=1e-4)


@pytest.fixture(scope="module")
def recorded_cpu_run(tmp_path_factory):
    """The README's main job on the CPU: ResNet on generated images, 12 steps, operator detail
    for steps 5-6, one torch thread."""
    run = tmp_path_factory.mktemp("verdicts") / "run"
    script = tmp_path_factory.mktemp("script") / "train.py"
    # One torch thread, set before training starts, as a user would.
    script.write_text("import runpy, sys, torch\ntorch.set_num_threads(1)\n"
                      f"sys.argv = [{str(REPO / 'examples' / 'train_resnet_synthetic.py')!r}] + "
                      "sys.argv[1:]\nrunpy.run_path(sys.argv[0], run_name='__main__')\n")
    _run("record", "--out", str(run), "--interval", "200ms", "--no-gpu", "--detail-steps",
         "5-6", "--", sys.executable, str(script), "--steps", "12", "--eval-batches", "0",
         "--data-work", "40")
    return run


def test_analyze_recorded_cpu_run(recorded_cpu_run, tmp_path):
    run = recorded_cpu_run
    doc = json.loads(_run("analyze", str(run), "--json"))
    out = tmp_path / "csv"
    _run("export", "csv", str(run), "--out", str(out))
    with open(out / "events.csv") as f:
        events = list(csv.DictReader(f))
    # Independently, from the exported events: the train steps of the training process and
    # their parts, and the operators inside them.
    steps = [e for e in events if e["category"] == "step" and e["mode"] == "train"]
    assert len(steps) == 12
    ops = [int(e["start_ns"]) for e in events if e["category"] == "cpu_op"]
    traced = [s for s in steps
              if any(int(s["start_ns"]) <= t < int(s["start_ns"]) + int(s["duration_ns"])
                     for t in ops)]
    assert len(traced) == 2
    parts = {}
    for e in events:
        if e["category"] in ("data_wait", "forward", "backward", "optimizer") and e["step"]:
            key = (int(e["step"]), e["mode"])
            parts.setdefault(key, {}).setdefault(e["category"], 0)
            parts[key][e["category"]] += int(e["duration_ns"])
    with_parts = [s for s in steps if (int(s["step"]), "train") in parts]
    n = len(with_parts)
    assert n == 12

    def mean_us(cat):
        return sum(parts[(int(s["step"]), "train")].get(cat, 0) for s in with_parts) // n / 1000

    (rank,) = [r for r in doc["ranks"] if r["steps_total"] > 0]
    assert rank["steps_total"] == 12
    assert rank["steps_with_operators"] == 2
    # The operator average is over the two traced steps only.
    assert rank["step_average"]["step_us"] == pytest.approx(
        sum(int(s["duration_ns"]) for s in traced) // 2 / 1000, abs=0.001)
    pa = rank["phase_average"]
    assert pa["steps"] == 12
    assert pa["step_us"] == pytest.approx(sum(int(s["duration_ns"]) for s in with_parts) // n
                                          / 1000, abs=0.001)
    for cat in ("data_wait", "forward", "backward", "optimizer"):
        assert pa[f"{cat}_us"] == pytest.approx(mean_us(cat), abs=0.001), cat
    assert pa["data_wait_us"] > 0  # the loader's wait is measured on every step, not 0
    _no_gpu_advice(rank)
    assert rank["machine"]["cpu_cores"] == os.cpu_count()
    assert rank["machine"]["torch_threads"] == 1
    # Each advice item carries evidence; a thread advice names the recorded numbers.
    for item in rank["advice"]:
        assert item["evidence"], item
        if item["id"] == "torch_threads":
            assert item["evidence"]["torch_threads"] == 1
            assert item["evidence"]["cpu_cores"] == os.cpu_count()
    # The traced steps of a ResNet on the CPU are CPU operators (convolutions): the verdict
    # says CPU-bound, with the share computed from the same two steps.
    ids = {a["id"]: a for a in rank["advice"]}
    assert "cpu_bound" in ids, rank["advice"]
    avg = rank["step_average"]
    assert ids["cpu_bound"]["evidence"]["cpu_exec_share"] == pytest.approx(
        avg["cpu_exec_us"] / avg["step_us"], abs=1e-3)


def test_analyze_gpu_trace_against_tensorboard(tmp_path, shared_data):
    """A GPU trace (TensorBoard plugin's resnet50 sample, every step profiled): the averages
    are over all its steps and match the plugin's own expected overview, and the machine has a
    GPU, so the data-loader advice carries the plugin's share."""
    base = shared_data / "traces/kineto/tb_plugin"
    src = base / "samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    run = tmp_path / "run"
    _run("import", "kineto", str(src), "--out", str(run))
    (rank,) = json.loads(_run("analyze", str(run), "--json"))["ranks"]
    with open(base / "test/result_check_file.txt") as f:
        golden = json.loads(f.readline())
    rows = golden["steps"]["rows"]
    # Columns: step, then Kernel, Memcpy, Memset, Runtime, DataLoader, CPU Exec, Other (µs),
    # each followed by its tooltip.
    parts = [[float(r[1 + 2 * k]) for k in range(7)] for r in rows]
    assert rank["steps_total"] == len(rows) and rank["steps_with_operators"] == len(rows)
    assert rank["machine"]["has_gpu"] is True
    avg = rank["step_average"]
    assert avg["step_us"] == pytest.approx(golden["performance"][0]["value"], abs=1.0)
    loader = sum(p[4] for p in parts) / len(rows)
    assert avg["dataloader_us"] == pytest.approx(loader, abs=1.0)
    ids = {a["id"]: a for a in rank["advice"]}
    share = loader / (sum(sum(p) for p in parts) / len(rows))
    assert ids["data_loader_workers"]["evidence"]["dataloader_share"] == pytest.approx(share,
                                                                                       abs=1e-3)
    assert "33.4 %" in ids["data_loader_workers"]["text"]  # the plugin's own figure
