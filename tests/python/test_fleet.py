"""`trainprof fleet` and `trainprof export parquet` (issue 21, docs/fleet.md).

- A fleet of >= 30 real runs: tiny jobs recorded here (tags, instance types), every small real
  Kineto trace and the real SageMaker Debugger jobs of ../shared/data imported, and runs written
  through trainprof.RunWriter (no summary: the fleet view summarises them once and keeps it).
  The fleet's totals are checked against an invoice computed here from each run's own
  `trainprof cost RUN --json` (an independent sum), and the usage-type grouping is done by hand
  from each report's nodes (REGION-Train:<type>, us-east-1 -> USE1).
- A generated fleet of summaries (bench/fleet_bench.py) with known truth, and its speed.
- Parquet export read back by DuckDB as one dataset across runs, values against trainprof.open.
- Object storage: runs under s3:// on moto's server started on 127.0.0.1; an unreachable endpoint,
  a missing bucket and a bucket without permission give clear errors and lose nothing locally.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import os
import socket
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import trainprof
from conftest import REPO, SHARED_DATA, trainprof_command

sys.path.insert(0, str(REPO / "bench"))
import fleet_bench  # noqa: E402

TRACES = SHARED_DATA / "traces"
SMDEBUG = SHARED_DATA / "smdebug" / "tests" / "profiler" / "resources"
UNLABELLED_TYPE = "ml.g5.xlarge"  # how the fleet and the invoice price runs that name none
KINETO = [  # small real traces (HTA's and Kineto's test data)
    "HolisticTraceAnalysis/tests/data/trace_compare/base/base.json.gz",
    "HolisticTraceAnalysis/tests/data/trace_compare/test/test.json.gz",
    "HolisticTraceAnalysis/tests/data/triton_example/triton_example.json.gz",
    "HolisticTraceAnalysis/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "HolisticTraceAnalysis/tests/data/critical_path/cuda_event_sync/event_sync_trace.json.gz",
    "HolisticTraceAnalysis/tests/data/execution_trace/benchmark_simple_add_trace.json.gz",
    "HolisticTraceAnalysis/tests/data/critical_path/cuda_event_sync_multi_stream/"
    "event_sync_trace.json.gz",
    "HolisticTraceAnalysis/tests/data/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "kineto/docs/traces/after_fix_trace.json",
    "kineto/docs/traces/before_fix_trace.json",
    "HolisticTraceAnalysis/tests/data/with_gpu_user_annotation/step_based_trace_2543932.json.gz",
    "HolisticTraceAnalysis/tests/data/critical_path/simple_add/"
    "benchmark_result_493459_1694039959_trace.json.gz",
    "HolisticTraceAnalysis/tests/data/critical_path/alexnet/"
    "benchmark_result_2869224_1695835535_trace.json.gz",
    "HolisticTraceAnalysis/tests/data/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz",
    "HolisticTraceAnalysis/tests/data/trace_filter/sampled_rank-0.json.gz",
]
SMDEBUG_JOBS = ["test_traces", "model_timeline_traces", "tfprofiler_timeline_traces"]
RECORDED = [  # (name, instance type, tags)
    ("vision-a", "ml.g5.xlarge", ["team=vision", "project=x", "training_job=job-vision-a"]),
    ("vision-b", "ml.p3.2xlarge", ["team=vision", "project=y", "training_job=job-vision-b"]),
    ("nlp-a", "ml.m5.xlarge", ["team=nlp"]),
]
WRITTEN = 10  # runs written through RunWriter


def cli(*args, check=True, env=None, timeout=300) -> subprocess.CompletedProcess:
    p = subprocess.run([*trainprof_command(), *map(str, args)], capture_output=True, text=True,
                       env=env, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"trainprof {' '.join(map(str, args))}: rc {p.returncode}\n"
                             f"{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p


def _env(tmp: Path, **extra) -> dict:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache"), TRAINPROF_PYTHON=sys.executable)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """The fleet directory, with what each run is."""
    root = tmp_path_factory.mktemp("fleet")
    runs = root / "runs"
    kinds = {}
    for name, itype, tags in RECORDED:
        args = ["record", "--out", runs / name, "--instance-type", itype, "--no-gpu",
                "--interval", "100ms"]
        for t in tags:
            args += ["--tag", t]
        cli(*args, "--", sys.executable, "-c", "import time; time.sleep(0.6)")
        kinds[name] = "recorded"
    for i, rel in enumerate(KINETO):
        name = f"kineto-{i:02d}"
        cli("import", "kineto", TRACES / rel, "--out", runs / "imported" / name)
        kinds[name] = "kineto"
    for job in SMDEBUG_JOBS:
        cli("import", "smdebug", SMDEBUG / job, "--out", runs / "imported" / f"smdebug-{job}")
        kinds[f"smdebug-{job}"] = "smdebug"
    cli("import", "horovod", SMDEBUG / "horovod_timeline_small.json", "--out",
        runs / "imported" / "horovod-small", "--base-time-us", "1700000000000000")
    kinds["horovod-small"] = "horovod"
    rng = np.random.default_rng(21)
    t0 = 1_790_000_000 * 10**9
    for i in range(WRITTEN):
        d = runs / "written" / f"written-{i}"
        start = t0 + i * 86_400 * 10**9 * 3
        with trainprof.RunWriter(d, node="algo-1", name=f"written-{i}", start_ns=start) as w:
            n = 40 + 10 * i
            ts = start + np.arange(n, dtype=np.int64) * 500_000_000
            w.append_metric("gpu_utilization_ratio", "gpu0", ts, rng.uniform(0, 1, n))
            w.append_metric("cpu_utilization_ratio", "cpu", ts, rng.uniform(0, 1, n))
            w.close(end_ns=int(ts[-1]) + 500_000_000, exit_status=0)
        kinds[f"written-{i}"] = "written"
    return root, runs, kinds


def all_run_dirs(runs: Path) -> list[Path]:
    return sorted(p.parent for p in runs.rglob("run.json"))


def invoice(run_dirs: list[Path]) -> dict[Path, dict]:
    """Each run's own `trainprof cost --json` (priced as the fleet prices it)."""
    out = {}
    for d in run_dirs:
        p = cli("cost", d, "--json", check=False)
        if p.returncode != 0:  # no instance type named or detected
            p = cli("cost", d, "--json", "--instance-type", UNLABELLED_TYPE)
        out[d] = json.loads(p.stdout)
    return out


