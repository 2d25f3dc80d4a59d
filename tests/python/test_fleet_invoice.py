"""The fleet's invoice by hand (issue 21, docs/fleet.md): warm-pool keep-alive time priced at the
instance rate (from a DescribeTrainingJob's WarmPoolStatus and from a run's tag), CUR 2.0 line
items merged into the usage types beside what was measured, and the what-ifs' savings scaled
to a month. Every expected number is computed here from the fixture's own fields (the runs'
summaries, the DescribeTrainingJob responses and the CUR line items), never from trainprof.
"""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys

import pytest

from conftest import trainprof_command

DAY_NS = 86_400 * 10**9
T0 = 1_790_000_000 * 10**9
ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-job/"

# name, job, instance type, $/h, nodes, billed s per node, storage $ per node, start, length s,
# tags, spot saving $
RUNS = [
    ("run-a", "job-a", "ml.g5.xlarge", 1.408, 2, 3600, 0.05, T0, 3600,
     {"training_job": "job-a", "team": "vision"}, 1.25),
    ("run-b", "job-b", "ml.p3.2xlarge", 3.825, 1, 1800, 0.0, T0 + 3 * DAY_NS, 1800,
     {"training_job": "job-b", "warm_pool_seconds": "300"}, 0.5),
    ("run-c", "job-c", "ml.g5.xlarge", 1.408, 1, 7200, 0.0, T0 + 9 * DAY_NS, 7200,
     {"training_job": "job-c"}, 0.0),
]
WARM_A = 600  # job-a's ResourceRetainedBillableTimeInSeconds (per instance)
CUR = [  # usage type, resource, amount, unblended cost
    ("USE1-Train:ml.g5.xlarge", ARN + "job-a", 1.0, 1.41),
    ("USE1-Train:ml.g5.xlarge", ARN + "job-a", 1.4, 1.97),
    ("USE1-Train:VolumeUsage.gp2", ARN + "job-a", 0.04, 0.004),
    ("USE1-Train:ml.p3.2xlarge", ARN + "job-b", 0.6, 2.30),
    ("USE1-Train:ml.g5.xlarge", ARN + "job-z", 5.0, 7.04),  # a job not among the runs
    ("USE1-BoxUsage:m5.large", "i-0abc", 1.0, 0.096),  # EC2: not training
]


def summary(name, job, itype, rate, nodes, billed, storage, start, length, tags, spot):
    node_rows = [{"node": f"algo-{i + 1}", "instance_type": itype, "billed_seconds": billed,
                  "compute_cost_usd": billed * rate / 3600, "storage_cost_usd": storage,
                  "price": {"region": "us-east-1", "service": "sagemaker-training",
                            "instance_type": itype, "price_usd_per_hour": rate}}
                 for i in range(nodes)]
    compute = sum(n["compute_cost_usd"] for n in node_rows)
    total = compute + storage * nodes
    return {
        "summary_version": 1, "user": "ana",
        "run": {"name": name, "run_id": f"id-{name}", "source": "record", "start_ns": start,
                "end_ns": start + length * 10**9, "instance_type": itype, "tags": tags},
        "cost": {"instance_type": itype, "instance_count": nodes,
                 "price": node_rows[0]["price"], "nodes": node_rows,
                 "billed_instance_seconds": billed * nodes, "compute_cost_usd": compute,
                 "storage_cost_usd": storage * nodes, "total_cost_usd": total,
                 "phases": [{"phase": "training", "billed_seconds": billed * nodes,
                             "cost_usd": compute}],
                 "what_ifs": [{"id": "managed_spot", "title": "managed spot",
                               "saving_usd": spot}] if spot else [],
                 "idle_accelerator_cost_usd": None},
        "cost_error": None,
    }


