"""The process tree, per process, checked against psutil (an independent reader of the same
/proc): a Python job spawns a child that burns a core and holds 96 MiB, and a child that sleeps
holding 48 MiB with a grandchild burning half a core; `trainprof record` records it; the job
itself measures its processes with psutil over a 3-s window. The stored per-process series
(pid_* on device pid<P>) and the recorder's "process" notes must agree with psutil: mean CPU
over the window within 0.15 cores + 10 %, RSS within 5 %, threads exactly, parent, name and
command line exactly. Then the dashboard: /api/runs/<id>/processes gives the same tree, and the
nodes page draws it with each process under its parent (indentation depth), and sorting by CPU
orders siblings by CPU."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

import trainprof
from conftest import trainprof_command
from test_serve import ARTIFACTS, Serve, _fresh, _wait

JOB = r"""
import json, os, subprocess, sys, time
import psutil

BURN = '''
import sys, time
duty = float(sys.argv[1]); mem = bytearray(int(sys.argv[2]) << 20)
for i in range(0, len(mem), 4096): mem[i] = 1
print("ready", flush=True)
while True:
    t = time.perf_counter()
    while time.perf_counter() - t < 0.01 * duty: pass
    if duty < 1: time.sleep(0.01 * (1 - duty))
'''
HOLD = '''
import os, subprocess, sys, time
mem = bytearray(48 << 20)
for i in range(0, len(mem), 4096): mem[i] = 1
kid = subprocess.Popen([sys.executable, "-c", os.environ["BURN"], "0.5", "16"], stdout=subprocess.PIPE)
kid.stdout.readline()
print("ready %d" % kid.pid, flush=True)
time.sleep(60)
'''
out = sys.argv[1]
burner = subprocess.Popen([sys.executable, "-c", BURN, "1.0", "96"], stdout=subprocess.PIPE)
holder = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE,
                          env=dict(os.environ, BURN=BURN))
burner.stdout.readline()
grandchild = int(holder.stdout.readline().split()[1])
time.sleep(0.6)  # the recorder has sampled each at least twice (200 ms)
procs = [psutil.Process(p) for p in (os.getpid(), burner.pid, holder.pid, grandchild)]
def cpu(p):
    t = p.cpu_times()
    return t.user + t.system
t0 = time.time_ns(); c0 = [cpu(p) for p in procs]
time.sleep(3.0)
t1 = time.time_ns(); c1 = [cpu(p) for p in procs]
doc = {"t0_ns": t0, "t1_ns": t1, "procs": [
    {"pid": p.pid, "ppid": p.ppid(), "name": p.name(), "cmdline": p.cmdline(),
     "cpu_cores": (b - a) / ((t1 - t0) / 1e9), "rss_bytes": p.memory_info().rss,
     "threads": p.num_threads()} for p, a, b in zip(procs, c0, c1)]}
with open(out, "w") as f:
    json.dump(doc, f)
for p in (burner, holder):
    p.kill()
