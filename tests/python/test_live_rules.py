"""Rules evaluated live inside `trainprof record`: findings stored while the job still runs
(the job itself reads them back), equal to the offline evaluation of the finished run, and a
"stop" action that ends a wasteful job."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import trainprof
from conftest import trainprof_command

# Only the starvation rule, over short windows, so it can fire within seconds.
CONFIG = {"rules": {"DataLoaderStarvation": {"parameters": {"window_steps": 10}}}}

# A loop that waits 30 ms for each batch and computes 10 ms: starved, by construction.
STARVED_JOB = """
    import os, sys, time
    import trainprof
    run = os.environ["TRAINPROF_RUN_DIR"]
    deadline = time.time() + float(sys.argv[1])
    i = 0
    while time.time() < deadline:
        with trainprof.step(mode="train"):
            with trainprof.span("data_wait", category="data_wait"):
                time.sleep(0.03)
            with trainprof.span("forward", category="forward"):
                time.sleep(0.01)
        i += 1
        if i % 10 == 0 and sys.argv[2] == "watch" and trainprof.open(run).findings():
            print("finding seen while running, after step", i, flush=True)
            break
"""


def record(tmp_path, config, seconds, mode, timeout=120):
    run_dir = tmp_path / "run"
    cfg = tmp_path / "rules.json"
    cfg.write_text(json.dumps(config))
    cmd = [*trainprof_command(), "record", "--out", str(run_dir), "--interval", "200ms", "--no-gpu",
           "--rules-config", str(cfg), "--live-rules-every", "1", "--",
           sys.executable, "-c", textwrap.dedent(STARVED_JOB), str(seconds), mode]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return proc, run_dir, cfg


def key(f: dict):
    return (f["rule"], f["node"], f["device"], f["start_ns"], f["end_ns"], f["message"])


def test_findings_are_stored_while_the_job_runs_and_equal_the_offline_ones(tmp_path):
    proc, run_dir, cfg = record(tmp_path, CONFIG, 60, "watch")
    assert proc.returncode == 0, proc.stderr
    # The job saw the finding in its own run directory before it ended.
    assert "finding seen while running" in proc.stdout, proc.stdout + proc.stderr
    assert "rules evaluated live" in proc.stderr
    stored = [f for f in trainprof.open(str(run_dir)).findings() if f.rule == "DataLoaderStarvation"]
    assert stored, proc.stderr
    assert stored[0].evidence["data_wait_share"] > 0.6

    offline = subprocess.run([*trainprof_command(), "rules", str(run_dir), "--config", str(cfg),
                              "--json"], capture_output=True, text=True, timeout=60)
    assert offline.returncode == 0, offline.stderr
    results = json.loads(offline.stdout)["rules"]
    offline_findings = [dict(f, rule=r["name"]) for r in results for f in r["findings"]]
    live_findings = [{"rule": f.rule, "node": f.node, "device": f.device, "start_ns": f.start_ns,
                      "end_ns": f.end_ns, "message": f.message} for f in stored]
    assert sorted(map(key, live_findings)) == sorted(map(key, offline_findings))


def test_stop_action_ends_the_job_live(tmp_path):
    config = json.loads(json.dumps(CONFIG))
    config["rules"]["DataLoaderStarvation"]["actions"] = [{"type": "stop", "grace_s": 5}]
    proc, run_dir, _ = record(tmp_path, config, 90, "run")
    # SIGTERM from the stop action: 128 + 15, long before the job's own 90 s.
    assert proc.returncode == 143, proc.stdout + proc.stderr
    run = trainprof.open(str(run_dir))
    assert run.metadata["exit_status"] == 143
    assert (run.metadata["end_ns"] - run.metadata["start_ns"]) / 1e9 < 60
    assert any(f.rule == "DataLoaderStarvation" for f in run.findings())


def test_agent_evaluates_live_for_a_job_it_did_not_start(tmp_path):
    """`trainprof agent --pid` watching a job started elsewhere (which records its own steps
    into the same run directory) stores the live finding while the job runs."""
    import os
    import time

    run_dir = tmp_path / "run"
    cfg = tmp_path / "rules.json"
    cfg.write_text(json.dumps(CONFIG))
    job_code = textwrap.dedent("""
        import os, sys, time
        import trainprof
        time.sleep(1.5)                      # the agent creates run.json first
        assert trainprof.start(out=sys.argv[3], auto=False)
        os.environ["TRAINPROF_RUN_DIR"] = sys.argv[3]
    """) + textwrap.dedent(STARVED_JOB)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINPROF_")}
    job = subprocess.Popen([sys.executable, "-c", job_code, "60", "watch", str(run_dir)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    agent = subprocess.run(
        [*trainprof_command(), "agent", "--out", str(run_dir), "--pid", str(job.pid),
         "--interval", "200ms", "--no-gpu", "--rules-config", str(cfg), "--live-rules-every", "1",
         "--duration", "90"], capture_output=True, text=True, timeout=120)
    out, err = job.communicate(timeout=30)
    assert job.returncode == 0, err
    assert agent.returncode == 0, agent.stderr
    assert "finding seen while running" in out, out + err + agent.stderr
    assert "rules evaluated live" in agent.stderr
    assert any(f.rule == "DataLoaderStarvation" for f in trainprof.open(str(run_dir)).findings())


def test_a_command_action_that_ran_fine_is_logged_as_such(tmp_path):
    """`record` reaps orphaned descendants while the live rules run a command action: the
    command's own exit status is what counts (it used to be logged as "failed: waitpid: No
    child processes", its status taken by the orphan reaper)."""
    config = json.loads(json.dumps(CONFIG))
    got = tmp_path / "action.json"
    config["rules"]["DataLoaderStarvation"]["actions"] = [
        {"type": "command", "command": ["sh", "-c", f"cat > {got}; sleep 0.3; exit 0"]}]
    proc, run_dir, _ = record(tmp_path, config, 60, "watch")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(got.read_text())["rule"] == "DataLoaderStarvation"
    assert "failed" not in proc.stderr, proc.stderr
    assert "waitpid" not in proc.stderr, proc.stderr