def describe(job, itype, count, billable, retained):
    return {"TrainingJobName": job, "TrainingJobArn": ARN + job,
            "TrainingJobStatus": "Completed",
            "ResourceConfig": {"InstanceType": itype, "InstanceCount": count,
                               "VolumeSizeInGB": 30, "KeepAlivePeriodInSeconds": 1800},
            "BillableTimeInSeconds": billable, "TrainingTimeInSeconds": billable,
            "EnableManagedSpotTraining": False,
            "WarmPoolStatus": {"Status": "Terminated",
                               "ResourceRetainedBillableTimeInSeconds": retained}}


def cli(*args, env=None, check=True):
    p = subprocess.run([*trainprof_command(), *map(str, args)], capture_output=True, text=True,
                       env=env, timeout=120)
    if check and p.returncode != 0:
        raise AssertionError(f"rc {p.returncode}: {p.stderr[-2000:]}")
    return p


@pytest.fixture()
def fleet(tmp_path):
    for r in RUNS:
        d = tmp_path / "runs" / r[0]
        d.mkdir(parents=True)
        s = summary(*r)
        (d / "run.json").write_text(json.dumps(s["run"]))
        (d / "summary.json").write_text(json.dumps(s))
    (tmp_path / "jobs.json").write_text(json.dumps({"TrainingJobs": [
        describe("job-a", "ml.g5.xlarge", 2, 3600, WARM_A),
        describe("job-b", "ml.p3.2xlarge", 1, 1800, 0)]}))
    with open(tmp_path / "cur.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["line_item_usage_type", "line_item_resource_id", "line_item_usage_amount",
                    "line_item_unblended_cost"])
        w.writerows(CUR)
    return tmp_path


