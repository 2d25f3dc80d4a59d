"""`trainprof serve`, the live dashboard, as its users and its attackers would use it: the JSON
API against values computed here from the data written (min / mean / max per bucket with
numpy), new data pushed to a listening client within 2 s of being written, no path outside
the served directories reachable however it is spelled, a token on any address but loopback,
and the page itself in headless Chromium (runs, a run's overview and nodes, compare) without
console errors; screenshots kept under tests/artifacts/."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import trainprof
from conftest import REPO, trainprof_command

ARTIFACTS = REPO / "tests" / "artifacts"
T0 = 1_790_000_000_000_000_000  # ns
S = 1_000_000_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_run(path: Path, name: str, seconds: int = 100, live: bool = False):
    """A run with known data: cpu_utilization_ratio{total} = (k % 17) / 16 at T0 + k s + 0.5 s,
    memory_used_bytes = 1 GiB + k MiB, and one training step per second of 200 + (k % 5) ms."""
    w = trainprof.RunWriter(str(path), node="node-a", name=name, command=["python", name + ".py"],
                            start_ns=T0)
    k = np.arange(seconds)
    ts = T0 + k * S + S // 2
    w.append_metric("cpu_utilization_ratio", "total", ts, (k % 17) / 16)
    w.append_metric("memory_used_bytes", "", ts, 2**30 + k * 2**20)
    for i in range(seconds):
        w.append_event("step", "step", int(T0 + i * S), int((200 + i % 5) * 1e6), mode="train",
                       step=i, pid=42)
    w.flush()
    if not live:
        w.close(end_ns=int(T0 + seconds * S), exit_status=0)
    return w


class Serve:
    def __init__(self, roots, *extra):
        self.port = _free_port()
        self.proc = subprocess.Popen([*trainprof_command(), "serve", *map(str, roots), "--addr",
                                      f"127.0.0.1:{self.port}", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert self.proc.poll() is None, self.proc.communicate()
                time.sleep(0.1)
        raise AssertionError("serve did not start")

    def get(self, path, headers=None):
        req = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers)

    def json(self, path):
        status, body, _ = self.get(path)
        assert status == 200, (path, status, body[:300])
        return json.loads(body)

    def raw(self, path: str) -> int:
        """The status of a request sent exactly as written (no client-side normalising)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        c.putrequest("GET", path, skip_host=False, skip_accept_encoding=True)
        c.endheaders()
        status = c.getresponse().status
        c.close()
        return status

    def stop(self):
        self.proc.terminate()
        out, err = self.proc.communicate(timeout=30)
        return out, err


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    _write_run(root / "alpha", "alpha")
    _write_run(root / "team" / "beta", "beta", seconds=60)
    return root


def test_runs_and_metric_buckets_equal_the_data_written(runs):
    srv = Serve([runs])
    try:
        listing = srv.json("/api/runs")["runs"]
        assert sorted(r["name"] for r in listing) == ["alpha", "beta"]
        alpha = next(r for r in listing if r["name"] == "alpha")
        assert alpha["status"] == "finished" and alpha["duration_ns"] == 100 * S
        assert alpha["nodes"] == 1 and alpha["gpus"] == 0 and "dir" not in alpha
        run_id = alpha["id"]

        m = srv.json(f"/api/runs/{run_id}/metric?metric=cpu_utilization_ratio&start={T0}"
                     f"&end={T0 + 100 * S}&points=10")
        (series,) = m["series"]
        assert m["unit"] == "ratio" and series["device"] == "total" and series["samples"] == 100
        k = np.arange(100)
        values = ((k % 17) / 16).reshape(10, 10)  # 10 s buckets of 10 samples each
        assert series["ts_ns"] == [T0 + b * 10 * S for b in range(10)]
        assert series["min"] == values.min(axis=1).tolist()
        assert series["max"] == values.max(axis=1).tolist()
        assert np.allclose(series["mean"], values.mean(axis=1))

        steps = srv.json(f"/api/runs/{run_id}/steps?points=5")
        assert steps["steps"] == 100
        (st,) = steps["series"]
        assert min(st["min"]) == 200.0 and max(st["max"]) == 204.0

        events = srv.json(f"/api/runs/{run_id}/events?start={T0}&end={T0 + 10 * S}&limit=3")
        assert events["truncated"] is True and len(events["events"]) == 3 and events["total"] == 10

        overview = srv.json(f"/api/runs/{run_id}")
        assert overview["run"]["name"] == "alpha" and "summary" in overview and "run_dir" not in overview
        bad = srv.get(f"/api/runs/{run_id}/metric")
        assert bad[0] == 400 and b"metric=" in bad[1]
    finally:
        srv.stop()