psutil.Process(grandchild).kill()
"""


@pytest.fixture(scope="module")
def tree_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tree")
    truth = tmp / "psutil.json"
    subprocess.run([*trainprof_command(), "record", "--out", str(tmp / "runs" / "tree"), "--no-gpu",
                    "--interval", "100ms", "--", sys.executable, "-c", JOB, str(truth)],
                   check=True, capture_output=True, timeout=120)
    return tmp / "runs", json.loads(truth.read_text())


def _stored_cmdline(args: list[str]) -> list[str]:
    """What the recorder keeps of a command line: its first 512 bytes, at most 32 arguments."""
    raw = b"".join(a.encode() + b"\0" for a in args)[:512]
    parts = raw.split(b"\0")
    if raw.endswith(b"\0"):
        parts.pop()
    return [x.decode(errors="replace") for x in parts[:32]]


def test_per_process_series_agree_with_psutil(tree_run):
    root, truth = tree_run
    run = trainprof.open(str(root / "tree"))
    t0, t1 = truth["t0_ns"], truth["t1_ns"]
    notes = {}
    for _node, _ts, key, value in run.annotations():
        if key == "process":
            doc = json.loads(value)
            notes[doc["pid"]] = doc
    table = run.system_metrics(t0, t1 + 1, metrics=["pid_cpu_utilization_ratio",
                                                    "pid_resident_memory_bytes", "pid_threads"])
    metric, device, ts, value = (table.column(c) for c in ("metric", "device", "timestamp_ns", "value"))
    for p in truth["procs"]:
        pid = p["pid"]
        assert pid in notes, (pid, sorted(notes))
        note = notes[pid]
        assert (note["ppid"], note["name"], note["cmdline"]) == (
            p["ppid"], p["name"], _stored_cmdline(p["cmdline"]))
        mine = device == f"pid{pid}"
        # Each CPU sample is the mean since the previous one: those ending 0.3 s into the
        # window or later cover it, give or take one 200-ms interval at its start.
        cpu = value[mine & (metric == "pid_cpu_utilization_ratio") & (ts >= t0 + 300_000_000)]
        rss = value[mine & (metric == "pid_resident_memory_bytes")]
        threads = value[mine & (metric == "pid_threads")]
        assert len(cpu) >= 8 and len(rss) >= 8, (pid, len(cpu), len(rss))
        assert abs(cpu.mean() - p["cpu_cores"]) <= 0.15 + 0.1 * p["cpu_cores"], (p, cpu)
        assert abs(rss[-1] - p["rss_bytes"]) <= 0.05 * p["rss_bytes"], (p, rss[-1])
        assert threads[-1] == p["threads"], (p, threads)
    burner, holder, grandchild = truth["procs"][1:]
    # the burner did burn (a real check, not 0 against 0; on a loaded 2-core VM it gets far
    # less than its core)
    assert burner["cpu_cores"] > 0.05
    assert notes[burner["pid"]]["ppid"] == truth["procs"][0]["pid"]
    assert notes[grandchild["pid"]]["ppid"] == holder["pid"]
    assert notes[burner["pid"]]["cmdline"][-2:] == ["1.0", "96"]
    # The per-process series add up to the tree's at each tick (none went to "other").
    tree = run.system_metrics(t0, t1 + 1, metrics="process_resident_memory_bytes", devices="tree")
    tts, tval = tree.column("timestamp_ns"), tree.column("value")
    rss_all = (metric == "pid_resident_memory_bytes")
    for stamp, total in zip(tts[:5], tval[:5]):
        assert value[rss_all & (ts == stamp)].sum() == pytest.approx(total)


def test_the_dashboard_draws_the_tree(tree_run, browser):
    root, truth = tree_run
    job, burner, holder, grandchild = (p["pid"] for p in truth["procs"])
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    _fresh(browser)
    srv = Serve([root])
    try:
        run_id = srv.json("/api/runs")["runs"][0]["id"]
        node = srv.json(f"/api/runs/{run_id}/processes")["nodes"][0]
        api = {q["pid"]: q for q in node["tree_processes"]}
        assert {job, burner, holder, grandchild} <= set(api)
        assert api[grandchild]["ppid"] == holder and api[burner]["ppid"] == job
        assert node["tree_other"] is None
        assert api[burner]["cpu_cores"] > api[holder]["cpu_cores"]
        assert api[burner]["rss_bytes"] > 96 * 2**20
        browser.open(srv.url + f"/#/run/{run_id}/nodes")
        _wait(browser, "return document.querySelector('#processes summary') !== null")
        browser.js("document.querySelector('#processes summary').click()")
        _wait(browser, "return document.querySelectorAll('table.proc-tree tr[data-pid]').length >= 4")
        rows = browser.js(
            "return Array.from(document.querySelectorAll('table.proc-tree tr[data-pid]'))"
            ".map(r => [Number(r.dataset.pid), Number(r.dataset.depth)])")
        depth = dict(rows)
        order = [pid for pid, _ in rows]
        assert depth[burner] == depth[holder] == depth[job] + 1
        assert depth[grandchild] == depth[holder] + 1
        # each process is drawn below its parent, before any row at the parent's depth or less
        for child, parent in ((burner, job), (holder, job), (grandchild, holder)):
            i, j = order.index(parent), order.index(child)
            assert j > i and all(depth[p] > depth[parent] for p in order[i + 1:j + 1])
        browser.js("document.querySelector('table.proc-tree').scrollIntoView()")
        browser.screenshot(str(ARTIFACTS / "dashboard-process-tree.png"))
        # Sort by CPU (descending): the burner (a core) before the holder (asleep).
        browser.js("document.querySelector('table.proc-tree th[data-key=cpu_cores]').click()")
        _wait(browser, "return document.querySelector('table.proc-tree th[data-key=cpu_cores]')"
                       ".textContent.indexOf('▼') > 0")
        order = browser.js(
            "return Array.from(document.querySelectorAll('table.proc-tree tr[data-pid]')).map(r => Number(r.dataset.pid))")
        assert order.index(burner) < order.index(holder)
        errors = browser.errors()
        assert not errors, errors
    finally:
        browser.open("about:blank")
        srv.stop()
