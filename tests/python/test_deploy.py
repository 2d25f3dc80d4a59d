"""The fleet deployment files in deploy/ (docs/deploy.md, issue 20): the Grafana dashboard names
only metrics a live recorder serves, its PromQL parses (promtool), the Prometheus configuration
passes `promtool check config`, the Kubernetes manifests parse and the agent options they (and
the SLURM prolog) pass are options `trainprof agent` has, the SLURM scripts pass `bash -n`, and
the prolog/epilog pair really starts an agent that records this node and serves /metrics, then
stops it cleanly."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO, trainprof_command

DEPLOY = REPO / "deploy"
DASHBOARD = DEPLOY / "grafana" / "trainprof.json"
REPLAY_LIB = REPO / "build" / "py" / "tests" / "nvml_replay" / "libnvml_replay.so"
H200 = REPO / "tests" / "testdata" / "nvml" / "h200_real.json"
# Series Prometheus makes itself for every target (not the exporter's)
PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}

PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
                "or", "unless", "offset", "inf", "nan"}

JOB = textwrap.dedent("""
    import os, sys, time
    import trainprof
    for i in range(20):
        with trainprof.step(mode="train"):
            with trainprof.span("next_batch", category="data_wait"):
                time.sleep(0.005)
            time.sleep(0.02)
    trainprof.flush()
    deadline = time.time() + 30
    while not os.path.exists(sys.argv[1]) and time.time() < deadline:
        time.sleep(0.05)