def test_fleet_of_real_runs_matches_the_invoice(fleet, tmp_path):
    root, runs, kinds = fleet
    dirs = all_run_dirs(runs)
    assert len(dirs) >= 30, len(dirs)
    # record and import wrote a summary at their end; RunWriter runs have none yet.
    for d in dirs:
        has = (d / "summary.json").exists()
        assert has == (kinds[d.name] != "written"), d
    recorded = json.loads((runs / "vision-a" / "summary.json").read_text())
    assert recorded["run"]["tags"] == {"team": "vision", "project": "x",
                                       "training_job": "job-vision-a"}
    assert recorded["cost"]["total_cost_usd"] == pytest.approx(
        json.loads(cli("cost", runs / "vision-a", "--json").stdout)["total_cost_usd"], rel=1e-12)

    bill = invoice(dirs)
    env = _env(tmp_path)
    # A glob and a directory of runs, overlapping: each run counted once.
    out = json.loads(cli("fleet", runs, str(runs / "imported") + "/*", "--json",
                         "--instance-type", UNLABELLED_TYPE, env=env).stdout)
    assert out["runs"] == len(dirs)
    assert out["priced_runs"] == len(dirs) and out["unpriced"] == []
    total = math.fsum(c["total_cost_usd"] for c in bill.values())
    assert total > 0
    assert out["total_cost_usd"] == pytest.approx(total, rel=1e-9)

    # Usage types by hand: one line per node, USE1-Train:<type> for SageMaker prices; a type
    # detected from a trace's GPUs has an EC2 price: BoxUsage:<type> (no prefix in us-east-1).
    usage = defaultdict(lambda: [0.0, 0.0])
    for c in bill.values():
        for n in c["nodes"]:
            assert n["price"]["region"] == "us-east-1"
            ec2 = n["price"]["service"] == "ec2"
            assert ec2 or n["price"]["service"] == "sagemaker-training"
            box = ("BoxUsage:" if ec2 else "USE1-Train:") + n["instance_type"]
            usage[box][0] += n["billed_seconds"] / 3600
            usage[box][1] += n["compute_cost_usd"]
            if n["storage_cost_usd"]:
                vol = "EBS:VolumeUsage.gp2" if ec2 else "USE1-Train:VolumeUsage.gp2"
                usage[vol][0] += n["billed_seconds"] / 3600
                usage[vol][1] += n["storage_cost_usd"]
    got = {u["usage_type"]: (u["hours"], u["cost_usd"]) for u in out["by_usage_type"]}
    assert set(got) == set(usage)
    assert {"USE1-Train:ml.g5.xlarge", "USE1-Train:ml.p3.2xlarge",
            "USE1-Train:ml.m5.xlarge", "BoxUsage:p4d.24xlarge"} <= set(got)
    for k, (h, c) in usage.items():
        assert got[k][0] == pytest.approx(h, rel=1e-9) and got[k][1] == pytest.approx(c, rel=1e-9)
    assert [u["cost_usd"] for u in out["by_usage_type"]] == sorted(
        (u["cost_usd"] for u in out["by_usage_type"]), reverse=True)

    # Phases, tags, savings: sums of each report's own figures.
    phases = defaultdict(float)
    savings = defaultdict(lambda: [0.0, 0])
    team = defaultdict(float)
    for d, c in bill.items():
        for p in c["phases"]:
            phases[p["phase"]] += p["cost_usd"]
        for w in c["what_ifs"]:
            savings[w["id"]][0] += w["saving_usd"]
            savings[w["id"]][1] += 1
        tags = json.loads((d / "run.json").read_text()).get("tags") or {}
        team[tags.get("team")] += c["total_cost_usd"]
    assert {p["phase"]: p["cost_usd"] for p in out["by_phase"]} == pytest.approx(dict(phases))
    assert {v["value"]: v["cost_usd"] for v in out["by_tag"]["team"]} == pytest.approx(dict(team))
    assert {s["what"]: s["saving_usd"] for s in out["savings"]} == pytest.approx(
        {k: v[0] for k, v in savings.items()})
    assert {s["what"]: s["runs"] for s in out["savings"]} == {k: v[1] for k, v in savings.items()}
    assert "managed_spot" in savings
    assert [s["saving_usd"] for s in out["savings"]] == sorted(
        (s["saving_usd"] for s in out["savings"]), reverse=True)
    idle = [c["idle_accelerator_cost_usd"] for c in bill.values()
            if c["idle_accelerator_cost_usd"] is not None]
    assert len(idle) >= 1 and out["idle_measured_runs"] == len(idle)
    assert out["idle_cost_usd"] == pytest.approx(math.fsum(idle), rel=1e-9)
    assert math.fsum(w["cost_usd"] for w in out["by_week"]) == pytest.approx(total, rel=1e-9)
    assert math.fsum(d["cost_usd"] for d in out["by_day"]) == pytest.approx(total, rel=1e-9)
    assert math.fsum(u["cost_usd"] for u in out["by_user"]) == pytest.approx(total, rel=1e-9)

    # The runs without a summary were summarised once and kept next to them (writable), with
    # the default pricing; the unlabelled ones priced as --instance-type are cached instead.
    written = [d for d in dirs if kinds[d.name] == "written"]
    assert all((d / "summary.json").exists() for d in written)
    assert any((tmp_path / "cache").rglob("*.json"))
    stamps = {d: (d / "summary.json").stat().st_mtime_ns for d in written}
    again = json.loads(cli("fleet", runs, "--json", "--instance-type", UNLABELLED_TYPE,
                           env=env).stdout)
    assert again["total_cost_usd"] == out["total_cost_usd"]
    assert stamps == {d: (d / "summary.json").stat().st_mtime_ns for d in written}

    # Without --instance-type the unlabelled runs are unpriced, listed, not counted as $0.
    plain = json.loads(cli("fleet", runs, "--json", env=env).stdout)
    priceable = [d for d in dirs if cli("cost", d, "--json", check=False).returncode == 0]
    assert plain["priced_runs"] == len(priceable) < len(dirs)
    assert len(plain["unpriced"]) == len(dirs) - len(priceable)
    assert all(u["why"] for u in plain["unpriced"])

    # Every price the fleet's dollars rest on, with its date and source: the catalog's row
    # (data/catalog/instances.csv, read here), and the runs it priced.
    with open(REPO / "data" / "catalog" / "instances.csv", newline="") as f:
        catalog = {(r["instance_type"]): r for r in csv.DictReader(f)}
    assert out["prices"]
    priced_runs = defaultdict(int)
    for c in bill.values():
        for key in {(n["instance_type"], n["price"]["price_usd_per_hour"]) for n in c["nodes"]}:
            priced_runs[key] += 1
    for p in out["prices"]:
        row = catalog[p["instance_type"]]
        assert p["as_of"] == row["price_as_of"] and p["source"] == row["price_source"], p
        if p["spot_as_of"] is None:
            assert p["price_usd_per_hour"] == pytest.approx(float(row["price_usd_per_hour"]))
        assert p["runs"] == priced_runs[(p["instance_type"], p["price_usd_per_hour"])]

    # Text, CSV and Parquet say the same.
    text = cli("fleet", runs, "--instance-type", UNLABELLED_TYPE, env=env).stdout
    assert "USE1-Train:ml.p3.2xlarge" in text and f"{len(dirs)} runs" in text
    assert "price of" in text and "source: " in text
    cli("fleet", runs, "--instance-type", UNLABELLED_TYPE, "--csv", tmp_path / "f.csv", env=env)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "f.csv").read_text())))
    assert float(next(r for r in rows if r["dimension"] == "total")["cost_usd"]) == \
        pytest.approx(total, rel=1e-9)
    assert {r["key"]: float(r["cost_usd"]) for r in rows if r["dimension"] == "usage_type"} == \
        pytest.approx({k: v[1] for k, v in usage.items()}, rel=1e-9)
    cli("fleet", runs, "--instance-type", UNLABELLED_TYPE, "--parquet", tmp_path / "pq", env=env)
    import duckdb

    con = duckdb.connect()
    assert con.execute(f"select count(*), sum(total_cost_usd) from "
                       f"'{tmp_path / 'pq' / 'runs.parquet'}'").fetchone() == \
        (len(dirs), pytest.approx(total, rel=1e-9))
    by_type = dict(con.execute(f"select usage_type, sum(cost_usd) from "
                               f"'{tmp_path / 'pq' / 'usage.parquet'}' group by 1").fetchall())
    assert by_type == pytest.approx({k: v[1] for k, v in usage.items()}, rel=1e-9)