def test_no_path_outside_the_served_directories_is_reachable(runs, tmp_path):
    outside = tmp_path / "outside"
    _write_run(outside / "secret", "secret")
    os.symlink(outside, runs / "link")  # a symlink inside a root is not followed
    srv = Serve([runs])
    try:
        names = [r["name"] for r in srv.json("/api/runs")["runs"]]
        assert "secret" not in names
        for path in ["/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/assets/../../etc/passwd",
                     "/assets/..%2f..%2fetc%2fpasswd", "/api/runs/..%2f..%2fetc",
                     "/api/runs/../../etc/passwd/metric", "/api/runs/link%2fsecret",
                     "/api/runs/0000000000000000", "/etc/passwd", "/api/runs/%00"]:
            status = srv.raw(path)
            assert status in (400, 404), (path, status)
        # the page and its assets are there; nothing else
        assert srv.get("/")[0] == 200 and srv.get("/assets/charts.js")[0] == 200
        assert srv.get("/assets/app.js")[2].get("X-Content-Type-Options") == "nosniff"
    finally:
        srv.stop()


def test_a_token_guards_every_request_when_set(runs):
    srv = Serve([runs], "--token", "s3cr3t-t0ken")
    try:
        assert srv.get("/api/runs")[0] == 401
        assert srv.get("/")[0] == 401
        assert srv.get("/api/runs", {"Authorization": "Bearer wrong"})[0] == 401
        assert srv.get("/api/runs", {"Authorization": "Bearer s3cr3t-t0ken"})[0] == 200
        status, _, headers = srv.get("/?token=s3cr3t-t0ken")
        assert status == 200 and "tp_token=s3cr3t-t0ken" in headers.get("Set-Cookie", "")
        assert "HttpOnly" in headers["Set-Cookie"]
        assert srv.get("/api/runs", {"Cookie": "tp_token=s3cr3t-t0ken"})[0] == 200
    finally:
        srv.stop()


def test_new_data_reaches_a_listening_client_within_two_seconds(tmp_path):
    root = tmp_path / "runs"
    writer = _write_run(root / "live", "live", seconds=10, live=True)
    srv = Serve([root])
    try:
        run_id = srv.json("/api/runs")["runs"][0]["id"]
        assert srv.json("/api/runs")["runs"][0]["status"] in ("running", "crashed")
        got = []

        def listen():
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
            c.request("GET", f"/api/runs/{run_id}/stream")
            r = c.getresponse()
            assert r.status == 200 and r.getheader("Content-Type").startswith("text/event-stream")
            buf = b""
            while len(got) < 2:
                chunk = r.readline()
                if not chunk:
                    break
                buf += chunk
                if buf.endswith(b"\n\n"):
                    if buf.startswith(b"event: update"):
                        got.append((time.monotonic(), json.loads(buf.split(b"data: ", 1)[1])))
                    buf = b""
            c.close()

        t = threading.Thread(target=listen, daemon=True)
        t.start()
        deadline = time.time() + 10
        while not got and time.time() < deadline:
            time.sleep(0.05)
        assert got, "no first event"
        before = srv.json(f"/api/runs/{run_id}/metric?metric=cpu_utilization_ratio&device=total")[
            "series"][0]["samples"]
        new_ts = int(T0 + 30 * S)
        writer.append_metric("cpu_utilization_ratio", "total", np.array([new_ts]), np.array([0.5]))
        writer.flush()
        written = time.monotonic()
        t.join(timeout=10)
        assert len(got) == 2, got
        delay = got[1][0] - written
        assert got[1][1]["latest_ns"] == new_ts and delay <= 2.0, delay
        # the answers the server keeps are not served stale: the chart has the new sample
        m = srv.json(f"/api/runs/{run_id}/metric?metric=cpu_utilization_ratio&device=total")
        assert m["series"][0]["samples"] == before + 1 and m["end_ns"] == new_ts + 1
        writer.close(end_ns=new_ts + S, exit_status=0)
    finally:
        srv.stop()