def test_warm_pool_cur_and_month_by_hand(fleet):
    out = json.loads(cli("fleet", fleet / "runs", "--json", "--billing", fleet / "jobs.json",
                         fleet / "cur.csv").stdout)
    by = {r[0]: r for r in RUNS}
    a, b = by["run-a"], by["run-b"]
    # Warm pool: job-a from DescribeTrainingJob (retained x InstanceCount), job-b from its tag.
    warm_a_s = WARM_A * a[4]
    warm_b_s = float(b[9]["warm_pool_seconds"]) * b[4]
    warm_a = warm_a_s * a[3] / 3600
    warm_b = warm_b_s * b[3] / 3600
    # The retained instances keep their ML storage (NOTES.md 2.6): job-a's volume costs
    # $0.05 a node over its 3600 billed s; job-b's type has no storage line.
    warm_a_storage = warm_a_s * a[6] / a[5]
    assert warm_a_storage > 0 and b[6] == 0
    measured = math.fsum(summary(*r)["cost"]["total_cost_usd"] for r in RUNS)
    assert out["total_cost_usd"] == pytest.approx(measured + warm_a + warm_a_storage + warm_b,
                                                  rel=1e-12)
    wp = {w["job"]: w for w in out["warm_pool"]["runs"]}
    assert set(wp) == {"job-a", "job-b"}
    assert wp["job-a"]["seconds"] == warm_a_s
    assert wp["job-a"]["cost_usd"] == pytest.approx(warm_a + warm_a_storage)
    assert wp["job-a"]["storage_cost_usd"] == pytest.approx(warm_a_storage)
    assert "DescribeTrainingJob job-a" in wp["job-a"]["source"]
    assert "ResourceRetainedBillableTimeInSeconds 600 x InstanceCount 2" in wp["job-a"]["source"]
    assert wp["job-b"]["seconds"] == warm_b_s and wp["job-b"]["cost_usd"] == pytest.approx(warm_b)
    assert wp["job-b"]["source"].startswith("tag warm_pool_seconds=300")
    assert out["warm_pool"]["cost_usd"] == pytest.approx(warm_a + warm_a_storage + warm_b)
    phases = {p["phase"]: p for p in out["by_phase"]}
    assert phases["warm_pool"]["billed_seconds"] == warm_a_s + warm_b_s
    assert phases["warm_pool"]["cost_usd"] == pytest.approx(warm_a + warm_a_storage + warm_b)

    # Usage types: measured hours and cost (warm pool included) beside CUR's of the same jobs.
    g5 = [r for r in RUNS if r[2] == "ml.g5.xlarge"]
    usage = {u["usage_type"]: u for u in out["by_usage_type"]}
    assert usage["USE1-Train:ml.g5.xlarge"]["hours"] == pytest.approx(
        (sum(r[4] * r[5] for r in g5) + warm_a_s) / 3600)
    assert usage["USE1-Train:ml.g5.xlarge"]["cost_usd"] == pytest.approx(
        sum(r[4] * r[5] * r[3] / 3600 for r in g5) + warm_a)
    assert usage["USE1-Train:ml.p3.2xlarge"]["cost_usd"] == pytest.approx(
        b[4] * b[5] * b[3] / 3600 + warm_b)
    assert usage["USE1-Train:VolumeUsage.gp2"]["cost_usd"] == pytest.approx(
        a[4] * a[6] + warm_a_storage)
    jobs = {r[1] for r in RUNS}
    billed = {}
    for ut, rid, amount, cost in CUR:
        job = rid.rsplit("training-job/", 1)[-1]
        if "-Train:" in ut and job in jobs:
            billed.setdefault(ut, [0.0, 0.0])
            billed[ut][0] += amount
            billed[ut][1] += cost
    assert {k: u["billed_cost_usd"] for k, u in usage.items()
            if u["billed_cost_usd"] is not None} == pytest.approx({k: v[1] for k, v in
                                                                    billed.items()})
    assert usage["USE1-Train:ml.g5.xlarge"]["billed_usage_amount"] == pytest.approx(2.4)
    assert usage["USE1-Train:ml.g5.xlarge"]["billed_jobs"] == 1
    assert usage["USE1-Train:VolumeUsage.gp2"]["billed_cost_usd"] == pytest.approx(0.004)
    assert out["billed_other_jobs"] == {"jobs": 1, "cost_usd": pytest.approx(7.04)}

    # Savings a month: the fleet covers run-a's start to run-c's end.
    c = by["run-c"]
    days = (c[7] + c[8] * 10**9 - a[7]) / DAY_NS
    assert out["period"]["days"] == pytest.approx(days) and days > 9
    spot = a[10] + b[10]
    s = {x["what"]: x for x in out["savings"]}["managed_spot"]
    assert s["saving_usd"] == pytest.approx(spot)
    assert s["saving_usd_per_month"] == pytest.approx(spot * 30 / days)

    text = cli("fleet", fleet / "runs", "--billing", fleet / "jobs.json", fleet / "cur.csv"
               ).stdout
    assert f"-${spot * 30 / days:,.2f} a month" in text
    assert "billed (CUR)" in text and "warm-pool keep-alive" in text
    assert f"fleet's {days:.2f} days" in text
    rows = list(csv.DictReader(io.StringIO(cli(
        "fleet", fleet / "runs", "--csv", "-", "--billing", fleet / "jobs.json",
        fleet / "cur.csv").stdout)))
    month = [r for r in rows if r["dimension"] == "saving_per_month"]
    assert [(r["key"], float(r["cost_usd"])) for r in month] == [
        ("managed_spot", pytest.approx(spot * 30 / days))]

    # Without --billing, job-b's tag still prices its warm pool; job-a's comes from AWS only.
    plain = json.loads(cli("fleet", fleet / "runs", "--json").stdout)
    assert plain["total_cost_usd"] == pytest.approx(measured + warm_b, rel=1e-12)
    assert "billed_other_jobs" not in plain
    assert all("billed_cost_usd" not in u for u in plain["by_usage_type"])


def test_bad_warm_pool_tag_is_named(fleet):
    d = fleet / "runs" / "run-b"
    s = json.loads((d / "summary.json").read_text())
    s["run"]["tags"]["warm_pool_seconds"] = "ten minutes"
    (d / "summary.json").write_text(json.dumps(s))
    p = cli("fleet", fleet / "runs", "--json", check=False)
    assert p.returncode == 1
    assert "run-b: tag warm_pool_seconds='ten minutes': not a number of seconds" in p.stderr


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