def test_generated_fleet_truth_and_speed(tmp_path):
    n = 2000
    truth = fleet_bench.generate(tmp_path / "gen", n)
    t = time.perf_counter()
    out = json.loads(cli("fleet", tmp_path / "gen", "--json", env=_env(tmp_path)).stdout)
    secs = time.perf_counter() - t
    assert out["runs"] == n
    assert out["total_cost_usd"] == pytest.approx(truth["total"], rel=1e-9)
    assert {u["usage_type"]: u["cost_usd"] for u in out["by_usage_type"]} == pytest.approx(
        truth["usage"], rel=1e-9)
    assert {u["usage_type"]: u["hours"] for u in out["by_usage_type"]} == pytest.approx(
        truth["usage_hours"], rel=1e-9)
    assert "EU-Train:ml.p4d.24xlarge" in truth["usage"] and "USW2-Train:VolumeUsage.gp2" in \
        truth["usage"]
    assert {v["value"]: v["cost_usd"] for v in out["by_tag"]["team"]} == pytest.approx(
        truth["team"], rel=1e-9)
    assert {u["user"]: u["cost_usd"] for u in out["by_user"]} == pytest.approx(truth["user"])
    assert {p["phase"]: p["cost_usd"] for p in out["by_phase"]} == pytest.approx(truth["phase"])
    assert {s["what"]: s["saving_usd"] for s in out["savings"]} == pytest.approx(
        truth["savings"])
    assert {s["what"]: s["runs"] for s in out["savings"]} == truth["savings_runs"]
    assert out["idle_cost_usd"] == pytest.approx(truth["idle"], rel=1e-9)
    # 10 000 in <= 5 s is the target (bench/fleet_bench.py); a fifth of it, in a fifth.
    assert secs <= 5.0 * n / 10_000 + 1.0, secs


