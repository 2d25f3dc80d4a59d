"""Custom rules in Python: the base class (trainprof.rules), the runner
(python -m trainprof.rules_runner) and the CLI that merges them with the built-in rules
(`trainprof rules RUN --custom FILE`, `trainprof record --custom-rule FILE`)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import trainprof
from trainprof import rules_runner
from trainprof.rules import Finding, Rule, RuleError, run_rule

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "custom_rule.py"
T0 = 1_700_000_000_000_000_000
MS = 1_000_000
FINDING_KEYS = {"severity", "node", "device", "start_ns", "end_ns", "message", "recommendation",
                "evidence"}
# `trainprof rules --json` adds each finding's cost impact (null with the reason when unpriced).
CLI_FINDING_KEYS = FINDING_KEYS | {"cost_usd", "cost_basis"}
ENTRY_KEYS = {"name", "triggered", "violations", "datapoints", "parameters", "findings",
              "details"}


def write_run(path, slow_steps=(3, 7), busy=True):
    """20 steps of 100 ms (the `slow_steps` take 900 ms), each waiting 50 ms for data, and a
    CPU that is 95 % busy (or 20 %)."""
    w = trainprof.RunWriter(path, node="algo-1", name="unit", command=["python", "train.py"],
                            start_ns=T0)
    t = T0
    for s in range(20):
        d = (900 if s in slow_steps else 100) * MS
        w.append_event("step", "step", t, d, mode="train", step=s, pid=10, rank=0)
        w.append_event("data_wait", "data_wait", t, 50 * MS, mode="train", step=s, pid=10, rank=0)
        t += d
    ts = T0 + np.arange(0, (t - T0) // (500 * MS), dtype=np.int64) * 500 * MS
    w.append_metric("cpu_utilization_ratio", "total", ts, np.full(len(ts), 0.95 if busy else 0.2))
    w.close(end_ns=t, exit_status=0)
    return path


def write_rule_file(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


# -- the base class ------------------------------------------------------------------------


class StepCount(Rule):
    description = "counts steps"
    parameters = {"min_steps": 10}

    def evaluate(self, run):
        n = len(run.steps())
        self.datapoints = n
        if n >= self.params["min_steps"]:
            yield self.finding(f"{n} steps", node="algo-1", start_ns=T0, end_ns=T0 + 1,
                               evidence={"steps": np.int64(n)})


def test_rule_parameters_defaults_and_overrides():
    assert StepCount().params == {"min_steps": 10}
    assert StepCount(min_steps=3).params == {"min_steps": 3}
    with pytest.raises(RuleError, match=r"StepCount: unknown parameter\(s\) nope.*min_steps"):
        StepCount(nope=1)
    assert StepCount.rule_name() == "StepCount"

    class Named(Rule):
        name = "MyName"

    assert Named.rule_name() == "MyName"


def test_run_rule_returns_an_entry_like_the_builtin_rules(tmp_path):
    run = trainprof.open(write_run(tmp_path / "r"))
    entry = run_rule(StepCount(), run)
    assert set(entry) == ENTRY_KEYS
    assert entry["name"] == "StepCount" and entry["triggered"] is True
    assert entry["violations"] == 1 and entry["datapoints"] == 20
    assert entry["parameters"] == {"min_steps": 10}
    [f] = entry["findings"]
    assert set(f) == FINDING_KEYS
    assert f["message"] == "20 steps" and f["evidence"] == {"steps": 20}  # NumPy made plain
    json.dumps(entry)  # serialisable as is

    quiet = run_rule(StepCount(min_steps=21), run)
    assert quiet["triggered"] is False and quiet["findings"] == [] and quiet["datapoints"] == 20


def test_finding_is_the_readers_finding_type():
    f = StepCount().finding("m", severity="critical", node="n", device="gpu0", start_ns=5,
                            end_ns=9, recommendation="r", evidence={"x": 1})
    assert isinstance(f, Finding) and f.rule == "StepCount"
    assert Finding is trainprof._reader.Finding  # what run.findings() returns


@pytest.mark.parametrize("bad, message", [
    ("return [42]", "returned int, not a trainprof.rules.Finding"),
    ("return [self.finding('m', severity='fatal')]", "severity 'fatal' is not one of"),
    ("return [self.finding('m', start_ns=10, end_ns=5)]", "end_ns 5 is before start_ns 10"),
    ("return [self.finding('m', evidence={'f': object()})]", "not JSON-serialisable"),
])
def test_bad_findings_are_rejected_with_the_reason(tmp_path, bad, message):
    class Bad(Rule):
        def evaluate(self, run):
            return eval(bad.removeprefix("return "))  # noqa: S307 - test input

    run = trainprof.open(write_run(tmp_path / "r"))
    with pytest.raises(RuleError, match=message):
        run_rule(Bad(), run)


# -- the runner -----------------------------------------------------------------------------


def test_example_rules_fire_on_the_planted_problems(tmp_path):
    run_dir = write_run(tmp_path / "r")
    result = rules_runner.evaluate(str(run_dir), [str(EXAMPLE)], {})
    assert result["errors"] == []
    by_name = {e["name"]: e for e in result["rules"]}
    assert list(by_name) == ["SlowSteps", "BusyCpuWhileWaiting", "LongDataWaits"]  # in order
    slow = by_name["SlowSteps"]
    assert slow["triggered"] and slow["violations"] == 2 and slow["datapoints"] == 20
    [f] = slow["findings"]
    assert f["evidence"]["slow_steps"] == [3, 7]
    assert f["evidence"]["slowest_step_ms"] == pytest.approx(900)
    assert f["start_ns"] == T0 + 3 * 100 * MS  # the first slow step starts after three steps
    busy = by_name["BusyCpuWhileWaiting"]
    # 20 steps wait 50 ms each of 3.6 s in all: 28 % < 30 %, below the default share.
    assert not busy["triggered"] and busy["findings"] == []
    # The incremental rule, given the whole run at once: 20 waits of 50 ms, fired at the 10th.
    waits = by_name["LongDataWaits"]
    assert waits["triggered"] and waits["datapoints"] == 20
    [f] = waits["findings"]
    assert f["evidence"] == {"long_waits": 10, "longest_wait_ms": 50.0, "pid": 10}

    lowered = rules_runner.evaluate(str(run_dir), [str(EXAMPLE)],
                                    {"BusyCpuWhileWaiting": {"wait_share": 0.2},
                                     "SlowSteps": {"max_step_ms": 1000}})
    by_name = {e["name"]: e for e in lowered["rules"]}
    assert not by_name["SlowSteps"]["triggered"]
    [f] = by_name["BusyCpuWhileWaiting"]["findings"]
    assert f["evidence"]["data_wait_share"] == pytest.approx(1000 / 3600)
    assert f["evidence"]["mean_cpu_utilization"] == pytest.approx(0.95)

    idle = rules_runner.evaluate(str(write_run(tmp_path / "idle", busy=False)), [str(EXAMPLE)],
                                 {"BusyCpuWhileWaiting": {"wait_share": 0.2}})
    assert not {e["name"]: e for e in idle["rules"]}["BusyCpuWhileWaiting"]["triggered"]


def test_a_rule_that_raises_is_reported_and_the_others_still_run(tmp_path):
    rules = write_rule_file(tmp_path, "mixed.py", """
        from trainprof.rules import Rule

        class Broken(Rule):
            def evaluate(self, run):
                return {}["missing"]

        class Fine(Rule):
            def evaluate(self, run):
                print("a rule may print")  # goes to stderr, not into the JSON
                import os
                os.write(1, b"even to fd 1\\n")
                return [self.finding("fine", node="algo-1")]

        class Exits(Rule):
            def evaluate(self, run):
                raise SystemExit(7)
    """)
    syntax = write_rule_file(tmp_path, "syntax.py", "class Nope(:\n")
    empty = write_rule_file(tmp_path, "empty.py", "x = 1\n")
    run_dir = write_run(tmp_path / "r")
    proc = subprocess.run([sys.executable, "-m", "trainprof.rules_runner", str(run_dir),
                           "--custom", str(rules), "--custom", str(syntax), "--custom",
                           str(empty), "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert [e["name"] for e in out["rules"]] == ["Fine"]
    assert "a rule may print" in proc.stderr and "even to fd 1" in proc.stderr
    errors = {(Path(e["file"]).name, e["rule"]): e["error"] for e in out["errors"]}
    assert errors[("mixed.py", "Broken")].startswith("KeyError: 'missing' (line 6, in evaluate)")
    assert errors[("mixed.py", "Exits")] == "SystemExit: 7 (line 17, in evaluate)"
    assert errors[("syntax.py", None)].startswith("cannot load the file: SyntaxError")
    assert errors[("empty.py", None)] == "defines no subclass of trainprof.rules.Rule"


def test_runner_usage_errors(tmp_path):
    run_dir = write_run(tmp_path / "r")
    proc = subprocess.run([sys.executable, "-m", "trainprof.rules_runner", str(run_dir),
                           "--custom", str(EXAMPLE), "--rule", "Other.x=1", "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "no custom rule named Other (custom rules: SlowSteps, BusyCpuWhileWaiting, LongDataWaits)" in \
        proc.stderr
    proc = subprocess.run([sys.executable, "-m", "trainprof.rules_runner", str(run_dir),
                           "--custom", str(EXAMPLE), "--rule", "SlowSteps.nope=1", "--json"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    [err] = json.loads(proc.stdout)["errors"]
    assert err["rule"] == "SlowSteps" and "unknown parameter(s) nope" in err["error"]


# -- the CLI ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _python_for_the_cli(monkeypatch):
    # The interpreter the CLI runs custom rules with (the console script sets this too).
    monkeypatch.setenv("TRAINPROF_PYTHON", sys.executable)


def test_cli_rules_merges_custom_rules_into_the_json(tmp_path, trainprof_cli):
    run_dir = write_run(tmp_path / "r")
    proc = subprocess.run([*trainprof_cli, "rules", str(run_dir), "--custom", str(EXAMPLE),
                           "--rule", "SlowSteps.max_step_ms=50", "--rule",
                           "StepOutlier.stddev=2", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    names = [e["name"] for e in out["rules"]]
    assert "LowGPUUtilization" in names and "StepOutlier" in names  # the built-ins
    assert names[-3:] == ["SlowSteps", "BusyCpuWhileWaiting", "LongDataWaits"]  # after them
    for e in out["rules"]:
        assert set(e) == ENTRY_KEYS, e["name"]
        for f in e["findings"]:
            assert set(f) == CLI_FINDING_KEYS
    by_name = {e["name"]: e for e in out["rules"]}
    assert by_name["StepOutlier"]["parameters"]["stddev"] == 2  # built-in override still works
    slow = by_name["SlowSteps"]
    assert slow["parameters"]["max_step_ms"] == 50 and slow["violations"] == 20
    assert slow["findings"][0]["evidence"]["slow_steps"] == list(range(20))
    assert "custom_rule_errors" not in out

    text = subprocess.run([*trainprof_cli, "rules", str(run_dir), "--custom", str(EXAMPLE)],
                          capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stderr
    assert "SlowSteps" in text.stdout and "2 of 20 steps on algo-1 took longer" in text.stdout


def test_cli_rules_reports_a_failing_custom_rule_and_still_prints_the_builtins(
        tmp_path, trainprof_cli):
    rules = write_rule_file(tmp_path, "broken.py", """
        from trainprof.rules import Rule

        class Raises(Rule):
            def evaluate(self, run):
                raise RuntimeError("rule bug")

        class Works(Rule):
            def evaluate(self, run):
                self.datapoints = len(run.steps())
                return [self.finding("ok", node="algo-1", evidence={"n": self.datapoints})]
    """)
    run_dir = write_run(tmp_path / "r")
    proc = subprocess.run([*trainprof_cli, "rules", str(run_dir), "--custom", str(rules),
                           "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    out = json.loads(proc.stdout)
    names = [e["name"] for e in out["rules"]]
    assert "LowGPUUtilization" in names and names[-1] == "Works"
    assert "Raises" not in names
    [err] = out["custom_rule_errors"]
    assert "rule Raises in" in err and "broken.py: RuntimeError: rule bug (line 6" in err
    assert "RuntimeError: rule bug" in proc.stderr

    # A custom rule may not take a built-in rule's name.
    clash = write_rule_file(tmp_path, "clash.py", """
        from trainprof.rules import Rule

        class StepOutlier(Rule):
            def evaluate(self, run):
                return []
    """)
    proc = subprocess.run([*trainprof_cli, "rules", str(run_dir), "--custom", str(clash),
                           "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "custom rule StepOutlier: a built-in rule has that name" in proc.stderr


def test_record_custom_rule_stores_findings(tmp_path, trainprof_cli):
    rule = write_rule_file(tmp_path, "rss_rule.py", """
        from trainprof.rules import Rule

        class TreeMemoryAbove(Rule):
            parameters = {"limit_mb": 50}

            def evaluate(self, run):
                rss = run.system_metrics(metrics="process_resident_memory_bytes",
                                         devices="tree")
                self.datapoints = len(rss)
                if not len(rss):
                    return
                peak = float(rss.column("value").max())
                if peak > self.params["limit_mb"] * 1e6:
                    ts = rss.column("timestamp_ns")
                    yield self.finding(f"the job used {peak / 1e6:.0f} MB",
                                       node=str(rss.column("node")[0]),
                                       start_ns=int(ts.min()), end_ns=int(ts.max()),
                                       recommendation="check what holds the memory",
                                       evidence={"peak_bytes": peak})

        class AlwaysBroken(Rule):
            def evaluate(self, run):
                raise ValueError("broken on purpose")
    """)
    run_dir = tmp_path / "run"
    job = "import time; x = bytearray(200 * 1024 * 1024); time.sleep(1.5); raise SystemExit(3)"
    proc = subprocess.run([*trainprof_cli, "record", "--out", str(run_dir), "--interval",
                           "100ms", "--no-gpu", "--custom-rule", str(rule), "--", sys.executable,
                           "-c", job], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr  # the job's exit status, custom rules or not
    assert "rule TreeMemoryAbove fired" in proc.stderr
    assert "warning: custom rule AlwaysBroken in" in proc.stderr
    assert "ValueError: broken on purpose" in proc.stderr

    stored = [f for f in trainprof.open(run_dir).findings() if f.rule == "TreeMemoryAbove"]
    assert len(stored) == 1 and stored[0].evidence["peak_bytes"] > 200e6

    out = subprocess.run([*trainprof_cli, "rules", str(run_dir), "--json"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    by_name = {e["name"]: e for e in json.loads(out.stdout)["rules"]}
    entry = by_name["TreeMemoryAbove"]
    assert entry["triggered"] and entry["details"]["source"] == "findings stored in the run"
    [f] = entry["findings"]
    assert set(f) == CLI_FINDING_KEYS and f["evidence"]["peak_bytes"] > 200e6
    assert "AlwaysBroken" not in by_name

    report = json.loads((run_dir / "report.json").read_text())
    assert "TreeMemoryAbove" in json.dumps(report)


def test_record_with_a_missing_interpreter_warns_and_keeps_the_exit_status(tmp_path,
                                                                           trainprof_cli):
    proc = subprocess.run([*trainprof_cli, "record", "--out", str(tmp_path / "run"), "--no-gpu",
                           "--custom-rule", str(EXAMPLE), "--python", "/nonexistent/python3",
                           "--", sys.executable, "-c", "raise SystemExit(4)"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4, proc.stderr
    assert "warning: custom rules not evaluated: cannot run the Python interpreter " \
           "'/nonexistent/python3'" in proc.stderr


def test_cli_rules_store_writes_custom_findings_once(tmp_path, trainprof_cli):
    run_dir = write_run(tmp_path / "r")
    cmd = [*trainprof_cli, "rules", str(run_dir), "--custom", str(EXAMPLE), "--store", "--json"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    stored = [f for f in trainprof.open(run_dir).findings() if f.rule == "SlowSteps"]
    assert len(stored) == 1 and stored[0].evidence["slow_steps"] == [3, 7]
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert json.loads(again.stdout)["stored_findings"] == 0  # already there
    # Evaluated again with --custom: one fresh entry, not the stored one beside it.
    names = [e["name"] for e in json.loads(again.stdout)["rules"]]
    assert names.count("SlowSteps") == 1
    assert {e["name"]: e for e in json.loads(again.stdout)["rules"]}["SlowSteps"]["details"] == {}


# -- live (incremental) custom rules ---------------------------------------------------------


def test_update_rule_live_gives_its_findings_as_they_come_and_the_offline_ones(tmp_path):
    """The runner's --live loop, driven as `record` drives it: each poll sees only what the run
    gained, each finding comes once, and the end equals one offline evaluation."""
    import io

    run_dir = tmp_path / "live"
    w = trainprof.RunWriter(run_dir, node="algo-1", name="live", start_ns=T0)

    def waits(first_step, n, wait_ms):
        for s in range(first_step, first_step + n):
            t = T0 + s * 100 * MS
            w.append_event("data_wait", "data_wait", t, wait_ms * MS, mode="train", step=s,
                           pid=10, rank=0)
        w.flush()

    waits(0, 6, 30)  # 6 long waits: below min_waits=10
    out = io.StringIO()
    replies = []

    def commands():
        yield "poll\n"
        replies.append(out.getvalue())
        waits(6, 5, 30)  # 11 long waits: the finding
        yield "poll\n"
        replies.append(out.getvalue())
        waits(11, 3, 5)  # short waits: nothing new
        yield "poll\n"
        w.close(end_ns=T0 + 14 * 100 * MS, exit_status=0)

    rules_runner.live(str(run_dir), [str(EXAMPLE)], {}, commands(), out)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [bool(x.get("final")) for x in lines] == [False, False, False, False, True]
    found = [[f["rule"] for f in x["findings"]] for x in lines[:4]]
    assert found == [[], ["LongDataWaits"], [], []]  # once, at the poll that saw it
    live_finding = lines[1]["findings"][0]
    assert live_finding["evidence"] == {"long_waits": 10, "longest_wait_ms": 30.0, "pid": 10}
    assert live_finding["start_ns"] == T0 and live_finding["end_ns"] == T0 + 9 * 100 * MS + 30 * MS
    assert len(replies) == 2 and replies[0].count("\n") == 1  # answered before the next write

    final = lines[-1]
    by_name = {e["name"]: e for e in final["rules"]}
    # Rules that only evaluate() ran at the end, over the whole run; the incremental one's
    # entry holds what it found live.
    assert set(by_name) == {"SlowSteps", "BusyCpuWhileWaiting", "LongDataWaits"}
    assert by_name["LongDataWaits"]["findings"] == [
        {k: v for k, v in live_finding.items() if k != "rule"}]
    assert by_name["LongDataWaits"]["datapoints"] == 14

    offline = rules_runner.evaluate(str(run_dir), [str(EXAMPLE)], {})
    assert {e["name"]: e for e in offline["rules"]}["LongDataWaits"] == by_name["LongDataWaits"]


def test_update_rule_that_raises_live_is_reported_once_and_stops_being_called(tmp_path):
    import io

    rule = write_rule_file(tmp_path, "flaky.py", """
        from trainprof.rules import Rule

        class Flaky(Rule):
            def update(self, run, new):
                self.datapoints += 1
                if self.datapoints == 2:
                    raise RuntimeError("second poll fails")
                return []
    """)
    run_dir = write_run(tmp_path / "r")
    out = io.StringIO()
    rules_runner.live(str(run_dir), [str(rule)], {}, iter(["poll\n"] * 4), out)
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    errors = [e for x in lines[:-1] for e in x["errors"]]
    assert len(errors) == 1 and "RuntimeError: second poll fails" in errors[0]["error"]
    assert errors[0]["rule"] == "Flaky"
    assert lines[-1]["final"] and lines[-1]["rules"] == [] and len(lines[-1]["errors"]) == 1


def test_record_evaluates_an_update_rule_live_and_runs_its_actions(tmp_path, trainprof_cli):
    """`record --custom-rule` with an incremental rule: the finding is stored while the job
    runs, its configured actions run (a command gets the finding as JSON; stop ends the job),
    and listing only the custom rule in the configuration evaluates no built-in rule."""
    got = tmp_path / "finding.json"
    config = tmp_path / "rules.json"
    config.write_text(json.dumps({"rules": {"LongDataWaits": {
        "parameters": {"min_waits": 15},
        "actions": [
            {"type": "command", "command": [sys.executable, "-c",
                                            f"import sys; open({str(got)!r}, 'w').write("
                                            "sys.stdin.read())"]},
            {"type": "stop", "grace_s": 5}]}}}))
    job = textwrap.dedent("""
        import time
        import trainprof
        deadline = time.time() + 90
        while time.time() < deadline:
            with trainprof.step(mode="train"):
                with trainprof.span("data_wait", category="data_wait"):
                    time.sleep(0.03)
                with trainprof.span("forward", category="forward"):
                    time.sleep(0.01)
    """)
    run_dir = tmp_path / "run"
    proc = subprocess.run([*trainprof_cli, "record", "--out", str(run_dir), "--interval", "200ms",
                           "--no-gpu", "--custom-rule", str(EXAMPLE), "--rules-config",
                           str(config), "--live-rules-every", "1", "--", sys.executable, "-c",
                           job], capture_output=True, text=True, timeout=150)
    # Stopped by the custom rule's action (SIGTERM: 128 + 15) long before its own 90 s.
    assert proc.returncode == 143, proc.stderr
    assert "custom rules evaluated live (1 finding stored while the job ran)" in proc.stderr
    run = trainprof.open(run_dir)
    assert (run.metadata["end_ns"] - run.metadata["start_ns"]) / 1e9 < 60
    findings = run.findings()
    # Only what the configuration selected: no built-in rule. The file's other custom rules
    # run at the end as well (docs/rules.md: they always all run); BusyCpuWhileWaiting fires
    # there when the machine's CPUs were busy, which a loaded CI machine's are.
    assert {f.rule for f in findings} <= {"LongDataWaits", "SlowSteps", "BusyCpuWhileWaiting"}, \
        proc.stderr
    (live,) = [f for f in findings if f.rule == "LongDataWaits"]
    assert live.evidence["long_waits"] == 15
    # The finding was stored before the job ended, not at the end.
    assert live.end_ns < run.metadata["end_ns"]
    sent = json.loads(got.read_text())
    assert sent["rule"] == "LongDataWaits" and sent["evidence"]["long_waits"] == 15


def test_rule_config_naming_an_unknown_rule_with_custom_rules_is_an_error(tmp_path, trainprof_cli):
    run_dir = write_run(tmp_path / "r")
    config = tmp_path / "rules.json"
    config.write_text(json.dumps({"rules": {"NoSuchRule": {"parameters": {"x": 1}}}}))
    proc = subprocess.run([*trainprof_cli, "rules", str(run_dir), "--custom", str(EXAMPLE),
                           "--config", str(config), "--json"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    assert "NoSuchRule" in proc.stderr
    # A custom rule's parameters from the configuration reach it.
    config.write_text(json.dumps({"rules": {"SlowSteps": {"parameters": {"max_step_ms": 2000}}}}))
    proc = subprocess.run([*trainprof_cli, "rules", str(run_dir), "--custom", str(EXAMPLE),
                           "--config", str(config), "--json"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    entries = {e["name"]: e for e in json.loads(proc.stdout)["rules"]}
    assert entries["SlowSteps"]["parameters"]["max_step_ms"] == 2000
    assert not entries["SlowSteps"]["triggered"]  # no step reaches 2 s
    # Only custom rules listed: no built-in rule evaluated (the files' rules all run).
    assert set(entries) == {"SlowSteps", "BusyCpuWhileWaiting", "LongDataWaits"}
