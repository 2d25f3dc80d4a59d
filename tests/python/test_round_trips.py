"""Round trips and today's PyTorch (issue 16): what trainprof writes in another format and reads
back is what it had, and a trace written by the installed torch.profiler imports with the
operator and step counts the profiler itself reports.

- record (a short real torch job) -> `export smdebug` -> `import smdebug`: the same system
  metric samples per node, metric and device (those smdebug has: CPU per core, GPUs) and the same
  framework events;
- record -> `export chrome-trace` -> `import kineto`: the same events (names, categories, kinds,
  times to the nanosecond, counts);
- torch.profiler (CPU) -> `import kineto`: operator counts per name equal prof.key_averages(),
  ProfilerStep spans and steps equal the steps the schedule made active; the Chrome trace that
  trainprof exports from it (and from a real GPU trace with 64 663 flow events) passes an
  independent reader of the Trace Event Format (chrome_trace_check.py) with the slice and flow
  counts of the source trace.

Both runs of a round trip are read with `trainprof export csv`; the expectations (which metrics
smdebug has, the step numbers a schedule activates, counts in the source trace) come from the
test, the profiler or the source file, never from trainprof.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import subprocess
import sys
import textwrap
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

import chrome_trace_check
from conftest import SHARED_DATA, trainprof_command

TRAIN = textwrap.dedent("""
    import time
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(torch.randn(384, 64), torch.randint(0, 10, (384,)))
    loader = torch.utils.data.DataLoader(data, batch_size=32)
    for epoch in range(2):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            time.sleep(0.03)
""")

# torch.profiler on CPU with a schedule: wait 1, warmup 1, active 3 -> steps 2, 3, 4 recorded.
PROFILE = textwrap.dedent("""
    import json, sys
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(8 * 14 * 14, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 3, 16, 16), torch.randint(0, 10, (16,))
    out = sys.argv[1]
    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(out + "/trace.json")) as prof:
        for _ in range(6):
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
    json.dump({"counts": {e.key: e.count for e in prof.key_averages()},
               "torch": torch.__version__}, open(out + "/profiler.json", "w"))