def test_bad_input_is_named(tmp_path):
    env = _env(tmp_path)
    p = cli("fleet", tmp_path / "nothing-here", check=False, env=env)
    assert p.returncode == 1 and "no such file or directory" in p.stderr
    (tmp_path / "empty").mkdir()
    p = cli("fleet", tmp_path / "empty", check=False, env=env)
    assert p.returncode == 1 and "no run directory" in p.stderr
    run = tmp_path / "r"
    fleet_bench.generate(run, 1)
    (run / "run-00000" / "summary.json").write_text("{\"summary_version\": 1, \"run\": [")
    p = cli("fleet", run, check=False, env=env)
    assert p.returncode == 1 and "summary.json: not JSON" in p.stderr
    p = cli("fleet", check=False, env=env)
    assert p.returncode == 2


BUSY_RULE = """
from trainprof.rules import Rule


class GpuSamples(Rule):
    description = "one finding per 30 GPU samples (test)"

    def evaluate(self, run):
        m = run.system_metrics(metrics="gpu_utilization_ratio")
        self.datapoints = len(m)
        ts = m.column("timestamp_ns")
        for i in range(0, 60, 30):
            yield self.finding(f"samples {i}..{i + 29}", node="algo-1", start_ns=int(ts[i]),
                               end_ns=int(ts[i + 29]), evidence={"first": i})
"""


