"""Every command that reads or writes a run directory takes an object-storage URL (issue 21,
docs/fleet.md "Object storage"), against moto's S3 server started on 127.0.0.1 (test_fleet's
fixture):

- a recorded run uploaded to the bucket: show, cost, rules, analyze, report and export
  chrome-trace on s3://... print and write what they do on the local run (compared with the
  local run's own output, the URL in place of the directory);
- outputs to URLs (report --out, export --out, import --out) land in the bucket; a report of a
  remote run is written back into it;
- `agent --out s3://` on two nodes: both nodes' stores in one run, one run.json;
- an unreachable endpoint, a bucket without permission, a missing bucket and a prefix without
  a run: exit 1, the URL named, no temporary directory left behind.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import trainprof
from conftest import SHARED_DATA, trainprof_command
from test_fleet import _free_port, _s3_env, _upload, s3_server  # noqa: F401 (fixture)

BUCKET = "readers"


def run_cli(*args, env, cwd=None, check=True, timeout=120):
    p = subprocess.run([*trainprof_command(), *map(str, args)], capture_output=True, text=True,
                       env=env, cwd=cwd, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"trainprof {' '.join(map(str, args))}: rc {p.returncode}\n"
                             f"{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p


@pytest.fixture(scope="module")
def remote(s3_server, tmp_path_factory):  # noqa: F811
    """A recorded run, locally and in the bucket; the environment; the temporary directory
    every command must leave empty."""
    import boto3

    root = tmp_path_factory.mktemp("readers")
    tmp = root / "tmp"
    tmp.mkdir()
    env = _s3_env(root, s3_server)
    env["TMPDIR"] = str(tmp)
    local = root / "runs" / "run1"
    run_cli("record", "--out", local, "--instance-type", "ml.g5.xlarge", "--no-gpu",
            "--interval", "100ms", "--tag", "team=vision", "--", sys.executable, "-c",
            "import time; time.sleep(0.6)", env=env)
    s3 = boto3.client("s3", endpoint_url=s3_server, aws_access_key_id="testing",
                      aws_secret_access_key="testing", region_name="us-east-1")
    s3.create_bucket(Bucket=BUCKET)
    for name in ("report.html", "report.json"):  # written back by the report test
        (local / name).unlink()
    _upload(s3, BUCKET, local, "team/run1")
    return {"local": local, "url": f"s3://{BUCKET}/team/run1", "env": env, "tmp": tmp,
            "s3": s3, "root": root}


def keys(s3, prefix: str) -> dict[str, int]:
    got = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {o["Key"][len(prefix):]: o["Size"] for o in got}


def no_temporaries(r) -> None:
    assert list(r["tmp"].iterdir()) == [], list(r["tmp"].iterdir())


def test_readers_print_what_they_print_locally(remote):
    r = remote
    local, url, env = r["local"], r["url"], r["env"]
    before = keys(r["s3"], "team/run1/")
    for args in (["show"], ["cost", "--json"], ["rules"], ["analyze"]):
        mine = run_cli(*args, local, env=env).stdout
        theirs = run_cli(*args, url, env=env).stdout
        assert theirs == mine.replace(str(local), url), args
        assert url in theirs or args[0] in ("analyze", "rules"), args
        no_temporaries(r)
    # Reading wrote nothing back.
    assert keys(r["s3"], "team/run1/") == before

    # export chrome-trace and report into local files: the same files.
    out = r["root"] / "out"
    out.mkdir()
    run_cli("export", "chrome-trace", local, "--out", out / "mine.json.gz", env=env)
    run_cli("export", "chrome-trace", url, "--out", out / "theirs.json.gz", env=env)
    assert json.loads(gzip.decompress((out / "theirs.json.gz").read_bytes())) == \
        json.loads(gzip.decompress((out / "mine.json.gz").read_bytes()))
    run_cli("report", local, "--out", out / "mine.html", "--json", out / "mine.json", env=env)
    run_cli("report", url, "--out", out / "theirs.html", "--json", out / "theirs.json", env=env)

    def comparable(path: Path) -> dict:
        j = json.loads(path.read_text())
        j.pop("generated")
        j.pop("run_dir")
        return j
    assert comparable(out / "theirs.json") == comparable(out / "mine.json")
    assert json.loads((out / "theirs.json").read_text())["cost"]["total_usd"] == \
        pytest.approx(json.loads(run_cli("cost", local, "--json", env=env).stdout)
                      ["total_cost_usd"], rel=1e-12)
    no_temporaries(r)

    # ls of a prefix lists the runs under it as ls of the local directory does.
    mine = run_cli("ls", local.parent, env=env).stdout
    theirs = run_cli("ls", f"s3://{BUCKET}/team", env=env).stdout
    def cells(text: str) -> list[list[str]]:  # the columns' widths follow the names
        return [line.split() for line in text.splitlines()]
    assert "run1" in mine and \
        cells(theirs) == cells(mine.replace(str(local.parent), f"s3://{BUCKET}/team"))
    no_temporaries(r)

    # A prefix holding a run is not a run: named.
    p = run_cli("show", f"s3://{BUCKET}/team", env=env, check=False)
    assert p.returncode == 1 and f"s3://{BUCKET}/team: not one run" in p.stderr, p.stderr
    no_temporaries(r)


def test_outputs_to_urls_and_written_back(remote, tmp_path):
    r = remote
    local, url, env, s3 = r["local"], r["url"], r["env"], r["s3"]
    # Outputs to URLs: the same bytes as written locally.
    run_cli("export", "chrome-trace", local, "--out", tmp_path / "t.json", env=env)
    p = run_cli("export", "chrome-trace", url, "--out", f"s3://{BUCKET}/out/t.json", env=env)
    assert f"s3://{BUCKET}/out/t.json" in p.stdout and "uploaded to" in p.stderr
    s3.download_file(BUCKET, "out/t.json", str(tmp_path / "t-remote.json"))
    assert (tmp_path / "t-remote.json").read_bytes() == (tmp_path / "t.json").read_bytes()
    run_cli("export", "csv", local, "--out", tmp_path / "csv", env=env)
    run_cli("export", "csv", url, "--out", f"s3://{BUCKET}/out/csv", env=env)
    got = keys(s3, "out/csv/")
    assert got == {f.name: f.stat().st_size for f in (tmp_path / "csv").iterdir()}
    run_cli("report", local, "--out", f"s3://{BUCKET}/out/report.html", env=env)
    assert keys(s3, "out/report.html")[""] > 10_000
    # A report of the remote run, with no --out, is written into the run, in the bucket.
    p = run_cli("report", url, env=env)
    assert f"wrote {url}/report.html" in p.stdout, p.stdout
    assert {"report.html", "report.json"} <= set(keys(s3, "team/run1/"))
    s3.download_file(BUCKET, "team/run1/report.json", str(tmp_path / "r.json"))
    run_cli("report", local, "--out", tmp_path / "l.html", "--json", tmp_path / "l.json",
            env=env)
    assert json.loads((tmp_path / "r.json").read_text())["summary"] == \
        json.loads((tmp_path / "l.json").read_text())["summary"]
    # import --out URL: the imported run is in the bucket and reads as a local import.
    horovod = SHARED_DATA / "smdebug" / "tests" / "profiler" / "resources" / \
        "horovod_timeline_small.json"
    run_cli("import", "horovod", horovod, "--out", tmp_path / "imp", "--base-time-us",
            "1700000000000000", env=env)
    run_cli("import", "horovod", horovod, "--out", f"s3://{BUCKET}/imported/imp",
            "--base-time-us", "1700000000000000", env=env)
    copy = tmp_path / "imp-copy"
    for k in keys(s3, "imported/imp/"):
        (copy / k).parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(BUCKET, f"imported/imp/{k}", str(copy / k))
    mine, theirs = trainprof.open(str(tmp_path / "imp")), trainprof.open(str(copy))
    assert len(theirs.events()) == len(mine.events()) > 0
    assert sorted(theirs.events().column("name")) == sorted(mine.events().column("name"))
    no_temporaries(r)


def test_agents_on_two_nodes_upload_one_run(remote, tmp_path):
    r = remote
    env, s3 = r["env"], r["s3"]
    url = f"s3://{BUCKET}/multi/job"
    nodes = {}
    for node, secs in (("n1", "1.2"), ("n2", "0.8")):
        cwd = tmp_path / node
        cwd.mkdir()
        p = run_cli("agent", "--out", url, "--node", node, "--duration", secs, "--no-gpu",
                    "--interval", "100ms", "--name", f"job-{node}", "--instance-type",
                    "ml.g5.xlarge", env=env, cwd=cwd)
        assert f"uploaded to {url}" in p.stderr, p.stderr
        nodes[node] = cwd / "trainprof-runs" / "job"
    got = keys(s3, "multi/job/")
    assert "run.json" in got and any(k.startswith("nodes/n1/") for k in got) and \
        any(k.startswith("nodes/n2/") for k in got)
    assert not any(k.endswith("-wal") for k in got), got  # checkpointed, the stale log deleted
    first = json.loads((nodes["n1"] / "run.json").read_text())
    second = json.loads((nodes["n2"] / "run.json").read_text())
    remote_meta = json.loads(s3.get_object(Bucket=BUCKET, Key="multi/job/run.json")["Body"]
                             .read())
    # The second node joined the first one's run.
    assert second["run_id"] == first["run_id"] == remote_meta["run_id"]
    assert remote_meta["name"] == "job-n1"
    assert remote_meta["end_ns"] == max(first["end_ns"], second["end_ns"])
    # The bucket's run holds each node's samples as recorded on that node.
    copy = tmp_path / "copy"
    for k in got:
        (copy / k).parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(BUCKET, f"multi/job/{k}", str(copy / k))
    merged = trainprof.open(str(copy)).system_metrics()
    for node, d in nodes.items():
        assert int((merged.column("node") == node).sum()) == \
            len(trainprof.open(str(d)).system_metrics()) > 0
    show = run_cli("show", url, env=env).stdout
    assert "n1" in show and "n2" in show and first["run_id"] in show
    no_temporaries(r)


def test_errors_name_the_url_and_leave_nothing(remote, s3_server, tmp_path):  # noqa: F811
    r = remote
    env, s3, local = r["env"], r["s3"], r["local"]
    s3.create_bucket(Bucket="locked")
    _upload(s3, "locked", local, "team/run1")  # then locked (moto denies object reads)
    s3.put_bucket_policy(Bucket="locked", Policy=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Deny", "Principal": "*",
                                                "Action": "s3:*",
                                                "Resource": ["arn:aws:s3:::locked",
                                                             "arn:aws:s3:::locked/*"]}]}))
    before = sorted((p.relative_to(local).as_posix(), p.stat().st_mtime_ns)
                    for p in local.rglob("*"))
    down = dict(env, AWS_ENDPOINT_URL=f"http://127.0.0.1:{_free_port()}")
    cases = [  # (command, environment, the URL named, what went wrong)
        (["show", "s3://locked/team/run1"], env, "s3://locked/team/run1", "access denied"),
        (["cost", f"s3://{BUCKET}/team/run1"], down, f"s3://{BUCKET}/team/run1",
         "cannot reach the object store"),
        (["show", "s3://no-such-bucket/run1"], env, "s3://no-such-bucket/run1",
         "no such bucket"),
        (["report", f"s3://{BUCKET}/nothing/here"], env, f"s3://{BUCKET}/nothing/here",
         "no run (no run.json) under this prefix"),
        (["report", local, "--out", "s3://locked/r.html"], env, "s3://locked/r.html",
         "access denied"),
        (["export", "chrome-trace", local, "--out", f"s3://{BUCKET}/t.json"], down,
         f"s3://{BUCKET}/t.json", "cannot reach the object store"),
        (["agent", "--out", "s3://locked/agent/job", "--duration", "0.3", "--no-gpu"], env,
         "s3://locked/agent/job", "failed"),
    ]
    for args, e, url, problem in cases:
        p = run_cli(*args, env=e, cwd=tmp_path, check=False)
        if args[0] == "agent":  # the recording is kept locally; the upload is a warning
            assert p.returncode == 0, p.stderr
            assert f"upload to {url} failed" in p.stderr and "access denied" in p.stderr, \
                p.stderr
            assert len(trainprof.open(str(tmp_path / "trainprof-runs" / "job"))
                       .system_metrics()) > 0
        else:
            assert p.returncode == 1, (args, p.returncode, p.stderr)
            assert f"error: {args[0]} " in p.stderr and url in p.stderr and \
                problem in p.stderr, (args, p.stderr)
        no_temporaries(r)
    # The local run is as it was.
    assert sorted((p.relative_to(local).as_posix(), p.stat().st_mtime_ns)
                  for p in local.rglob("*")) == before