""")
ACTIVE_STEPS = [2, 3, 4]  # wait=1 + warmup=1 come first, then active=3

# What smdebug's system metrics hold (CPU per core, GPU per device), in trainprof's names.
SMDEBUG_SERIES = {
    "cpu_utilization_ratio": re.compile(r"cpu\d+$"),
    "cpu_iowait_ratio": re.compile(r"cpu\d+$"),
    "gpu_utilization_ratio": re.compile(r"gpu\d+$"),
    "gpu_memory_used_ratio": re.compile(r"gpu\d+$"),
    "memory_utilization_ratio": re.compile(r"^$"),
}


def cli(*args, timeout=300) -> str:
    proc = subprocess.run([*trainprof_command(), *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"trainprof {args}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


def read_run(run: Path, out: Path):
    cli("export", "csv", run, "--out", out)
    with open(out / "system_metrics.csv", newline="") as f:
        metrics = list(csv.DictReader(f))
    with open(out / "events.csv", newline="") as f:
        events = list(csv.DictReader(f))
    with open(out / "findings.csv", newline="") as f:
        findings = list(csv.DictReader(f))
    return metrics, events, findings


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    pytest.importorskip("torch")
    tmp = tmp_path_factory.mktemp("roundtrip")
    script = tmp / "train.py"
    script.write_text(TRAIN)
    run = tmp / "run"
    cli("record", "--out", run, "--interval", "100ms", "--no-gpu", "--", sys.executable, script)
    metrics, events, findings = read_run(run, tmp / "csv")
    steps = [e for e in events if e["category"] == "step"]
    assert len(steps) == 24, "the job's 2 x 12 optimizer steps were recorded"
    return tmp, run, metrics, events, findings


def test_record_export_smdebug_import_smdebug_gives_the_same_values(recorded):
    tmp, run, metrics, events, _ = recorded
    printed = cli("export", "smdebug", run, "--out", tmp / "smdebug")
    nodes = dict(re.findall(r"node (\S+) -> (algo-\d+)", printed))
    assert set(nodes) == {m["node"] for m in metrics}, printed
    cli("import", "smdebug", tmp / "smdebug", "--out", tmp / "from-smdebug")
    metrics2, events2, _ = read_run(tmp / "from-smdebug", tmp / "csv-smdebug")

    expected = {(nodes[m["node"]], m["metric"], m["device"], int(m["timestamp_ns"])):
                float(m["value"]) for m in metrics
                if m["metric"] in SMDEBUG_SERIES and SMDEBUG_SERIES[m["metric"]].match(m["device"])}
    got = {(m["node"], m["metric"], m["device"], int(m["timestamp_ns"])): float(m["value"])
           for m in metrics2}
    assert Counter(k[:3] for k in expected), "the recording holds per-core CPU samples"
    # Per node, metric and device: the same series with the same number of samples...
    assert Counter(k[:3] for k in got) == Counter(k[:3] for k in expected)
    # ...at the same nanosecond, with the same value (x100 into percent and back).
    assert set(got) == set(expected)
    for k, v in expected.items():
        assert got[k] == pytest.approx(v, rel=1e-12, abs=1e-15), k

    # Framework events: the same ones, each on its node and process, with its step and mode.
    def key(e, node):
        return (node, e["pid"], e["name"], e["category"], e["mode"], e["step"], e["kind"],
                int(e["start_ns"]), int(e["duration_ns"]))
    before = Counter(key(e, nodes[e["node"]]) for e in events)
    after = Counter(key(e, e["node"]) for e in events2)
    assert after == before


def test_record_export_chrome_trace_import_kineto_gives_the_same_events(recorded):
    tmp, run, _, events, findings = recorded
    trace = tmp / "trace.json.gz"
    cli("export", "chrome-trace", run, "--out", trace)
    cli("import", "kineto", trace, "--out", tmp / "from-trace")
    _, events2, _ = read_run(tmp / "from-trace", tmp / "csv-trace")

    def key(e):
        return (e["pid"], e["name"], e["category"], e["kind"], int(e["start_ns"]),
                int(e["duration_ns"]))
    back = [e for e in events2 if e["category"] != "finding"]
    assert Counter(key(e) for e in back) == Counter(key(e) for e in events)
    assert sum(e["category"] == "finding" for e in events2) == len(findings)
    # Step and mode travel in args (a Kineto trace has no columns for them).
    by_key = {key(e): e for e in back}
    for e in events:
        if e["step"]:
            args = json.loads(by_key[key(e)]["args"])
            assert args["step"] == int(e["step"]) and args["mode"] == e["mode"], e
    # ...and come back as the steps' numbers and modes.
    def step_key(e):
        return (e["step"], e["mode"], int(e["start_ns"]), int(e["duration_ns"]))
    assert (sorted(step_key(e) for e in back if e["category"] == "step")
            == sorted(step_key(e) for e in events if e["category"] == "step"))


def _profiler_steps(trace: dict) -> list[tuple[int, int]]:
    """(number, start in us) of each ProfilerStep#N on the CPU side, read from the JSON (2021
    traces call the CPU side "Operator")."""
    out = []
    for e in trace["traceEvents"]:
        m = re.fullmatch(r"ProfilerStep#(\d+)", str(e.get("name", "")))
        if m and e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation", "Operator"):
            out.append((int(m.group(1)), Decimal(str(e["ts"]))))
    return sorted(out)


@pytest.mark.parametrize("trace", [
    "HolisticTraceAnalysis/tests/data/ns_resolution_trace/"
    "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
])
def test_imported_trace_exported_and_imported_again_keeps_its_steps(trace, tmp_path):
    # import kineto -> export chrome-trace -> import kineto: the export carries each
    # ProfilerStep#N and the step span derived from it; the second import stores each step
    # once, with its number (it stored both, the second without a number).
    source = SHARED_DATA / "traces" / trace
    want = _profiler_steps(_load(source))
    assert want, "the trace has ProfilerStep#N spans"
    cli("import", "kineto", source, "--out", tmp_path / "first")
    cli("export", "chrome-trace", tmp_path / "first", "--out", tmp_path / "export.json.gz")
    again = json.loads(cli("import", "kineto", tmp_path / "export.json.gz", "--out",
                           tmp_path / "second", "--json"))
    assert again["files"][0]["steps"] == len(want)
    cli("export", "csv", tmp_path / "first", "--out", tmp_path / "csv1")
    cli("export", "csv", tmp_path / "second", "--out", tmp_path / "csv2")
    rows = []
    for d in ("csv1", "csv2"):
        with open(tmp_path / d / "steps.csv", newline="") as f:
            rows.append(sorted((int(r["step"]), r["mode"], r["start_ns"], r["duration_ns"])
                               for r in csv.DictReader(f)))
    assert rows[1] == rows[0]
    assert [r[0] for r in rows[1]] == [n for n, _ in want]
    (rank,) = json.loads(cli("analyze", tmp_path / "second", "--json"))["ranks"]
    assert rank["steps_total"] == len(want)
    assert [s["step"] for s in rank["steps"]] == [n for n, _ in want]
    assert all("start_ns" in s for s in rank["steps"])


@pytest.fixture(scope="module")
def torch_profile(tmp_path_factory):
    pytest.importorskip("torch")
    tmp = tmp_path_factory.mktemp("torchprof")
    script = tmp / "torch_profile_job.py"
    script.write_text(PROFILE)
    proc = subprocess.run([sys.executable, str(script), str(tmp)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return tmp, json.loads((tmp / "profiler.json").read_text())


def test_todays_torch_profiler_trace_imports_with_the_profilers_counts(torch_profile):
    tmp, profiler = torch_profile
    summary = json.loads(cli("import", "kineto", tmp / "trace.json", "--out", tmp / "run",
                             "--json"))
    assert summary["files"][0]["steps"] == len(ACTIVE_STEPS)
    _, events, _ = read_run(tmp / "run", tmp / "csv")
    # key_averages() groups ProfilerStep#N under "ProfilerStep*"; every other key is an
    # operator or a record_function range, counted once per call.
    counts = Counter()
    for e in events:
        if e["category"] in ("cpu_op", "user_annotation"):
            counts[re.sub(r"^ProfilerStep#\d+$", "ProfilerStep*", e["name"])] += 1
    assert counts == Counter(profiler["counts"]), profiler["torch"]
    assert counts["ProfilerStep*"] == len(ACTIVE_STEPS)
    with open(tmp / "csv" / "steps.csv", newline="") as f:
        steps = sorted(int(s["step"]) for s in csv.DictReader(f))
    assert steps == ACTIVE_STEPS


def _load(path: Path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def test_exported_torch_trace_loads_in_an_independent_reader(torch_profile):
    tmp, _ = torch_profile
    source = _load(tmp / "trace.json")
    cli("import", "kineto", tmp / "trace.json", "--out", tmp / "run-export")
    cli("export", "chrome-trace", tmp / "run-export", "--out", tmp / "export.json")
    original = chrome_trace_check.check(source)
    exported = chrome_trace_check.check(_load(tmp / "export.json"))
    flows_in_source = sum(e.get("ph") == "s" for e in source["traceEvents"])
    assert flows_in_source > 0  # torch's fwdbwd arrows, forward op -> its backward
    assert original.flows == flows_in_source
    assert exported.flows == flows_in_source
    assert exported.unbound_flow_ends == exported.unmatched_flow_ends == 0
    # Every slice of the source, plus one step span per ProfilerStep#N.
    assert exported.slices == original.slices + len(ACTIVE_STEPS)
    assert exported.slice_names - original.slice_names == Counter({"step": len(ACTIVE_STEPS)})
    cpu_names = {e["args"]["name"] for e in source["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert cpu_names <= set(exported.process_names.values())


def test_exported_gpu_trace_keeps_flows_and_device_names_in_an_independent_reader(tmp_path):
    trace = (SHARED_DATA / "traces" / "HolisticTraceAnalysis" / "tests" / "data" /
             "df_index_resolver" / "df_index_resolver.json.gz")
    if not trace.exists():
        pytest.fail(f"shared data not found at {trace}")
    original = chrome_trace_check.check(_load(trace))
    assert original.flows == 22290 and original.unmatched_flow_ends == 20083
    cli("import", "kineto", trace, "--out", tmp_path / "run")
    cli("export", "chrome-trace", tmp_path / "run", "--out", tmp_path / "export.json.gz")
    exported = chrome_trace_check.check(_load(tmp_path / "export.json.gz"))
    assert exported.flows == original.flows
    assert exported.unmatched_flow_ends == original.unmatched_flow_ends
    assert exported.unbound_flow_ends == 0
    assert exported.slices == original.slices + 5  # + the derived step spans
    assert exported.slice_names - original.slice_names == Counter({"step": 5})
    assert "GPU 1" in exported.process_names.values()
    assert {"stream 7 ", "stream 14 "} <= set(exported.thread_names.values())


def test_exported_2021_trace_keeps_its_stream_names(tmp_path):
    # 2021 tb_plugin traces write a GPU event's tid as text, "stream 7", and no thread_name for
    # it: the export named that track "tid 7".
    trace = (SHARED_DATA / "traces" / "kineto" / "tb_plugin" / "samples" /
             "resnet50_num_workers_0" / "worker0.1623143089861.pt.trace.json.gz")
    source = _load(trace)
    streams = {e["tid"] for e in source["traceEvents"]
               if isinstance(e.get("tid"), str) and e["tid"].startswith("stream ")}
    assert streams
    cli("import", "kineto", trace, "--out", tmp_path / "run")
    cli("export", "chrome-trace", tmp_path / "run", "--out", tmp_path / "export.json.gz")
    exported = chrome_trace_check.check(_load(tmp_path / "export.json.gz"))
    assert streams <= set(exported.thread_names.values()), exported.thread_names


def test_global_instants_stay_global(tmp_path):
    # The profiler's "Iteration Start" / "Record Window End" are global instants ("s": "g"):
    # they mark the whole trace. The export wrote them thread-scoped on a made-up thread.
    trace = (SHARED_DATA / "traces" / "kineto" / "tb_plugin" / "samples" /
             "resnet50_num_workers_0" / "worker0.1623143089861.pt.trace.json.gz")

    def global_instants(doc):
        return sorted((e["name"], Decimal(str(e["ts"]))) for e in doc["traceEvents"]
                      if e.get("ph") in ("i", "I") and e.get("s") == "g")
    want = global_instants(_load(trace))
    assert len(want) == 2
    cli("import", "kineto", trace, "--out", tmp_path / "run")
    cli("export", "chrome-trace", tmp_path / "run", "--out", tmp_path / "export.json.gz")
    got = global_instants(_load(tmp_path / "export.json.gz"))
    assert [n for n, _ in got] == [n for n, _ in want]
    # The same instants in time: the export's timestamps are absolute (the trace's base added),
    # so their spacing is compared.
    assert got[1][1] - got[0][1] == want[1][1] - want[0][1]