def test_export_parquet_read_by_duckdb(fleet, tmp_path):
    import duckdb

    import shutil

    _, runs, _ = fleet
    # A run with stored findings: the rules over a copy of a written run (idle GPU).
    flagged = tmp_path / "runs" / "flagged"
    shutil.copytree(runs / "written" / "written-3", flagged)
    rule = tmp_path / "busy.py"
    rule.write_text(BUSY_RULE)
    cli("rules", flagged, "--store", "--custom", rule, env=_env(tmp_path))
    assert len(trainprof.open(str(flagged)).findings()) == 2
    chosen = [runs / "vision-a", runs / "imported" / "kineto-14", flagged,
              runs / "imported" / "smdebug-tfprofiler_timeline_traces"]
    out = tmp_path / "pq"
    cli("export", "parquet", *chosen, "--out", out, "--instance-type", UNLABELLED_TYPE,
        env=_env(tmp_path))
    con = duckdb.connect()

    def q(table, sql):
        return con.execute(sql.replace(
            "T", f"read_parquet('{out}/{table}/*/*.parquet', hive_partitioning=true)")).fetchall()

    assert sorted(r[0] for r in q("metrics", "select distinct run from T")) == sorted(
        d.name for d in chosen if trainprof.open(str(d)).series())
    for d in chosen:
        r = trainprof.open(str(d))
        m = r.system_metrics()
        got = q("metrics", f"select count(*), coalesce(sum(value), 0), "
                           f"coalesce(sum(timestamp_ns::hugeint), 0) from T where run = '{d.name}'")
        assert got[0][0] == len(m)
        assert got[0][1] == pytest.approx(float(np.sum(m.column("value"))), rel=1e-12)
        assert int(got[0][2]) == int(np.sum(m.column("timestamp_ns").astype(object)))
        ev = r.events()
        got = q("events", f"select count(*), coalesce(sum(duration_ns::hugeint), 0), "
                          f"count(distinct name) from T where run = '{d.name}'")
        assert got[0][0] == len(ev)
        assert int(got[0][1]) == int(np.sum(ev.column("duration_ns").astype(object)))
        assert got[0][2] == len(set(ev.column("name")))
        st = r.steps()
        got = q("steps", f"select count(*), coalesce(sum(duration_ns::hugeint), 0) "
                         f"from T where run = '{d.name}'")
        assert got[0][0] == len(st)
        assert int(got[0][1]) == int(np.sum(st.column("duration_ns").astype(object)))
        got = q("findings", f"select count(*) from T where run = '{d.name}'")
        assert got[0][0] == len(r.findings())
        p = cli("cost", d, "--json", check=False)
        if p.returncode != 0:
            p = cli("cost", d, "--json", "--instance-type", UNLABELLED_TYPE)
        c = json.loads(p.stdout)
        got = q("costs", f"select cost_usd from T where run = '{d.name}' and item = 'total'")
        assert got == [(pytest.approx(c["total_cost_usd"], rel=1e-12),)]
        got = q("costs", f"select sum(cost_usd) from T where run = '{d.name}' and item = 'phase'")
        assert got[0][0] == pytest.approx(math.fsum(
            p["cost_usd"] for n in c["nodes"] for p in n["phases"]), rel=1e-9)
    assert q("steps", "select count(*) from T")[0][0] > 0
    assert q("events", "select count(*) from T")[0][0] > 1000
    # The DuckDB queries docs/fleet.md shows (read from the docs, as bench/spark_sql.py reads
    # them for its Spark comparison) run on this export; the spend per phase they give is the
    # sum of `trainprof cost`'s phases over the runs.
    import importlib.util

    spec = importlib.util.spec_from_file_location("spark_sql", REPO / "bench" / "spark_sql.py")
    spark_sql = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(spark_sql)
    duck, _ = spark_sql.docs_queries(REPO / "docs" / "fleet.md")
    answers = [con.execute(stmt.replace("'out/", f"'{out}/")).fetchall()
               for stmt in duck if spark_sql.is_select(stmt)]
    assert len(answers) == 4 and all(answers), answers
    phases = {}
    for d in chosen:
        p = cli("cost", d, "--json", check=False)
        if p.returncode != 0:
            p = cli("cost", d, "--json", "--instance-type", UNLABELLED_TYPE)
        for n in json.loads(p.stdout)["nodes"]:
            for ph in n["phases"]:
                phases.setdefault(ph["phase"], []).append(ph["cost_usd"])
    by_phase = dict(next(a for a in answers if {r[0] for r in a} <= set(phases) | {None}))
    assert by_phase == {k: pytest.approx(math.fsum(v), rel=1e-9) for k, v in phases.items()}
    assert q("findings", "select count(*) from T")[0][0] > 0
    assert q("metrics", "select count(distinct run) from T")[0][0] >= 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    env = dict(os.environ, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    with open(log, "w") as f:
        proc = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H",
                                 "127.0.0.1", "-p", str(port)], stdout=f, stderr=f, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise AssertionError(f"moto server did not start: {log.read_text()[-2000:]}")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _s3_env(tmp: Path, endpoint: str) -> dict:
    return _env(tmp, AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="testing",
                AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                AWS_EC2_METADATA_DISABLED="true")