def test_live_streams_are_bounded(tmp_path):
    root = tmp_path / "runs"
    _write_run(root / "r", "r", seconds=5)
    srv = Serve([root])
    try:
        run_id = srv.json("/api/runs")["runs"][0]["id"]
        conns = []
        for _ in range(68):
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
            c.request("GET", f"/api/runs/{run_id}/stream")
            conns.append(c)
        statuses = sorted(c.getresponse().status for c in conns)
        assert statuses == [200] * 64 + [503] * 4, statuses
        # the API still answers at once while the streams are held
        t = time.monotonic()
        assert srv.get("/api/runs")[0] == 200
        assert time.monotonic() - t < 2
        for c in conns:
            c.close()
        # a client that goes away frees its stream within a poll (250 ms), not at the next
        # write (a comment every 10 s): all 64 can be taken again at once
        time.sleep(1.0)
        again = []
        for _ in range(64):
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
            c.request("GET", f"/api/runs/{run_id}/stream")
            again.append(c)
        assert [c.getresponse().status for c in again] == [200] * 64
        for c in again:
            c.close()
    finally:
        srv.stop()


def _fresh(browser):
    """A blank page and an empty console log: what an earlier test's page logged after its
    server stopped (the live stream reconnecting) is not this test's error."""
    browser.open("about:blank")
    browser.errors()


def _wait(browser, script, timeout=20):
    return browser.wait(script, timeout)


def test_the_page_in_a_browser(runs, browser):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    srv = Serve([runs])
    try:
        browser.open(srv.url + "/")
        _wait(browser, "return document.querySelectorAll('#runs tr[data-id]').length == 2")
        browser.screenshot(str(ARTIFACTS / "dashboard-runs.png"))
        ids = browser.js(
            "return Array.from(document.querySelectorAll('#runs tr[data-id]')).map(r => r.dataset.id)")
        browser.open(srv.url + f"/#/run/{ids[0]}")
        _wait(browser, "return document.querySelector('.verdict') !== null")
        browser.screenshot(str(ARTIFACTS / "dashboard-overview.png"))
        browser.open(srv.url + f"/#/run/{ids[0]}/nodes")
        browser.reload()
        canvases = _wait(browser, "var n = document.querySelectorAll('#m0 canvas').length; return n || 0")
        assert canvases > 0
        # a metric the run does not have collapses to one line instead of an empty chart
        _wait(browser, "var e = document.getElementById('m1'); return e && e.className == 'collapsed'")
        browser.screenshot(str(ARTIFACTS / "dashboard-nodes.png"))
        browser.open(srv.url + f"/#/compare/{ids[0]},{ids[1]}")
        browser.reload()
        _wait(browser, "return document.querySelectorAll('#compare tr').length > 5")
        changed = browser.js(
            "return Array.from(document.querySelectorAll('#compare tr.diff-changed th')).map(t => t.textContent)")
        assert "command" in changed and "training steps" in changed
        browser.screenshot(str(ARTIFACTS / "dashboard-compare.png"))
        errors = browser.errors()
        assert not errors, errors
    finally:
        browser.open("about:blank")
        srv.stop()


STARVED_JOB = """
import sys, time
import trainprof
deadline = time.time() + float(sys.argv[1])
while time.time() < deadline:
    with trainprof.step(mode="train"):
        with trainprof.span("data_wait", category="data_wait"):
            time.sleep(0.03)
        with trainprof.span("forward", category="forward"):
            time.sleep(0.01)
"""


