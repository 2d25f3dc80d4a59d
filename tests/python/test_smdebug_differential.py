"""SageMaker Debugger import, checked against independent implementations (issue 16).

- smdebug's own readers (pip smdebug==1.0.34: LocalSystemMetricsReader, LocalAlgorithmMetricsReader)
  read every job of ../shared/data/smdebug (and a generated job with every system metric type
  SageMaker writes); trainprof imports the same folder. Per node and metric: the same samples
  (count, timestamps, values) under trainprof's names and units; per node: the same number of
  framework events.
- Python's pstats reads each cProfile dump; trainprof's python_function rows must equal it.
- A generated 30-minute single-instance job: billed once (price x 1 instance x billed seconds,
  computed here from the catalog CSV), and the rules that join framework and system data find
  datapoints.

Unit conversions and names, as docs/metrics.md states them (written out here, not taken from
trainprof): percent -> ratio is value / 100 exactly (the double nearest the decimal quotient);
timestamps are the decimal seconds x 1e9 exactly (smdebug holds a double: trainprof's ns,
rounded to a double, must be that double); smdebug's framework node id "<n>-<host>" is
node "<host>" (one instance, one node); smdebug's TF-profiler node id is the host name cut at
its first dot, trainprof keeps the whole host name.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import pstats
import re
import subprocess
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

import trainprof
from conftest import REPO, SHARED_DATA, trainprof_command

from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader
from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader

RES = SHARED_DATA / "smdebug" / "tests" / "profiler" / "resources"
FOREVER_US = 2**62
KIND_SPAN = "span"  # the kind column of Run.events().to_pandas()

# Every line shape of a real SageMaker system file (an ml.m5.large job's first rows; memory and
# i/o lines have an empty Dimension, network lines Algorithm / Platform).
ALL_TYPES = """\
{"Type": "memory", "Name": "MemoryUsedPercent", "Dimension": "", "Value": 6.18, "NodeId": "algo-1", "Timestamp": 1733636919.508406}
{"Type": "i/o", "Name": "IOPS", "Dimension": "", "Value": 0.00, "NodeId": "algo-1", "Timestamp": 1733636920.008990}
{"Type": "i/o", "Name": "ReadThroughputInBytesPerSecond", "Dimension": "", "Value": 0.00, "NodeId": "algo-1", "Timestamp": 1733636920.008990}
{"Type": "i/o", "Name": "WriteThroughputInBytesPerSecond", "Dimension": "", "Value": 0.00, "NodeId": "algo-1", "Timestamp": 1733636920.008990}
{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 98.00, "NodeId": "algo-1", "Timestamp": 1733636920.009090}
{"Type": "cpu", "Name": "cpu0", "Dimension": "I/OWaitPercentage", "Value": 14.00, "NodeId": "algo-1", "Timestamp": 1733636920.009090}
{"Type": "cpu", "Name": "cpu1", "Dimension": "CPUUtilization", "Value": 89.58, "NodeId": "algo-1", "Timestamp": 1733636920.009090}
{"Type": "cpu", "Name": "cpu1", "Dimension": "I/OWaitPercentage", "Value": 4.17, "NodeId": "algo-1", "Timestamp": 1733636920.009090}
{"Type": "memory", "Name": "MemoryUsedPercent", "Dimension": "", "Value": 6.75, "NodeId": "algo-1", "Timestamp": 1733636920.009163}
{"Type": "network", "Name": "ReceiveBytesPerSecond", "Dimension": "Algorithm", "Value": 0.00, "NodeId": "algo-1", "Timestamp": 1733636920.013693}
{"Type": "network", "Name": "TransmitBytesPerSecond", "Dimension": "Algorithm", "Value": 0.00, "NodeId": "algo-1", "Timestamp": 1733636920.013693}
{"Type": "network", "Name": "ReceiveBytesPerSecond", "Dimension": "Platform", "Value": 66775126.66, "NodeId": "algo-1", "Timestamp": 1733636920.013693}
{"Type": "network", "Name": "TransmitBytesPerSecond", "Dimension": "Platform", "Value": 70864.81, "NodeId": "algo-1", "Timestamp": 1733636920.013693}
{"Type": "memory", "Name": "MemoryUsedPercent", "Dimension": "", "Value": 7.32, "NodeId": "algo-1", "Timestamp": 1733636920.508502}
{"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 98.04, "NodeId": "algo-1", "Timestamp": 1733636920.508563}
{"Type": "cpu", "Name": "cpu0", "Dimension": "I/OWaitPercentage", "Value": 3.92, "NodeId": "algo-1", "Timestamp": 1733636920.508563}
{"Type": "i/o", "Name": "IOPS", "Dimension": "", "Value": 5357.94, "NodeId": "algo-1", "Timestamp": 1733636920.508622}
{"Type": "i/o", "Name": "ReadThroughputInBytesPerSecond", "Dimension": "", "Value": 8970700.56, "NodeId": "algo-1", "Timestamp": 1733636920.508622}
{"Type": "gpu", "Name": "gpu0", "Dimension": "GPUUtilization", "Value": 87.00, "NodeId": "algo-1", "Timestamp": 1733636920.513700}
{"Type": "gpu", "Name": "gpu0", "Dimension": "GPUMemoryUtilization", "Value": 41.50, "NodeId": "algo-1", "Timestamp": 1733636920.513700}
"""

PERCENT_DIMENSIONS = {
    "CPUUtilization": "cpu_utilization_ratio",
    "I/OWaitPercentage": "cpu_iowait_ratio",
    "GPUUtilization": "gpu_utilization_ratio",
    "GPUMemoryUtilization": "gpu_memory_used_ratio",  # memory in use (docs/metrics.md)
}
IO_NAMES = {
    "IOPS": "disk_operations_per_second",
    "ReadThroughputInBytesPerSecond": "disk_read_bytes_per_second",
    "WriteThroughputInBytesPerSecond": "disk_write_bytes_per_second",
}
NETWORK_NAMES = {
    "ReceiveBytesPerSecond": "network_receive_bytes_per_second",
    "TransmitBytesPerSecond": "network_transmit_bytes_per_second",
}


def expected_series(e) -> tuple[str, str, bool]:
    """(metric, device, value is percent) for one smdebug ProfilerSystemEvent."""
    if e.dimension in PERCENT_DIMENSIONS:
        return PERCENT_DIMENSIONS[e.dimension], e.name, True
    if e.name == "MemoryUsedPercent":
        return "memory_utilization_ratio", "", True
    if e.type == "i/o":
        return IO_NAMES[e.name], "total", False
    if e.type == "network":
        return NETWORK_NAMES[e.name], e.dimension.lower(), False
    raise AssertionError(f"no documented name for {e.__dict__}")


def as_smdebug_seconds(ns: int) -> float:
    """trainprof's exact ns -> the double smdebug holds: both are the decimal text correctly
    rounded, so they are equal exactly when trainprof kept the text's value."""
    return float(Decimal(ns) / 10**9)


def ratio(percent: float) -> float:
    return float(Decimal(repr(percent)) / 100)


def import_run(src: Path, out: Path) -> trainprof.Run:
    subprocess.run([*trainprof_command(), "import", "smdebug", str(src), "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=120)
    return trainprof.open(str(out))


def smdebug_node(node_id: str, system_hosts: set[str]) -> str:
    """smdebug's framework node id -> trainprof's node (docs/importers.md). smdebug's parser
    itself turns "<n>-algo-N" into "algo-N-<n>"; both are node algo-N. A bare number (the
    process id, as in SageMaker's test_traces) is the job's one instance when its system
    files name exactly one host (smdebug's system reader's node ids)."""
    if re.fullmatch(r"\d+", node_id) and len(system_hosts) == 1:
        return next(iter(system_hosts))
    return re.sub(r"^(algo-\d+)-\d+$", r"\1", re.sub(r"^\d+-", "", node_id))


def one_file_job(tmp_path: Path, src: Path, rel: str) -> Path:
    dest = tmp_path / "job" / rel
    dest.parent.mkdir(parents=True)
    dest.write_bytes(src.read_bytes())
    return tmp_path / "job"


def all_types_job(tmp_path: Path) -> Path:
    dest = tmp_path / "job" / "system" / "incremental" / "2024120805" / "1733636880.algo-1.json"
    dest.parent.mkdir(parents=True)
    dest.write_text(ALL_TYPES)
    return tmp_path / "job"


JOBS = {
    "test_traces": lambda tmp: RES / "test_traces",
    "merge_traces": lambda tmp: RES / "merge_traces",
    "model_timeline_traces": lambda tmp: RES / "model_timeline_traces",
    "horovod_timeline_traces": lambda tmp: RES / "horovod_timeline_traces",
    "tfprofiler_timeline_traces": lambda tmp: RES / "tfprofiler_timeline_traces",
    "single_system_file": lambda tmp: one_file_job(
        tmp, RES / "1591160699.algo-1.json",
        "system/incremental/2020060305/1591160699.algo-1.json"),
    "corrupt_last_line": lambda tmp: one_file_job(
        tmp, RES / "1591160699.algo-1.json.corrupt",
        "system/incremental/2020060305/1591160699.algo-1.json"),
    "every_system_metric_type": all_types_job,
}


@pytest.mark.parametrize("job", sorted(JOBS))
def test_system_metrics_match_smdebugs_reader(job, tmp_path):
    src = JOBS[job](tmp_path)
    run = import_run(src, tmp_path / "run")
    ours = run.system_metrics().to_pandas()
    theirs = (LocalSystemMetricsReader(str(src)).get_events(0, FOREVER_US)
              if (src / "system").exists() else [])
    want = defaultdict(list)
    for e in theirs:
        metric, device, percent = expected_series(e)
        want[(e.node_id, metric, device)].append(
            (e.timestamp, ratio(e.value) if percent else float(e.value)))
    got = defaultdict(list)
    for row in ours.itertuples():
        got[(row.node, row.metric, row.device)].append(
            (as_smdebug_seconds(int(row.timestamp_ns)), float(row.value)))
    assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in want.items()}
    assert sum(map(len, got.values())) == len(theirs)
    if job == "every_system_metric_type":
        assert len(theirs) == ALL_TYPES.count("\n")


@pytest.mark.parametrize("job", sorted(JOBS))
def test_framework_event_counts_per_node_match_smdebugs_reader(job, tmp_path):
    src = JOBS[job](tmp_path)
    run = import_run(src, tmp_path / "run")
    events = run.events().to_pandas()
    # smdebug's framework reader returns X events and B/E pairs; instants ("i") it drops, and
    # cProfile dumps it does not read (those rows are ours only).
    events = events[(events["kind"] == KIND_SPAN)
                    & ~events["category"].isin(["python_profile", "python_function"])]
    theirs = LocalAlgorithmMetricsReader(str(src)).get_events(0, FOREVER_US)
    hosts = ({e.node_id for e in LocalSystemMetricsReader(str(src)).get_events(0, FOREVER_US)}
             if (src / "system").exists() else set())
    want = Counter(smdebug_node(e.node_id, hosts) for e in theirs)
    got = Counter(n.split(".")[0] if "tfprofiler" in job else n for n in events["node"])
    assert got == want
    if job in ("merge_traces", "test_traces", "model_timeline_traces"):
        assert sum(want.values()) > 0


def python_stats_files() -> list[Path]:
    return sorted((RES / "tfprofiler_timeline_traces").rglob("python_stats"))


def test_cprofile_dumps_match_pythons_pstats(tmp_path):
    files = python_stats_files()
    assert len(files) == 3
    run = import_run(RES / "tfprofiler_timeline_traces", tmp_path / "run")
    rows = run.events(categories="python_function").to_pandas()
    spans = run.events(categories="python_profile").to_pandas()
    assert len(spans) == 3
    for path in files:
        start_us, end_us, node_id, step = path.parent.name.split("_")
        end_ns = int(Decimal(end_us) * 1000)
        mine = rows[rows["start_ns"] == end_ns]
        stats = pstats.Stats(str(path)).stats
        top = sorted(stats.items(), key=lambda kv: kv[1][3], reverse=True)[:500]
        assert len(mine) == len(top) == min(500, len(stats)), path
        assert set(mine["node"]) == {"algo-1"} and set(mine["pid"]) == {151}
        by_key = {}
        for args in mine["args"]:
            a = json.loads(args)
            by_key[(a["file"], a["line"], a["function"])] = a
        for (file, line, func), (cc, nc, tt, ct, callers) in top:
            a = by_key[(file, line, func)]
            assert (a["primitive_calls"], a["calls"]) == (cc, nc)
            assert a["total_ns"] == int(tt * 1e9) and a["cumulative_ns"] == int(ct * 1e9)
            assert a["callers"] == len(callers)
            if int(step) >= 0:
                assert a["steps"] == f"{step}-{step}"
            else:
                assert "steps" not in a


# --- A 30-minute single-instance job: billed once, rules join its framework and system data.

JOB_START_S = 1767225600  # 2026-01-01T00:00:00Z
JOB_SECONDS = 1800
INSTANCE = "ml.p4d.24xlarge"


def write_30_minute_job(root: Path) -> None:
    """algo-1's system metrics every 500 ms (8 CPU cores, 8 GPUs at low utilisation), one
    training process (pid 1001) with a step every second and 4 data-loader worker processes,
    the first sample at the job's start and the last event ending at its end."""
    for minute in range(JOB_SECONDS // 60):
        t_min = JOB_START_S + minute * 60
        hour = "2026010100"
        d = root / "system" / "incremental" / hour
        d.mkdir(parents=True, exist_ok=True)
        lines = []
        for tick in range(120 if minute < JOB_SECONDS // 60 - 1 else 121):
            ts = f"{t_min + tick // 2}.{(tick % 2) * 5}"
            for c in range(8):
                lines.append(f'{{"Type": "cpu", "Name": "cpu{c}", "Dimension": "CPUUtilization", '
                             f'"Value": {20 + c + (tick % 7) * 0.25:.2f}, "NodeId": "algo-1", "Timestamp": {ts}}}')
            for g in range(8):
                lines.append(f'{{"Type": "gpu", "Name": "gpu{g}", "Dimension": "GPUUtilization", '
                             f'"Value": {5 + (tick % 3):.2f}, "NodeId": "algo-1", "Timestamp": {ts}}}')
                lines.append(f'{{"Type": "gpu", "Name": "gpu{g}", "Dimension": "GPUMemoryUtilization", '
                             f'"Value": {10 + g:.2f}, "NodeId": "algo-1", "Timestamp": {ts}}}')
            lines.append(f'{{"Type": "memory", "Name": "MemoryUsedPercent", "Dimension": "", '
                         f'"Value": 12.50, "NodeId": "algo-1", "Timestamp": {ts}}}')
        (d / f"{t_min}.algo-1.json").write_text("\n".join(lines) + "\n")
    pe = root / "framework" / "pevents" / "2026010100"
    pe.mkdir(parents=True)
    base_us = JOB_START_S * 1_000_000
    steps = [{"name": "process_name", "ph": "M", "pid": 0,
              "args": {"start_time_since_epoch_in_micros": base_us}},
             {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "Step:ModeKeys.TRAIN"}}]
    for n in range(JOB_SECONDS):
        steps.append({"name": "Step:ModeKeys.TRAIN", "pid": 1, "ph": "X", "ts": n * 1_000_000,
                      "dur": 1_000_000, "args": {"step_num": str(n)}})
    (pe / f"{base_us + JOB_SECONDS * 1_000_000}_1001-algo-1_pythontimeline.json").write_text(
        json.dumps(steps))
    for worker in range(4):
        pid = 2000 + worker
        ev = [{"name": "process_name", "ph": "M", "pid": 0,
               "args": {"start_time_since_epoch_in_micros": base_us}},
              {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "DataLoaderWorker"}}]
        for n in range(0, JOB_SECONDS, 2):
            ev.append({"name": "DataLoaderWorker", "pid": 1, "ph": "X",
                       "ts": n * 1_000_000 + worker * 1000, "dur": 900_000,
                       "args": {"worker_id": worker}})
        (pe / f"{base_us + JOB_SECONDS * 1_000_000}_{pid}-algo-1_model_timeline.json").write_text(
            json.dumps(ev))


def catalog_price(instance: str) -> float:
    with open(REPO / "data" / "catalog" / "instances.csv", newline="") as f:
        for row in csv.DictReader(f):
            if (row.get("service") == "sagemaker-training" and row.get("instance_type") == instance
                    and row.get("region") == "us-east-1"):
                return float(row["price_usd_per_hour"])
    raise AssertionError(f"{instance} not in the catalog")


def test_single_instance_job_is_one_node_billed_once(tmp_path):
    write_30_minute_job(tmp_path / "job")
    out = tmp_path / "run"
    run = import_run(tmp_path / "job", out)
    assert run.nodes == ["algo-1"]
    steps = run.steps().to_pandas()
    assert len(steps) == JOB_SECONDS and set(steps["pid"]) == {1001}
    cost = json.loads(subprocess.run(
        [*trainprof_command(), "cost", str(out), "--instance-type", INSTANCE, "--json"],
        check=True, capture_output=True, text=True, timeout=120).stdout)
    # The invoice by hand: price x 1 instance x 1800 billed seconds (no download/upload phase).
    price = catalog_price(INSTANCE)
    expected = price * 1 * JOB_SECONDS / 3600
    assert abs(expected - 12.63) < 0.005  # the figure the issue quotes
    assert cost["instance_count"] == 1
    assert cost["billed_seconds"] == {"training": JOB_SECONDS}
    assert cost["total_cost_usd"] == pytest.approx(expected, abs=0.005), cost


def test_sagemakers_test_traces_are_one_instance_billed_once(tmp_path):
    # SageMaker's own test_traces job: framework files named by a bare process id (4487),
    # system files by the host (algo-1). One instance: billed once, over the span smdebug's
    # readers give for the job's data (first event or sample to the last, whole seconds).
    src = RES / "test_traces"
    out = tmp_path / "run"
    run = import_run(src, out)
    assert run.nodes == ["algo-1"]
    system = LocalSystemMetricsReader(str(src)).get_events(0, FOREVER_US)
    framework = LocalAlgorithmMetricsReader(str(src)).get_events(0, FOREVER_US)
    assert {e.node_id for e in system} == {"algo-1"} and {e.node_id for e in framework} == {"4487"}
    first = min([e.timestamp for e in system] + [e.start_time / 1e6 for e in framework])
    last = max([e.timestamp for e in system] + [e.end_time / 1e6 for e in framework])
    cost = json.loads(subprocess.run(
        [*trainprof_command(), "cost", str(out), "--instance-type", "ml.p4d.24xlarge", "--json"],
        check=True, capture_output=True, text=True, timeout=120).stdout)
    assert cost["instance_count"] == 1
    billed = cost["billed_instance_seconds"]  # per second, rounded up
    assert billed == math.ceil(last - first)
    expected = catalog_price("ml.p4d.24xlarge") * 1 * billed / 3600
    assert cost["total_cost_usd"] == pytest.approx(expected, rel=1e-9), cost


def test_overall_system_usage_reads_sagemakers_memory_and_io_wait(tmp_path):
    # SageMaker gives host memory only as MemoryUsedPercent and I/O wait only per core: the
    # summary rule shows both (it showed neither), from the values smdebug's reader gives.
    src = all_types_job(tmp_path)
    out = tmp_path / "run"
    import_run(src, out)
    proc = subprocess.run([*trainprof_command(), "rules", str(out), "--json"], check=True,
                          capture_output=True, text=True, timeout=120)
    (usage,) = [r for r in json.loads(proc.stdout)["rules"] if r["name"] == "OverallSystemUsage"]
    theirs = LocalSystemMetricsReader(str(src)).get_events(0, FOREVER_US)
    memory = [e.value for e in theirs if e.name == "MemoryUsedPercent"]
    iowait = defaultdict(list)  # one snapshot per timestamp: the mean of its cores
    for e in theirs:
        if e.dimension == "I/OWaitPercentage":
            iowait[e.timestamp].append(e.value)
    iowait_means = [sum(v) / len(v) for v in iowait.values()]
    assert len(memory) == 3 and len(iowait_means) == 2
    mem = usage["details"]["CPU memory"]["algo-1"]
    assert mem["max"] == pytest.approx(max(memory), abs=1e-9)
    assert mem["min"] == pytest.approx(min(memory), abs=1e-9)
    io = usage["details"]["I/O wait"]["algo-1"]
    assert io["max"] == pytest.approx(round(max(iowait_means), 3), abs=1e-9)
    assert io["min"] == pytest.approx(round(min(iowait_means), 3), abs=1e-9)


def test_report_counts_the_gpus_smdebug_measured(tmp_path):
    # SageMaker's system files give utilisation per GPU but no GPU model: the report's summary
    # said "GPUs 0" beside a mean GPU utilisation.
    src = RES / "test_traces"
    out = tmp_path / "run"
    import_run(src, out)
    gpus = {(e.node_id, e.name) for e in LocalSystemMetricsReader(str(src)).get_events(0, FOREVER_US)
            if e.type == "gpu" and e.dimension == "GPUUtilization"}
    assert gpus
    report = tmp_path / "report.json"
    subprocess.run([*trainprof_command(), "report", str(out), "--out", str(tmp_path / "r.html"),
                    "--json", str(report)], check=True, capture_output=True, timeout=120)
    doc = json.loads(report.read_text())
    assert doc["summary"]["gpus"] == len(gpus)
    (node,) = doc["system"]["nodes"]
    assert len(node["gpus"]) == len(gpus)


def test_report_operators_are_the_tf_profilers_ops(tmp_path):
    # SageMaker's TF detailed profiling: its ops are the report's operators (the section said
    # "no detailed-profiling events" and counted the cProfile rows instead). Read here from
    # the TF trace files themselves: host-track X events by name, durations in us.
    src = RES / "tfprofiler_timeline_traces"
    by_name: Counter = Counter()
    count = 0
    for f in src.rglob("*.trace.json.gz"):
        doc = json.loads(gzip.decompress(f.read_bytes()))
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        hosts = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
                 and not str(e["args"].get("name", "")).startswith("/device:")}
        for e in events:
            if e.get("ph") == "X" and e.get("pid") in hosts:
                by_name[e["name"]] += round(Decimal(str(e["dur"])) * 1000)
                count += 1
    assert count > 0
    out = tmp_path / "run"
    import_run(src, out)
    report = tmp_path / "report.json"
    subprocess.run([*trainprof_command(), "report", str(out), "--out", str(tmp_path / "r.html"),
                    "--json", str(report)], check=True, capture_output=True, timeout=120)
    ops = json.loads(report.read_text())["operators"]
    assert ops["event_count"] == count
    assert ops["cpu_total_ns"] == sum(by_name.values())
    top = {r["name"]: r["total_ns"] for r in ops["cpu"]}
    for name, ns in by_name.most_common(5):
        assert top[name] == ns, name


def test_event_processes_are_smdebugs_on_rank_named_files(tmp_path):
    # Node ids that carry ranks (0-algo-1, 1-algo-1): the events' process is the one their
    # args name, as smdebug's reader says (TraceEvent.pid), not the timeline's lane number
    # (1 for steps, 2 for forward passes).
    src = RES / "merge_traces" / "framework/pevents/2020071317" / \
        "1594662624718694_905-b88ab1bb8259_pythontimeline.json"
    job = tmp_path / "job" / "framework/pevents/2020071317"
    job.mkdir(parents=True)
    for rank in (0, 1):
        (job / f"1594662624718694_{rank}-algo-1_pythontimeline.json").write_bytes(
            src.read_bytes())
    run = import_run(tmp_path / "job", tmp_path / "run")
    events = run.events().to_pandas()
    events = events[events["kind"] == KIND_SPAN]
    theirs = LocalAlgorithmMetricsReader(str(tmp_path / "job")).get_events(0, FOREVER_US)
    assert len(theirs) == len(events) > 0
    assert Counter(int(e.pid) for e in theirs) == Counter(int(p) for p in events["pid"])
    assert set(events["rank"]) == {0, 1}


def test_rules_joining_framework_and_system_data_find_datapoints(tmp_path):
    write_30_minute_job(tmp_path / "job")
    out = tmp_path / "run"
    import_run(tmp_path / "job", out)
    rules = json.loads(subprocess.run(
        [*trainprof_command(), "rules", str(out), "--json"],
        check=True, capture_output=True, text=True, timeout=120).stdout)
    by_name = {r["name"]: r for r in rules["rules"]}
    # Dataloader: loader processes (4 worker pids) against the node's cores (8, from the system
    # data); LowGPUUtilization and BatchSize: GPU and GPU-memory series of the same node.
    for name in ("Dataloader", "LowGPUUtilization", "BatchSize"):
        assert by_name[name]["datapoints"] > 0, by_name[name]
