"""The Python reader over runs written by the C++ writer."""

from __future__ import annotations

import json
import subprocess
import time

import numpy as np
import pandas as pd
import pytest

import trainprof

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def write_run(path, nodes=("algo-1",)):
    for i, node in enumerate(nodes):
        w = trainprof.RunWriter(path, node=node, name="unit", command=["python", "train.py"],
                                start_ns=T0)
        ts = T0 + np.arange(100, dtype=np.int64) * 500 * MS
        w.append_metric("cpu_utilization_ratio", "total", ts, np.linspace(0, 1, 100))
        w.append_metric("gpu_utilization_ratio", "gpu0", ts, np.full(100, 0.25 + i / 10))
        for s in range(5):
            start = T0 + s * 100 * MS
            w.append_event("step", "step", start, 100 * MS, mode="train", step=s, pid=10, rank=i)
            w.append_event("data_wait", "data_wait", start, 20 * MS, mode="train", step=s,
                           pid=10, rank=i)
            w.append_event("forward", "forward", start + 20 * MS, 30 * MS, mode="train", step=s,
                           pid=10, rank=i)
        w.append_event("download_start", "mark", T0, instant=True, args={"bytes": 123})
        w.close(end_ns=T0 + 60_000 * MS, exit_status=0)
    return path


def test_system_metrics_to_pandas(tmp_path):
    run = trainprof.open(write_run(tmp_path / "r"))
    assert run.nodes == ["algo-1"]
    assert run.metrics() == ["cpu_utilization_ratio", "gpu_utilization_ratio"]
    df = run.system_metrics().to_pandas()
    assert list(df.columns) == ["node", "metric", "device", "timestamp_ns", "value"]
    assert len(df) == 200
    assert isinstance(df["metric"].dtype, pd.CategoricalDtype)
    assert df["timestamp_ns"].dtype == np.int64
    cpu = df[df.metric == "cpu_utilization_ratio"]
    np.testing.assert_allclose(cpu["value"].to_numpy(), np.linspace(0, 1, 100))
    assert (cpu["device"] == "total").all()


def test_filters_and_time_window(tmp_path):
    run = trainprof.open(write_run(tmp_path / "r"))
    t = run.system_metrics(T0 + 1000 * MS, T0 + 2000 * MS, metrics="gpu_utilization_ratio")
    assert len(t) == 2
    assert set(t.column("device")) == {"gpu0"}
    # a device the run does not have is an error naming the known ones, not an empty table
    with pytest.raises(KeyError, match="unknown device 'nope'.*gpu0"):
        run.system_metrics(devices=["nope"])


def test_events_and_missing_values(tmp_path):
    run = trainprof.open(write_run(tmp_path / "r"))
    ev = run.events().to_pandas()
    assert len(ev) == 16
    mark = ev[ev.category == "mark"].iloc[0]
    assert mark["kind"] == "instant"
    assert pd.isna(mark["step"]) and pd.isna(mark["rank"])  # missing is not zero
    assert json.loads(mark["args"]) == {"bytes": 123}
    assert str(ev["step"].dtype) == "Int64"
    only_steps = run.events(categories="step")
    assert len(only_steps) == 5
    assert len(run.get_events(T0, T0 + 150 * MS, categories="step")) == 2


def test_steps(tmp_path):
    run = trainprof.open(write_run(tmp_path / "r"))
    steps = run.steps().to_pandas()
    assert list(steps.columns) == ["node", "rank", "pid", "step", "mode", "start_ns",
                                   "duration_ns", "data_wait_ns", "forward_ns", "backward_ns",
                                   "optimizer_ns"]
    assert len(steps) == 5
    assert (steps["data_wait_ns"] == 20 * MS).all()
    assert (steps["forward_ns"] == 30 * MS).all()
    assert steps["backward_ns"].isna().all()  # never recorded: <NA>, not 0


def test_multi_node_merge(tmp_path):
    run = trainprof.open(write_run(tmp_path / "r", nodes=("algo-1", "algo-2")))
    assert run.nodes == ["algo-1", "algo-2"]
    df = run.system_metrics(metrics="gpu_utilization_ratio").to_pandas()
    means = df.groupby("node", observed=True)["value"].mean()
    assert means["algo-1"] == pytest.approx(0.25)
    assert means["algo-2"] == pytest.approx(0.35)
    steps = run.steps().to_pandas()
    assert sorted(steps["rank"].unique().tolist()) == [0, 1]


def test_live_tail(tmp_path):
    w = trainprof.RunWriter(tmp_path / "live", node="n", name="live")
    w.append_event("step", "step", T0, MS, step=0)
    w.flush()
    run = trainprof.open(tmp_path / "live")
    assert len(run.new_events()) == 1
    assert len(run.new_events()) == 0
    w.append_event("step", "step", T0 + MS, MS, step=1)
    w.flush()
    assert run.new_events().column("step").tolist() == [1]
    assert run.latest_timestamp() == T0 + 2 * MS
    w.close()


def test_errors_are_exceptions_with_codes(tmp_path):
    with pytest.raises(trainprof.TrainprofError) as e:
        trainprof.open(tmp_path / "nope")
    assert e.value.code == "not found"
    assert "nope" in str(e.value)
    bad = tmp_path / "bad"
    (bad / "nodes" / "n0").mkdir(parents=True)
    (bad / "nodes" / "n0" / "store.sqlite").write_bytes(b"\x00" * 4096)
    with pytest.raises(trainprof.TrainprofError) as e:
        trainprof.open(bad)
    assert e.value.code == "data loss"
    assert "store.sqlite" in str(e.value)


def test_large_read_is_columnar_and_fast(tmp_path):
    n = 2_000_000
    w = trainprof.RunWriter(tmp_path / "big", node="n", name="big")
    ts = T0 + np.arange(n, dtype=np.int64) * 100 * MS
    vals = np.round(np.random.default_rng(0).random(n), 4)
    w.append_metric("cpu_utilization_ratio", "cpu0", ts, vals)
    w.close()
    run = trainprof.open(tmp_path / "big")
    start = time.perf_counter()
    df = run.system_metrics().to_pandas()
    elapsed = time.perf_counter() - start
    assert len(df) == n
    np.testing.assert_array_equal(df["value"].to_numpy(), vals)
    # Generous bound (shared, noisy machine); bench/ measures the real figure.
    assert elapsed < 5.0


def test_cli_demo_ls_show(tmp_path, trainprof_cli):
    out = tmp_path / "runs" / "demo"
    subprocess.run([*trainprof_cli, "demo", "--out", str(out), "--duration", "20"], check=True,
                   capture_output=True)
    ls = subprocess.run([*trainprof_cli, "ls", str(tmp_path / "runs"), "--json"], check=True,
                        capture_output=True, text=True)
    runs = json.loads(ls.stdout)["runs"]
    assert len(runs) == 1 and runs[0]["name"] == "demo" and runs[0]["exit_status"] == 0
    show = subprocess.run([*trainprof_cli, "show", str(out), "--json"], check=True,
                          capture_output=True, text=True)
    info = json.loads(show.stdout)
    assert info["metric_values"] == 40 * 12
    assert info["events_by_category"]["step"] > 0
    bad = subprocess.run([*trainprof_cli, "show", str(tmp_path / "missing")],
                         capture_output=True, text=True)
    assert bad.returncode == 1
    assert bad.stderr.startswith("error: ") and "missing" in bad.stderr
    usage = subprocess.run([*trainprof_cli, "show"], capture_output=True, text=True)
    assert usage.returncode == 2
