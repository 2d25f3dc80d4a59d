"""Many nodes on a real distributed engine (issue 20): two hosts made with network namespaces
(`ip netns` + a veth pair, 10.77.N.1 and 10.77.N.2), a real torch.distributed (gloo, CPU) training
of two ranks across them, each host recorded into ONE shared run directory as a multi-node
deployment does (docs/cli.md "Multi-node jobs": same --out, distinct --node): host-a's rank under
`trainprof record`, host-b's started as by a scheduler and recorded by `trainprof agent --pid`
(as deploy/'s DaemonSet and SLURM prolog run it), rank 1 (on host-b) slowed on purpose, and a real Prometheus server (Debian's package)
scraping each host's /metrics on the host's own address (`--prometheus ADDR:PORT
--prometheus-allow-remote`; loopback only otherwise).

The training is real DistributedDataParallel (its reducer's bucket all-reduces over gloo,
recorded by the zero-code instrumentation's communication hook). Checked against what was
planted, not against trainprof's own output: the merged run holds both hosts and both ranks,
each rank on the host that ran it; rank 0 waits about the planted sleep per step in DDP's
all-reduces; the StragglerRank rule and `analyze` name rank 1 on host-b (it sleeps SLEEP_S per step, which the training script also times itself);
Prometheus's HTTP API holds series from both hosts.

Needs root and `ip netns` (skipped with the reason otherwise; CI runs as root), torch, and
/usr/bin/prometheus (scripts/system-packages.txt)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
import urllib.parse
from pathlib import Path

import pytest

from conftest import trainprof_command

torch = pytest.importorskip("torch")  # installed by scripts/setup.sh

SLEEP_S = 0.08  # what rank 1 sleeps per step: the planted straggler
STEPS = 75  # about 6 s of training: the steps counter is exported for seconds before the end
PROM_PORT = 9400  # each namespace has its own ports: no clash with anything outside

TRAIN = """
import json, os, sys, time, torch, torch.distributed as dist
from torch import nn
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
# DistributedDataParallel: its reducer all-reduces the gradient buckets (gloo); the zero-code
# instrumentation times them through a communication hook (python/trainprof/_auto_ddp.py).
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 32), torch.randint(0, 2, (16,))
slept = 0.0
for step in range(int(sys.argv[1])):
    loss = nn.functional.cross_entropy(model(x), y)
    if rank == 1:  # the planted straggler: its compute per step is SLEEP_S longer
        t = time.perf_counter(); time.sleep(float(sys.argv[2])); slept += time.perf_counter() - t
    loss.backward()
    opt.step()
    opt.zero_grad()
dist.barrier()
print(json.dumps({"rank": rank, "host": os.environ.get("TRAINPROF_NODE"), "slept_s": slept,
                  "t_end": time.time()}))
