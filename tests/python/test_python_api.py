"""The command line's work from Python (trainprof._api and the Run methods), on a real recorded
PyTorch run and a real Kineto trace: the same content as `trainprof <command> --json` run as a
separate process, prices checked against an invoice computed here, and the reading API's
promises: a wrong name is an error that names the closest one, times in every usual form."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import datetime, timezone

import pytest

pd = pytest.importorskip("pandas")

import trainprof  # noqa: E402
from conftest import smallest_kineto_trace, trainprof_command  # noqa: E402

JOB = textwrap.dedent("""
    import torch
    from torch import nn
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(torch.randn(640, 64), torch.randint(0, 10, (640,)))
    for epoch in range(3):
        for x, y in torch.utils.data.DataLoader(data, batch_size=32):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
""")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    run = tmp_path_factory.mktemp("api") / "run"
    proc = subprocess.run([*trainprof_command(), "record", "--out", str(run), "--no-gpu",
                           "--interval", "100ms", "--", sys.executable, "-c", JOB],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return run


def _cli_json(*args):
    proc = subprocess.run([*trainprof_command(), *map(str, args)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_rules_and_cost_equal_the_command_line_and_the_invoice(recorded):
    run = trainprof.open(str(recorded))
    assert run.rules() == _cli_json("rules", recorded, "--json")
    by_name = {r["name"]: r for r in run.rules()["rules"]}
    assert by_name["OverallFrameworkMetrics"]["datapoints"] > 0
    frame = run.rules_frame()
    assert list(frame.columns[:2]) == ["rule", "severity"]
    assert len(frame) == sum(len(r["findings"]) for r in by_name.values())

    price = 3.6
    cost = run.cost(price_usd_per_hour=price, instance_type="ml.m5.xlarge")
    assert cost == _cli_json("cost", recorded, "--json", "--price-usd-per-hour", price,
                             "--instance-type", "ml.m5.xlarge")
    # The invoice by hand: one instance, billed for the job's wall time (whole seconds,
    # SageMaker's per-second billing), at the given price.
    meta = run.metadata
    wall_s = (meta["end_ns"] - meta["start_ns"]) / 1e9
    assert abs(cost["billed_instance_seconds"] - wall_s) <= 1.0, (cost["billed_instance_seconds"],
                                                                  wall_s)
    assert cost["compute_cost_usd"] == pytest.approx(price * cost["billed_instance_seconds"] / 3600,
                                                     rel=1e-9)
    steps = run.steps().to_pandas()
    n_train = int((steps["mode"] == "train").sum())
    assert n_train == 60  # 3 epochs x 20 batches, counted here from the job's own shape
    st = cost["steps"]
    assert st["count"] == n_train
    # amortised: the whole bill (instance and its storage volume) over the steps
    total = next(cost[k] for k in ("total_cost_usd", "total_usd") if k in cost)
    assert total >= cost["compute_cost_usd"]
    assert st["amortised_cost_per_step_usd"] == pytest.approx(total / n_train, rel=1e-6)
    # per step: the median training step's seconds (computed here) at the cluster's rate per
    # second (instance and volume: the whole bill over the billed seconds)
    # (trainprof's percentiles are nearest-rank: numpy's "inverted_cdf" method)
    import numpy as np

    median_s = np.percentile(steps[steps["mode"] == "train"]["duration_ns"].to_numpy("float64"),
                             50, method="inverted_cdf") / 1e9
    rate = total / cost["billed_instance_seconds"]
    assert st["cost_per_step_usd"] == pytest.approx(rate * median_s, rel=1e-6)


def test_report_writes_the_files_it_names(recorded, tmp_path):
    paths = trainprof.open(str(recorded)).report(tmp_path / "r.html", json_path=tmp_path / "r.json")
    assert paths["html"] == str(tmp_path / "r.html") and paths["pdf"] is None
    html = (tmp_path / "r.html").read_text()
    assert "<html" in html.lower() and trainprof.open(str(recorded)).metadata["name"] in html
    assert json.loads((tmp_path / "r.json").read_text())


def _smallest_kineto_trace():
    return smallest_kineto_trace(
        lambda doc: any(e.get("cat") == "kernel" for e in doc.get("traceEvents", [])))


def test_import_and_analyze_in_process(tmp_path):
    path, doc = _smallest_kineto_trace()
    run = trainprof.import_kineto(path, out=tmp_path / "t")
    assert isinstance(run, trainprof.Run) and run.import_summary
    kernels = sum(1 for e in doc["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X")
    assert len(run.events(categories="kernel")) == kernels
    mine = trainprof.analyze(run)
    assert mine == _cli_json("analyze", tmp_path / "t", "--json")
    assert run.analyze(hta_compat=True) == _cli_json("analyze", tmp_path / "t", "--json",
                                                     "--hta-compat")
    # The trace file itself (one or a list): analysed through a scratch run, the same result.
    assert trainprof.analyze(path, hta_compat=True) == run.analyze(hta_compat=True)
    assert trainprof.analyze([path], diff=path) == trainprof.analyze(run, diff=run)
    with pytest.raises(trainprof.TrainprofError, match="nope"):
        trainprof.import_kineto(tmp_path / "nope.json", out=tmp_path / "x")
    with pytest.raises(trainprof.TrainprofError, match="no such run directory|not a run"):
        trainprof.evaluate_rules(tmp_path / "missing")
    # trainprof.rules stays the custom-rules module (trainprof.rules.Rule), whatever was imported
    import trainprof.rules as custom_rules_api

    assert hasattr(custom_rules_api, "Rule") and trainprof.rules is custom_rules_api


def test_wrong_names_raise_with_the_closest_one(recorded):
    run = trainprof.open(str(recorded))
    with pytest.raises(KeyError, match="did you mean cpu_utilization_ratio"):
        run.system_metrics(metrics="cpu_utilisation_ratio")
    with pytest.raises(KeyError, match="unknown node"):
        run.system_metrics(metrics="cpu_utilization_ratio", nodes="no-such-node")
    with pytest.raises(KeyError, match="did you mean"):
        run.events(categories="forwrd")
    # a catalogued metric this CPU-only run does not have is an empty table, not an error
    assert len(run.system_metrics(metrics="gpu_utilization_ratio")) == 0
    assert len(run.events(categories="kernel")) == 0


def test_times_in_every_usual_form_select_the_same_samples(recorded):
    run = trainprof.open(str(recorded))
    all_cpu = run.system_metrics(metrics="cpu_utilization_ratio").to_pandas()
    ts = sorted(all_cpu["timestamp_ns"].unique())
    lo, hi = int(ts[len(ts) // 4]), int(ts[3 * len(ts) // 4])
    want = run.system_metrics(lo, hi, metrics="cpu_utilization_ratio").to_pandas()
    assert 0 < len(want) < len(all_cpu)
    as_dt = datetime.fromtimestamp(lo // 1_000_000_000, tz=timezone.utc).replace(
        microsecond=(lo % 1_000_000_000) // 1000)
    forms = [
        (pd.Timestamp(lo, unit="ns", tz="UTC"), pd.Timestamp(hi, unit="ns", tz="UTC")),
        (pd.Timestamp(lo, unit="ns", tz="UTC").isoformat(), pd.Timestamp(hi, unit="ns").isoformat() + "Z"),
        (pd.Timestamp(lo, unit="ns").to_datetime64(), pd.Timestamp(hi, unit="ns").to_datetime64()),
    ]
    for start, end in forms:
        got = run.system_metrics(start, end, metrics="cpu_utilization_ratio").to_pandas()
        assert got["timestamp_ns"].tolist() == want["timestamp_ns"].tolist(), (start, end)
    # a datetime (microseconds) starts at or before the ns time it was made from
    got = run.system_metrics(as_dt, hi, metrics="cpu_utilization_ratio").to_pandas()
    assert set(want["timestamp_ns"]) <= set(got["timestamp_ns"])
    with pytest.raises(ValueError, match="ISO 8601"):
        run.system_metrics("yesterday", None)
    dt = run.system_metrics(metrics="cpu_utilization_ratio").to_pandas(datetimes=True)
    assert str(dt["timestamp"].dtype) == "datetime64[ns, UTC]"
    assert dt["timestamp"].iloc[0].value == int(all_cpu["timestamp_ns"].iloc[0])