""")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not functions (followed
    by '('), keywords, label matchers ({...}), grouping labels (by/without/on/ignoring (...)),
    ranges ([...]) or strings."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        word = m.group(0)
        after = e[m.end():].lstrip()
        if after.startswith("(") or word.lower() in PROMQL_WORDS:
            continue
        if m.start() > 0 and (e[m.start() - 1].isdigit() or e[m.start() - 1] in "$."):
            continue  # 1e3, $var
        names.add(word)
    return names


def test_metric_name_extraction():
    assert metric_names('sum by (node, mode) (rate(a_total{node=~"$node"}[$__rate_interval]))') == {"a_total"}
    assert metric_names("histogram_quantile(0.95, sum by (le) (rate(b_bucket[5m]))) / c + 1e3") == {"b_bucket", "c"}
    assert metric_names('time() - d{x="a b (c)"} and on (node) e offset 5m') == {"d", "e"}


def dashboard_exprs() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    for v in doc["templating"]["list"]:
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.fullmatch(r"label_values\((.+),\s*\w+\)", q)
            assert m, q
            exprs.append(m.group(1))
    return exprs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(url: str, want: str, timeout: float = 30) -> str:
    deadline = time.time() + timeout
    body = ""
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                body = r.read().decode()
            if want in body:
                return body
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} never served {want!r}:\n{body[:2000]}")


def test_grafana_dashboard_names_only_metrics_a_live_recorder_serves(tmp_path):
    doc = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids)) >= 10
    exprs = dashboard_exprs()
    assert all(metric_names(e) for e in exprs), [e for e in exprs if not metric_names(e)]
    used = set().union(*(metric_names(e) for e in exprs))

    # Live: `record --prometheus` with GPUs answered by the NVML replay library (a real H200
    # recording) around a job that steps, so that GPU and step series are served too.
    if not REPLAY_LIB.exists():
        pytest.fail(f"{REPLAY_LIB} not built (scripts/setup.sh builds it with the tests)")
    port = _free_port()
    stop = tmp_path / "stop"
    script = tmp_path / "job.py"
    script.write_text(JOB)
    env = dict(os.environ, TRAINPROF_NVML_LIBRARY=str(REPLAY_LIB), TRAINPROF_NVML_REPLAY=str(H200))
    rec = subprocess.Popen([*trainprof_command(), "record", "--out", str(tmp_path / "run"),
                            "--interval", "100ms", "--live-rules-every", "0",
                            "--prometheus", f"127.0.0.1:{port}", "--", sys.executable, str(script),
                            str(stop)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        body = _scrape(f"http://127.0.0.1:{port}/metrics", "trainprof_steps_total")
        body = _scrape(f"http://127.0.0.1:{port}/metrics", "trainprof_gpu_utilization_ratio")
    finally:
        stop.write_text("")
        out, err = rec.communicate(timeout=60)
    assert rec.returncode == 0, err
    served = {line.split("{")[0].split(" ")[0] for line in body.splitlines()
              if line and not line.startswith("#")}
    assert len(served) > 50
    assert used - served - PROMETHEUS_OWN == set(), sorted(used - served - PROMETHEUS_OWN)

    # Every expression parses as PromQL (promtool, Grafana's variables filled in).
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not installed (scripts/system-packages.txt: prometheus)")
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr{i}", "expr": e.replace("$__rate_interval", "1m")
         .replace("$node", ".+")} for i, e in enumerate(exprs)]}]}
    (tmp_path / "rules.yml").write_text(json.dumps(rules))  # JSON is YAML
    check = subprocess.run([promtool, "check", "rules", str(tmp_path / "rules.yml")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"{len(exprs)} rules found" in check.stdout, check.stdout


def test_prometheus_config_passes_promtool():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool not installed (scripts/system-packages.txt: prometheus)")
    check = subprocess.run([promtool, "check", "config", str(DEPLOY / "prometheus" / "prometheus.yml")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "SUCCESS" in check.stdout + check.stderr


def _agent_options() -> set[str]:
    help_text = subprocess.run([*trainprof_command(), "agent", "--help"], capture_output=True,
                               text=True, check=True).stdout
    return set(re.findall(r"(--[a-z][a-z-]+)", help_text))


def test_kubernetes_manifests_parse_and_pass_real_agent_options():
    yaml = pytest.importorskip("yaml")  # scripts/requirements-dev.txt: PyYAML
    docs = list(yaml.safe_load_all((DEPLOY / "k8s" / "daemonset.yaml").read_text()))
    kinds = {d["kind"]: d for d in docs}
    assert set(kinds) == {"DaemonSet", "Service"}
    ds = kinds["DaemonSet"]
    spec = ds["spec"]["template"]["spec"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    (c,) = spec["containers"]
    assert c["command"] == ["trainprof"] and c["args"][0] == "agent"
    flags = {a for a in c["args"] if a.startswith("--")}
    assert flags <= _agent_options(), flags - _agent_options()
    # every $(VAR) in the arguments is defined in env, as Kubernetes expands only those
    env = {e["name"] for e in c["env"]}
    assert set(re.findall(r"\$\((\w+)\)", " ".join(c["args"]))) <= env
    mounts = {m["name"] for m in c["volumeMounts"]}
    assert mounts <= {v["name"] for v in spec["volumes"]}
    svc = kinds["Service"]
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == ds["spec"]["selector"]["matchLabels"]
    assert c["ports"][0]["containerPort"] == svc["spec"]["ports"][0]["port"] == 9400


def test_slurm_scripts_pass_bash_n_and_pass_real_agent_options():
    for name in ("prolog.sh", "epilog.sh"):
        r = subprocess.run(["bash", "-n", str(DEPLOY / "slurm" / name)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    text = (DEPLOY / "slurm" / "prolog.sh").read_text()
    call = text[text.index('"$TRAINPROF" agent'):text.index("</dev/null")]
    call += text[text.index("cgroup_args=(--"):].split("\n")[0]  # the optional --cgroup DIR
    flags = set(re.findall(r"(--[a-z][a-z-]+)", call))
    assert {"--out", "--node", "--prometheus", "--prometheus-allow-remote", "--cgroup"} <= flags
    assert flags <= _agent_options(), flags - _agent_options()


def test_slurm_prolog_starts_an_agent_and_the_epilog_stops_it(tmp_path):
    """The pair as slurmd runs them (root, the job's variables), with the paths moved into
    tmp_path: the agent records this node into <runs>/<job id>/nodes/<node>, serves /metrics on
    the node's address, registers it for Prometheus; the epilog stops it cleanly."""
    exe = trainprof_command()
    if len(exe) != 1:
        pytest.skip("the prolog needs the trainprof executable itself")
    addr = (subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split() or
            ["127.0.0.1"])[0]
    port = _free_port()
    env = dict(os.environ, SLURM_JOB_ID="4242", SLURMD_NODENAME="gpu-node-7",
               SLURM_JOB_NAME="llm", SLURM_JOB_USER="alice", TRAINPROF=exe[0],
               TRAINPROF_RUNS=str(tmp_path / "runs"), TRAINPROF_PORT=str(port),
               TRAINPROF_SD_DIR=str(tmp_path / "sd"), TRAINPROF_STATE=str(tmp_path / "state"))
    pro = subprocess.run(["bash", str(DEPLOY / "slurm" / "prolog.sh")], env=env,
                         capture_output=True, text=True, timeout=30)
    assert pro.returncode == 0, pro.stderr
    pid = int((tmp_path / "state" / "agent-4242.pid").read_text())
    try:
        target = json.loads((tmp_path / "sd" / "gpu-node-7.json").read_text())
        assert target == [{"targets": [f"{addr}:{port}"], "labels": {"slurm_job_id": "4242"}}]
        body = _scrape(f"http://{addr}:{port}/metrics", 'trainprof_cpu_utilization_ratio{node="gpu-node-7"')
        assert "trainprof_memory_used_bytes" in body
    finally:
        epi = subprocess.run(["bash", str(DEPLOY / "slurm" / "epilog.sh")], env=env,
                             capture_output=True, text=True, timeout=60)
    assert epi.returncode == 0, epi.stderr
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    assert not (tmp_path / "sd" / "gpu-node-7.json").exists()
    run = tmp_path / "runs" / "4242"
    meta = json.loads((run / "run.json").read_text())
    assert meta["name"] == "llm" and meta.get("end_ns")
    assert {"slurm_job_id": "4242", "user": "alice"}.items() <= dict(meta["tags"]).items()
    import trainprof

    assert trainprof.open(str(run)).nodes == ["gpu-node-7"]