dist.destroy_process_group()
"""


def _run(*args, check=True, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, check=check, **kw)


class Hosts:
    """Two network namespaces joined by a veth pair; removed in close() whatever happened."""

    def __init__(self):
        tag = f"{os.getpid() % 100000}"
        self.ns = [f"tpA{tag}", f"tpB{tag}"]
        self.dev = [f"tpa{tag}", f"tpb{tag}"]
        net = 10 + os.getpid() % 200  # a private /24 per test process
        self.addr = [f"10.77.{net}.1", f"10.77.{net}.2"]
        self.made = []

    def setup(self):
        for ns in self.ns:
            _run("ip", "netns", "add", ns)
            self.made.append(ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "link", "add", self.dev[0], "netns", self.ns[0], "type", "veth", "peer", "name",
             self.dev[1], "netns", self.ns[1])
        for ns, dev, addr in zip(self.ns, self.dev, self.addr):
            _run("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _run("ip", "-n", ns, "link", "set", dev, "up")

    def exec(self, i):
        return ["ip", "netns", "exec", self.ns[i]]

    def close(self):
        for ns in self.made:  # deleting a namespace deletes its end of the veth pair, and the pair
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.made = []


@pytest.fixture
def hosts():
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (CI runs the tests as root)")
    if shutil.which("ip") is None:
        pytest.skip("the `ip` command (iproute2) is not installed")
    h = Hosts()
    probe = subprocess.run(["ip", "netns", "add", h.ns[0]], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"`ip netns add` refused here: {probe.stderr.strip()}")
    subprocess.run(["ip", "netns", "del", h.ns[0]], capture_output=True)
    try:
        h.setup()
        yield h
    finally:
        h.close()


def _in_ns_get(h: Hosts, i: int, url: str) -> str:
    """GET url from inside namespace i (the test process itself stays in the root namespace)."""
    code = ("import sys, urllib.request; "
            "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=3).read().decode())")
    return _run(*h.exec(i), sys.executable, "-c", code, url, timeout=20).stdout


def _prom_query(h: Hosts, base: str, q: str) -> list:
    doc = json.loads(_in_ns_get(h, 0, f"{base}/api/v1/query?query={urllib.parse.quote(q)}"))
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def test_two_hosts_gloo_training_one_run_directory_straggler_and_prometheus(hosts, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("multihost", numbered=True)
    prom = shutil.which("prometheus")
    if prom is None:
        pytest.fail("prometheus is not installed (scripts/system-packages.txt: prometheus)")
    h = hosts
    run = tmp_path / "run"
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    t0 = time.monotonic()

    # A real Prometheus server on host-a, scraping both hosts' endpoints on their own addresses.
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(textwrap.dedent(f"""\
        global:
          scrape_interval: 250ms
          scrape_timeout: 200ms
        scrape_configs:
          - job_name: trainprof
            static_configs:
              - targets: ['{h.addr[0]}:{PROM_PORT}', '{h.addr[1]}:{PROM_PORT}']
        """))
    check = _run("promtool", "check", "config", str(cfg), check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    prom_base = f"http://{h.addr[0]}:9090"
    prom_proc = subprocess.Popen(
        [*h.exec(0), prom, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address={h.addr[0]}:9090"],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "w"))
    procs = []
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                if "Ready" in _in_ns_get(h, 0, f"{prom_base}/-/ready"):
                    break
            except subprocess.CalledProcessError:
                pass
            assert prom_proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "prometheus did not become ready in 20 s"
            time.sleep(0.3)

        # The same run directory, distinct node names: host-a's rank runs under `trainprof
        # record`; host-b's is started by someone else (as by a scheduler) with the
        # instrumentation's environment, and a `trainprof agent --pid` records that host, as the
        # DaemonSet and the SLURM prolog of docs/deploy.md do.
        import trainprof
        from trainprof import _core

        for rank, node in enumerate(["host-a", "host-b"]):
            env = dict(os.environ, MASTER_ADDR=h.addr[0], MASTER_PORT="29531", WORLD_SIZE="2",
                       RANK=str(rank), LOCAL_RANK="0", LOCAL_WORLD_SIZE="1",
                       GLOO_SOCKET_IFNAME=h.dev[rank], OMP_NUM_THREADS="1")
            job = [sys.executable, str(script), str(STEPS), str(SLEEP_S)]
            endpoint = ["--prometheus", f"{h.addr[rank]}:{PROM_PORT}", "--prometheus-allow-remote"]
            if node == "host-a":
                cmd = [*h.exec(rank), *trainprof_command(), "record", "--out", str(run), "--node",
                       node, "--interval", "100ms", "--no-gpu", "--live-rules-every", "0",
                       *endpoint, "--", *job]
                procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True))
                continue
            env.update(_core.child_environment(
                str(run), node=node, package_dir=str(Path(trainprof.__file__).resolve().parent),
                parent=env))
            # `ip netns exec` execs the command: the job's pid is this process's
            job_proc = subprocess.Popen([*h.exec(rank), *job], env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
            procs.append(job_proc)
            agent = [*h.exec(rank), *trainprof_command(), "agent", "--out", str(run), "--node", node,
                     "--pid", str(job_proc.pid), "--interval", "100ms", "--no-gpu", *endpoint]
            procs.append(subprocess.Popen(agent, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True))
        outs = [procs[0].communicate(timeout=120)]
        ended = time.time()  # host-a's recorder has served its last scrape
        outs += [p.communicate(timeout=120) for p in procs[1:]]
        print(f"training across the hosts ended after {time.monotonic() - t0:.1f} s")
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0, f"exit {p.returncode}\n{out}\n{err}"
        outs = outs[:2]  # the two ranks' (record passes its job's stdout through)
        reports = [json.loads(o.strip().splitlines()[-1]) for o, _ in outs]
        assert [(r["rank"], r["host"]) for r in reports] == [(0, "host-a"), (1, "host-b")]
        assert reports[1]["slept_s"] >= STEPS * SLEEP_S

        # Prometheus holds series from both hosts (count samples: after the jobs ended their
        # series are stale, so an instant query of the metric itself would be empty).
        time.sleep(0.5)
        res = _prom_query(h, prom_base, "count by (node, instance) "
                                        "(count_over_time(trainprof_cpu_utilization_ratio[10m]))")
        seen = {(r["metric"]["node"], r["metric"]["instance"]) for r in res}
        assert seen == {("host-a", f"{h.addr[0]}:{PROM_PORT}"), ("host-b", f"{h.addr[1]}:{PROM_PORT}")}, res
        assert all(int(r["value"][1]) >= 2 for r in res), res
        up = _prom_query(h, prom_base, 'max_over_time(up{job="trainprof"}[10m])')
        assert sorted(r["metric"]["instance"] for r in up if r["value"][1] == "1") == sorted(
            f"{a}:{PROM_PORT}" for a in h.addr)
        steps = _prom_query(h, prom_base, "max by (node) (max_over_time(trainprof_steps_total[10m]))")
        assert {r["metric"]["node"] for r in steps if float(r["value"][1]) > 0} == {"host-a", "host-b"}, steps

        # The checked-in Grafana dashboard (deploy/grafana) works on this Prometheus: every
        # expression but the GPU ones (no GPU here) returns series of both hosts, evaluated
        # while the jobs were still being scraped.
        from test_deploy import dashboard_exprs

        # At the end of training (its last steps are within the 5-s rate window), while both
        # recorders still exported: a recorder stops exporting when its job ends, then works on
        # (rules, report) before `ended`.
        at = min(ended - 1.5, min(r["t_end"] for r in reports) - 0.25)
        for expr in dashboard_exprs():
            q = expr.replace("$__rate_interval", "5s").replace("$node", ".+")
            doc = json.loads(_in_ns_get(h, 0, f"{prom_base}/api/v1/query?time={at}&query={urllib.parse.quote(q)}"))
            assert doc["status"] == "success", (expr, doc)
            result = doc["data"]["result"]
            if "gpu" in expr:
                assert result == [], (expr, result)
                continue
            nodes = {r["metric"].get("node") for r in result}
            instances = {r["metric"].get("instance") for r in result}
            assert nodes >= {"host-a", "host-b"} or len(instances) == 2, (expr, result)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        prom_proc.terminate()
        try:
            prom_proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            prom_proc.kill()
            prom_proc.wait()

    # The merged run: both hosts, both ranks, each rank on its own host.
    r = trainprof.open(str(run))
    assert sorted(r.nodes) == ["host-a", "host-b"]
    steps = r.steps().to_pandas()
    train = steps[steps["mode"] == "train"]
    by_rank = train.groupby("rank")
    assert sorted(by_rank.groups) == [0, 1]
    assert (by_rank.size() == STEPS).all(), by_rank.size()
    assert dict(train.groupby("rank")["node"].agg(lambda s: tuple(sorted(set(s))))) == {
        0: ("host-a",), 1: ("host-b",)}
    coll = r.events(categories=["collective"]).to_pandas()
    assert set(coll["node"]) == {"host-a", "host-b"}
    # DDP's own bucket all-reduces, on both ranks, inside their training steps; rank 0 waits
    # in them for rank 1 about the planted sleep per step
    ddp = coll[coll["args"].fillna("").astype(str).str.contains('"ddp_bucket"')]
    assert sorted(ddp["rank"].unique().tolist()) == [0, 1], coll
    assert ddp["step"].notna().all()
    waited = ddp.groupby(["rank", "step"])["duration_ns"].sum().groupby("rank").median() / 1e9
    assert waited[0] > 0.6 * SLEEP_S and waited[1] < 0.3 * SLEEP_S, waited

    # The straggler rule names rank 1 on host-b, and only it.
    rules = _run(*trainprof_command(), "rules", str(run), "--json", check=False)
    assert rules.returncode in (0, 2), rules.stderr  # 2: findings
    doc = json.loads(rules.stdout)
    findings = {r["name"]: r for r in doc["rules"]}["StragglerRank"]["findings"]
    assert findings, json.dumps(doc)[:3000]
    assert all("Rank 1 on host-b is a straggler" in f["message"] for f in findings), findings
    ev = findings[0]["evidence"]
    # its own time per step exceeds the other's by about the planted sleep
    # (median of two ranks: half way between them)
    assert 2 * (ev["rank_median_own_ms"] - ev["median_of_ranks_own_ms"]) >= 0.9 * SLEEP_S * 1000, ev

    # analyze names it too
    an = _run(*trainprof_command(), "analyze", str(run), "--json")
    analysis = json.loads(an.stdout)
    stragglers = analysis["stragglers"]
    assert [s["rank"] for s in stragglers] == ["1"], stragglers
    assert {r["label"]: r["node"] for r in analysis["ranks"]}["1"] == "host-b"
    # rank 1's own time per step (outside the all-reduces) holds the sleep; rank 0's does not
    assert 2 * (stragglers[0]["value_us"] - stragglers[0]["median_us"]) >= 0.9 * SLEEP_S * 1e6
    assert time.monotonic() - t0 < 90