def test_record_serve_shows_a_live_job_growing_and_its_problem_appearing(tmp_path, browser):
    """record --serve on a job starved of data: the page's nodes chart grows while the job runs
    and the starvation finding appears in the overview as the live rules store it."""
    import sys

    port = _free_port()
    cfg = tmp_path / "rules.json"
    cfg.write_text(json.dumps({"rules": {"DataLoaderStarvation": {"parameters": {"window_steps": 10}}}}))
    run = tmp_path / "run"
    job = subprocess.Popen([*trainprof_command(), "record", "--out", str(run), "--no-gpu",
                            "--interval", "200ms", "--serve", f"127.0.0.1:{port}",
                            "--rules-config", str(cfg), "--live-rules-every", "1", "--",
                            sys.executable, "-c", STARVED_JOB, "40"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 30
        run_id = None
        while time.time() < deadline and run_id is None:
            try:
                with urllib.request.urlopen(url + "/api/runs", timeout=5) as r:
                    runs = json.loads(r.read())["runs"]
                run_id = runs[0]["id"] if runs else None
            except OSError:
                time.sleep(0.3)
        assert run_id, job.stderr.read() if job.poll() is not None else "no run served"
        browser.open(url + f"/#/run/{run_id}/nodes")
        first = int(_wait(browser, "var e = document.getElementById('m0');"
                                   " return e && Number(e.dataset.samples || 0)"))
        grown = _wait(browser, "var e = document.getElementById('m0');"
                               f" return e && Number(e.dataset.samples || 0) > {first + 5}", timeout=20)
        assert grown
        browser.screenshot(str(ARTIFACTS / "dashboard-live-nodes.png"))
        browser.open(url + f"/#/run/{run_id}")
        browser.reload()
        _wait(browser, "return document.querySelector('.finding[data-rule=DataLoaderStarvation]')"
                       " !== null", timeout=45)
        assert job.poll() is None  # seen while the job still runs
        browser.screenshot(str(ARTIFACTS / "dashboard-live-finding.png"))
        errors = browser.errors()
        assert not errors, errors
    finally:
        job.terminate()
        job.communicate(timeout=120)



COMPILED_JOB = r"""
import os, sys
import torch
torch.manual_seed(0)
out = sys.argv[1]
with open(out, "a") as f:
    f.write("main %d\n" % os.getpid())
def note_worker(_):
    with open(out, "a") as f:
        f.write("worker %d\n" % os.getpid())
model = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)),
                      backend="eager")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.utils.data.TensorDataset(torch.randn(70, 8), torch.randint(0, 2, (70,)))
# 10 steps of batches of 4, then 10 of batches of 3: dynamo compiles at the first step and
# recompiles (a new shape) at the 11th; each loader has one worker process
for bs, n in ((4, 40), (3, 30)):
    sub = torch.utils.data.Subset(data, range(0, n) if bs == 4 else range(40, 70))
    for x, y in torch.utils.data.DataLoader(sub, batch_size=bs, num_workers=1, worker_init_fn=note_worker):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
"""


@pytest.fixture(scope="module")
def compiled_run(tmp_path_factory):
    """A recorded job (above) and the pids it wrote down: {"main": [pid], "worker": [pid, pid]}."""
    import sys

    tmp = tmp_path_factory.mktemp("compiled")
    pids = tmp / "pids.txt"
    subprocess.run([*trainprof_command(), "record", "--out", str(tmp / "runs" / "compiled"),
                    "--no-gpu", "--interval", "200ms", "--", sys.executable, "-c", COMPILED_JOB,
                    str(pids)], check=True, capture_output=True, timeout=240)
    known = {"main": [], "worker": []}
    for line in pids.read_text().split("\n"):
        if line:
            role, pid = line.split()
            known[role].append(int(pid))
    return tmp / "runs", known


def test_compile_and_recompile_events_are_marked_on_the_training_page(compiled_run, browser):
    """A job whose compiled model sees a second batch shape at its 11th step: the API lists a
    compile at the first step and a recompile 10 steps later (one new graph each), and the
    training page shows both."""
    _fresh(browser)
    srv = Serve([compiled_run[0]])
    try:
        run_id = srv.json("/api/runs")["runs"][0]["id"]
        st = srv.json(f"/api/runs/{run_id}/steps")
        assert st["steps"] == 20
        steps = sorted(e["step"] for e in srv.json(f"/api/runs/{run_id}/events?category=step")["events"])
        compiles = st["compiles"]
        assert [(c["name"], c["step"], c["new_graphs"]) for c in compiles] == [
            ("compile", steps[0], 1), ("recompile", steps[10], 1)], compiles
        assert st["compiles_total"] == 2
        # Counts the page's renders (each draws the tabs anew) from the page's first script on.
        with browser.page.add_init_script("""
            window.tpRenders = 0;
            new MutationObserver(function (ms) { ms.forEach(function (m) { m.addedNodes.forEach(function (n) {
              if (n.nodeType === 1 && n.matches('p.tabs')) window.tpRenders++; }); }); })
              .observe(document, { childList: true, subtree: true });"""):
            browser.open(srv.url + f"/#/run/{run_id}/training")
            names = _wait(browser, "var r = document.querySelectorAll('#compiles tr');"
                                   " return r.length === 2 && Array.from(r).map(x => x.dataset.name)")
            assert names == ["compile", "recompile"]
            # A finished run's page is drawn once: the live stream's updates (the first comes
            # right after the first render) bring nothing newer than what it shows.
            time.sleep(3)
            assert browser.js("return window.tpRenders") == 1
        browser.screenshot(str(ARTIFACTS / "dashboard-training-compiles.png"))
        errors = browser.errors()
        assert not errors, errors
    finally:
        browser.open("about:blank")
        srv.stop()


def test_processes_of_a_recorded_job_and_of_a_run_without_any(compiled_run, browser, tmp_path):
    """/processes names the job's own pid (training, its 20 steps) and the pids of its two
    data-loader workers, as the job wrote them down, with the tree's totals; the nodes page
    lists them when its Processes section is opened. A run with nothing about processes says
    "no process data"."""
    root, known = compiled_run
    assert len(known["main"]) == 1 and len(known["worker"]) == 2, known
    empty = tmp_path / "empty"
    w = trainprof.RunWriter(str(empty / "quiet"), node="node-q", name="quiet", start_ns=T0)
    w.append_metric("memory_used_bytes", "", np.array([T0 + S]), np.array([1.0]))
    w.flush()
    w.close(end_ns=T0 + 2 * S, exit_status=0)
    _fresh(browser)
    srv = Serve([root, empty])
    try:
        rows = {("quiet" if r["name"] == "quiet" else "compiled"): r["id"]
                for r in srv.json("/api/runs")["runs"]}
        assert len(rows) == 2
        p = srv.json(f"/api/runs/{rows['compiled']}/processes")
        assert len(p["nodes"]) == 1
        node = p["nodes"][0]
        procs = {q["pid"]: q for q in node["processes"]}
        assert set(procs) == set(known["main"] + known["worker"]), (procs, known)
        main = procs[known["main"][0]]
        assert (main["role"], main["steps"]) == ("training", 20)
        for pid in known["worker"]:
            assert procs[pid]["role"] == "data-loader worker" and procs[pid]["batches"] > 0
        assert sum(procs[pid]["batches"] for pid in known["worker"]) == 20  # 10 + 10 batches
        peak = node["tree_max"]  # the job and a worker at once, torch in memory
        assert peak["process_count"] >= 2 and peak["process_resident_memory_bytes"] > 50 * 2**20
        assert node["tree"]["ts_ns"] > 0
        assert p["command"][-1] == str(Path(root).parent / "pids.txt")
        quiet = srv.json(f"/api/runs/{rows['quiet']}/processes")
        assert quiet["nodes"] == []

        browser.open(srv.url + f"/#/run/{rows['compiled']}/nodes")
        _wait(browser, "return document.querySelector('#processes summary') !== null")
        browser.js("document.querySelector('#processes summary').click()")
        _wait(browser, "return document.querySelectorAll('#processes li[data-pid]').length === 3")
        shown = browser.js(
            "return Array.from(document.querySelectorAll('#processes li')).map(l => Number(l.dataset.pid))")
        assert sorted(shown) == sorted(known["main"] + known["worker"])
        browser.screenshot(str(ARTIFACTS / "dashboard-processes.png"))
        # A new document: a change of the hash alone keeps the last page's DOM until the
        # new one renders, and the wait below would find the old section's summary.
        browser.open("about:blank")
        browser.open(srv.url + f"/#/run/{rows['quiet']}/nodes")
        _wait(browser, "return document.querySelector('#processes summary') !== null")
        browser.js("document.querySelector('#processes summary').click()")
        _wait(browser, "var p = document.querySelector('#processes .collapsed');"
                       " return p !== null && p.textContent === 'no process data'")
        errors = browser.errors()
        assert not errors, errors
    finally:
        browser.open("about:blank")
        srv.stop()