def _upload(client, bucket: str, local: Path, prefix: str) -> None:
    for p in local.rglob("*"):
        if p.is_file():
            client.upload_file(str(p), bucket, f"{prefix}/{p.relative_to(local).as_posix()}")


def test_runs_on_object_storage(fleet, s3_server, tmp_path):
    import boto3
    import duckdb

    _, runs, _ = fleet
    env = _s3_env(tmp_path, s3_server)
    s3 = boto3.client("s3", endpoint_url=s3_server, aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    s3.create_bucket(Bucket="fleet")
    chosen = [runs / "vision-a", runs / "vision-b", runs / "nlp-a", runs / "written" / "written-1",
              runs / "imported" / "kineto-00"]
    for d in chosen:
        _upload(s3, "fleet", d, f"team/{d.name}")
    # written-1 has a summary locally by now (the first test) or not: drop it remotely, so the
    # fleet view summarises the remote run and keeps the summary in the bucket.
    s3.delete_object(Bucket="fleet", Key="team/written-1/summary.json")
    local = json.loads(cli("fleet", *chosen, "--json", "--instance-type", UNLABELLED_TYPE,
                           env=env).stdout)
    remote = json.loads(cli("fleet", "s3://fleet/team", "--json", "--instance-type",
                            UNLABELLED_TYPE, env=env).stdout)
    assert remote["runs"] == len(chosen)
    assert remote["total_cost_usd"] == pytest.approx(local["total_cost_usd"], rel=1e-12)
    assert remote["by_usage_type"] == local["by_usage_type"]
    s3.head_object(Bucket="fleet", Key="team/written-1/summary.json")  # kept in the bucket
    globbed = json.loads(cli("fleet", "s3://fleet/team/vision-*", "--json", env=env).stdout)
    assert globbed["runs"] == 2

    # Export from the bucket into the bucket; read back, same rows as the local run.
    cli("export", "parquet", "s3://fleet/team/vision-a", "s3://fleet/team/written-1", "--out",
        "s3://fleet/exports", env=env)
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="fleet",
                                                       Prefix="exports/")["Contents"])
    assert "exports/metrics/run=vision-a/part-0.parquet" in keys
    assert "exports/costs/run=written-1/part-0.parquet" in keys
    got = tmp_path / "got"
    for k in keys:
        (got / k).parent.mkdir(parents=True, exist_ok=True)
        s3.download_file("fleet", k, str(got / k))
    n = duckdb.connect().execute(
        f"select count(*) from read_parquet('{got}/exports/metrics/*/*.parquet', "
        f"hive_partitioning=true) where run = 'written-1'").fetchone()[0]
    assert n == len(trainprof.open(str(runs / "written" / "written-1")).system_metrics())

    # A missing bucket, a bucket without permission, an unreachable endpoint: clear errors,
    # exit 1, and the local output untouched.
    p = cli("fleet", "s3://no-such-bucket/x", "--json", check=False, env=env)
    assert p.returncode == 1 and "no such bucket" in p.stderr, p.stderr
    s3.create_bucket(Bucket="locked")
    s3.put_bucket_policy(Bucket="locked", Policy=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Principal": "*",
                                                "Action": "s3:*",
                                                "Resource": ["arn:aws:s3:::locked",
                                                             "arn:aws:s3:::locked/*"]}]}))
    p = cli("export", "parquet", runs / "vision-a", "--out", "s3://locked/x", check=False,
            env=env)
    assert p.returncode == 1 and "access denied" in p.stderr, p.stderr
    assert (runs / "vision-a" / "run.json").exists()
    down = _s3_env(tmp_path, f"http://127.0.0.1:{_free_port()}")
    t = time.perf_counter()
    p = cli("fleet", "s3://fleet/team", check=False, env=down)
    assert p.returncode == 1 and "cannot reach the object store" in p.stderr, p.stderr
    assert time.perf_counter() - t < 30
    before = sorted(x.name for x in (runs / "vision-a").iterdir())
    p = cli("export", "parquet", runs / "vision-a", "--out", "s3://fleet/y", check=False,
            env=down)
    assert p.returncode == 1 and "cannot reach the object store" in p.stderr, p.stderr
    assert sorted(x.name for x in (runs / "vision-a").iterdir()) == before


JOB_WAITS_FOR_UPLOAD = """
import sys, time, boto3
s3 = boto3.client("s3")
deadline = time.time() + 20
while time.time() < deadline:
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="fleet", Prefix=sys.argv[1]).get("Contents", [])]
    if any(k.endswith("/run.json") for k in keys) and any("/nodes/" in k for k in keys):
        print("seen while running", file=sys.stderr)
        sys.exit(0)
    time.sleep(0.2)
sys.exit(3)
"""


def test_record_uploads_as_it_goes(s3_server, tmp_path):
    import boto3

    env = _s3_env(tmp_path, s3_server)
    s3 = boto3.client("s3", endpoint_url=s3_server, aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    if "fleet" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket="fleet")
    # The job itself waits until the run is in the bucket: uploaded while it runs.
    p = subprocess.run([*trainprof_command(), "record", "--out", "s3://fleet/recorded/rec1",
                        "--instance-type", "ml.g5.xlarge", "--tag", "team=vision", "--no-gpu",
                        "--", sys.executable, "-c", JOB_WAITS_FOR_UPLOAD, "recorded/rec1/"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "seen while running" in p.stderr and "uploaded to s3://fleet/recorded/rec1" in p.stderr
    local = tmp_path / "trainprof-runs" / "rec1"
    assert (local / "summary.json").exists()
    keys = {o["Key"][len("recorded/rec1/"):] for o in
            s3.list_objects_v2(Bucket="fleet", Prefix="recorded/rec1/")["Contents"]}
    files = {x.relative_to(local).as_posix() for x in local.rglob("*") if x.is_file()}
    assert files <= keys, files - keys
    # The remote run reads as the local one.
    remote = json.loads(cli("fleet", "s3://fleet/recorded/rec1", "--json", env=env).stdout)
    mine = json.loads(cli("cost", local, "--json").stdout)
    assert remote["total_cost_usd"] == pytest.approx(mine["total_cost_usd"], rel=1e-12)

    # Unreachable store: the job runs, the run is complete locally, the upload is a warning.
    down = _s3_env(tmp_path, f"http://127.0.0.1:{_free_port()}")
    p = subprocess.run([*trainprof_command(), "record", "--out", "s3://fleet/recorded/rec2",
                        "--no-gpu", "--", sys.executable, "-c", "import time; time.sleep(0.5)"],
                       cwd=tmp_path, env=down, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "upload to s3://fleet/recorded/rec2 failed" in p.stderr, p.stderr
    assert "cannot reach the object store" in p.stderr, p.stderr
    assert len(trainprof.open(str(tmp_path / "trainprof-runs" / "rec2")).system_metrics()) > 0


def _describe(name, itype, billable, training, spot, start=1_790_000_000.0):
    """A DescribeTrainingJob response as `aws sagemaker describe-training-job` prints it."""
    iso = lambda t: dt.datetime.fromtimestamp(t, dt.timezone.utc).isoformat()  # noqa: E731
    steps = [("Starting", 0, 60), ("Downloading", 60, 100), ("Training", 100, 100 + training),
             ("Uploading", 100 + training, 110 + training)]
    return {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{name}",
        "TrainingJobStatus": "Completed", "SecondaryStatus": "Completed",
        "AlgorithmSpecification": {"TrainingImage": "x", "TrainingInputMode": "File"},
        "ResourceConfig": {"InstanceType": itype, "InstanceCount": 1, "VolumeSizeInGB": 30,
                           "KeepAlivePeriodInSeconds": 0},
        "EnableManagedSpotTraining": spot,
        "TrainingStartTime": iso(start), "TrainingEndTime": iso(start + 110 + training),
        "TrainingTimeInSeconds": training, "BillableTimeInSeconds": billable,
        "SecondaryStatusTransitions": [{"Status": st, "StartTime": iso(start + a),
                                        "EndTime": iso(start + b), "StatusMessage": ""}
                                       for st, a, b in steps],
        "WarmPoolStatus": {"Status": "Terminated", "ResourceRetainedBillableTimeInSeconds": 0},
    }


def test_billing_reconciled_per_job(fleet, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    _, runs, _ = fleet
    measured = {n: json.loads(cli("cost", runs / n, "--json").stdout) for n in ("vision-a",
                                                                                "vision-b")}
    a_secs = measured["vision-a"]["billed_instance_seconds"]
    jobs = [_describe("job-vision-a", "ml.g5.xlarge", int(round(a_secs)), int(round(a_secs)),
                      False),
            _describe("job-vision-b", "ml.p3.2xlarge", 300, 1000, True),
            _describe("job-elsewhere", "ml.g5.xlarge", 500, 500, False)]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    # CUR 2.0 line items: job-vision-a's hours in two lines, a storage line, an EC2 line and a
    # line of another job; the published column names.
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-job/"
    items = [
        ("USE1-Train:ml.g5.xlarge", arn + "job-vision-a", a_secs / 3600 / 2, 0.01),
        ("USE1-Train:ml.g5.xlarge", arn + "job-vision-a", a_secs / 3600 / 2, 0.02),
        ("USE1-Train:VolumeUsage.gp2", arn + "job-vision-a", 0.001, 0.005),
        ("USE1-BoxUsage:m5.large", "i-0123", 1.0, 0.096),
        ("USE1-Train:ml.p3.2xlarge", arn + "job-vision-b", 2.0, 7.65),
    ]
    cols = ["line_item_usage_type", "line_item_resource_id", "line_item_usage_amount",
            "line_item_unblended_cost"]
    with open(tmp_path / "cur.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["bill_payer_account_id", *cols, "line_item_product_code"])
        for it in items:
            w.writerow(["123456789012", *it, "AmazonSageMaker"])
    pq.write_table(pa.table({c: [it[i] for it in items] for i, c in enumerate(cols)}),
                   tmp_path / "cur.parquet")
    env = _env(tmp_path)
    for cur in ("cur.csv", "cur.parquet"):
        out = json.loads(cli("fleet", runs / "vision-a", runs / "vision-b", "--json",
                             "--billing", tmp_path / "jobs.json", tmp_path / cur,
                             env=env).stdout)
        rec = {r["job"]: r for r in out["reconciliation"]}
        assert set(rec) == {"job-vision-a", "job-vision-b", "job-elsewhere"}
        a = rec["job-vision-a"]
        assert a["status"] == "match", a["problems"]
        assert a["billable_seconds"] == int(round(a_secs))
        assert a["measured_billed_seconds"] == pytest.approx(a_secs)
        assert a["cur_instance_seconds"] == pytest.approx(a_secs, rel=1e-9)
        assert a["cur_cost_usd"] == pytest.approx(0.035)
        assert a["aws_phases_seconds"] == pytest.approx(
            {"starting": 60, "downloading": 40, "training": int(round(a_secs)), "uploading": 10})
        b = rec["job-vision-b"]
        assert b["status"] == "mismatch" and b["spot"] is True
        assert b["spot_saving_pct"] == pytest.approx(70.0)
        assert any("billed 300 s" in p for p in b["problems"])
        assert any("CUR 7200 instance-seconds" in p for p in b["problems"])
        assert rec["job-elsewhere"]["status"] == "mismatch"
        assert rec["job-elsewhere"]["run"] is None
    text = cli("fleet", runs / "vision-b", "--billing", tmp_path / "jobs.json", env=env).stdout
    assert "job-vision-b: billed 300 s" in text
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    p = cli("fleet", runs / "vision-a", "--billing", tmp_path / "bad.csv", check=False, env=env)
    assert p.returncode == 1 and "not a CUR 2.0 file: no line_item_usage_type" in p.stderr
    (tmp_path / "bad.json").write_text('{"Foo": 1}')
    p = cli("fleet", runs / "vision-a", "--billing", tmp_path / "bad.json", check=False, env=env)
    assert p.returncode == 1 and "no TrainingJobName" in p.stderr


def test_killed_recorder_loses_nothing_remotely(s3_server, tmp_path):
    """kill -9 of the recorder: the uploader notices and copies the local run once more; the
    bucket then holds exactly the local files (what the local store kept)."""
    import signal

    import boto3

    env = _s3_env(tmp_path, s3_server)
    s3 = boto3.client("s3", endpoint_url=s3_server, aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    if "fleet" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket="fleet")
    pidfile = tmp_path / "job.pid"
    job = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    rec = subprocess.Popen([*trainprof_command(), "record", "--out", "s3://fleet/killed/rec",
                            "--no-gpu", "--interval", "100ms", "--", sys.executable, "-c", job],
                           cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    local = tmp_path / "trainprof-runs" / "rec"

    def remote() -> dict:
        got = s3.list_objects_v2(Bucket="fleet", Prefix="killed/rec/").get("Contents", [])
        return {o["Key"][len("killed/rec/"):]: o["Size"] for o in got}
    try:
        deadline = time.time() + 30
        while time.time() < deadline and not any(k.startswith("nodes/") for k in remote()):
            time.sleep(0.2)
        assert any(k.startswith("nodes/") for k in remote()), "nothing uploaded while running"
        time.sleep(1.0)
        rec.send_signal(signal.SIGKILL)
        rec.wait(timeout=10)
    finally:
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        if rec.poll() is None:
            rec.kill()
    samples = len(trainprof.open(str(local)).system_metrics())
    assert samples > 0
    want = {x.relative_to(local).as_posix(): x.stat().st_size for x in local.rglob("*")
            if x.is_file() and not x.name.startswith(".")}
    deadline = time.time() + 30
    while time.time() < deadline and remote() != want:
        time.sleep(0.2)
    assert remote() == want
    # The bucket's copy reads as the local one.
    copy = tmp_path / "copy"
    for k in want:
        (copy / k).parent.mkdir(parents=True, exist_ok=True)
        s3.download_file("fleet", f"killed/rec/{k}", str(copy / k))
    assert len(trainprof.open(str(copy)).system_metrics()) == samples
