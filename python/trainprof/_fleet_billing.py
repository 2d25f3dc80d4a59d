"""What AWS billed, set beside what the runs measured (`trainprof fleet --billing`):
DescribeTrainingJob answers (warm-pool keep-alive time) and CUR line items, bounded in size and
rows, reconciled per job."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
from pathlib import Path

from trainprof._fleet_base import FleetError, STORAGE_USAGE
from trainprof._fleet_runs import _read_limited

MAX_BILLING_BYTES = 512 << 20
MAX_BILLING_ROWS = 5_000_000
MISMATCH_SECONDS = 60.0  # billed vs measured: beyond max(this, MISMATCH_SHARE) is a mismatch
MISMATCH_SHARE = 0.05


def _when(x) -> float | None:
    """A DescribeTrainingJob time (ISO 8601 text as the CLI prints it, or epoch seconds)."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    if isinstance(x, str) and x:
        try:
            return dt.datetime.fromisoformat(x.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _job_from_arn(arn: str) -> str:
    return arn.rsplit("training-job/", 1)[1] if "training-job/" in arn else arn


def read_describe(data: dict, what: str) -> dict:
    """One DescribeTrainingJob response -> the figures reconciled (AWS's field names)."""
    name = data.get("TrainingJobName")
    if not isinstance(name, str) or not name:
        raise FleetError(f"{what}: no TrainingJobName (not a DescribeTrainingJob response)")
    rc = data.get("ResourceConfig") if isinstance(data.get("ResourceConfig"), dict) else {}
    phases: dict[str, float] = {}
    for t in (data.get("SecondaryStatusTransitions") or [])[:1000]:
        if not isinstance(t, dict):
            continue
        a, b = _when(t.get("StartTime")), _when(t.get("EndTime"))
        if a is not None and b is not None and b >= a:
            st = str(t.get("Status", "")).lower()
            phases[st] = phases.get(st, 0.0) + (b - a)
    wp = data.get("WarmPoolStatus") if isinstance(data.get("WarmPoolStatus"), dict) else {}
    count = rc.get("InstanceCount") if isinstance(rc.get("InstanceCount"), int) else 1
    billable = data.get("BillableTimeInSeconds")
    training = data.get("TrainingTimeInSeconds")
    return {
        "job": name, "instance_type": str(rc.get("InstanceType") or ""), "instance_count": count,
        "volume_gb": rc.get("VolumeSizeInGB"),
        "spot": bool(data.get("EnableManagedSpotTraining")),
        "billable_seconds": float(billable) if isinstance(billable, (int, float)) else None,
        "training_seconds": float(training) if isinstance(training, (int, float)) else None,
        "input_mode": str((data.get("AlgorithmSpecification") or {}).get("TrainingInputMode")
                          or ""),
        "status": str(data.get("TrainingJobStatus") or ""),
        "phases_seconds": phases,
        "warm_pool_status": str(wp.get("Status") or ""),
        "warm_pool_billed_seconds": wp.get("ResourceRetainedBillableTimeInSeconds"),
        "keep_alive_seconds": rc.get("KeepAlivePeriodInSeconds"),
    }


CUR_COLUMNS = ("line_item_usage_type", "line_item_resource_id", "line_item_usage_amount",
               "line_item_unblended_cost")


def read_cur_rows(rows, what: str) -> dict[str, dict]:
    """CUR 2.0 line items -> per training job: compute hours and cost, storage cost."""
    jobs: dict[str, dict] = {}
    n = 0
    for r in rows:
        n += 1
        if n > MAX_BILLING_ROWS:
            raise FleetError(f"{what}: more than {MAX_BILLING_ROWS} line items")
        ut = str(r.get("line_item_usage_type") or "")
        rid = str(r.get("line_item_resource_id") or "")
        if "-Train:" not in ut or "training-job/" not in rid:
            continue
        try:
            amount = float(r.get("line_item_usage_amount") or 0)
            cost = float(r.get("line_item_unblended_cost") or 0)
        except (TypeError, ValueError) as e:
            raise FleetError(f"{what}: line item {n}: not a number ({e})") from e
        j = jobs.setdefault(_job_from_arn(rid), {"instance_hours": 0.0, "compute_cost_usd": 0.0,
                                                 "storage_cost_usd": 0.0, "usage_types": set(),
                                                 "by_usage": {}})
        j["usage_types"].add(ut)
        u = j["by_usage"].setdefault(ut, [0.0, 0.0])
        u[0] += amount
        u[1] += cost
        if ut.endswith(STORAGE_USAGE) or "VolumeUsage" in ut:
            j["storage_cost_usd"] += cost
        else:
            j["instance_hours"] += amount
            j["compute_cost_usd"] += cost
    return jobs


def read_billing(paths: list[str]) -> tuple[dict[str, dict], dict[str, dict]]:
    """DescribeTrainingJob JSON files and CUR 2.0 files (CSV, CSV.gz, Parquet)."""
    describe: dict[str, dict] = {}
    cur: dict[str, dict] = {}
    for path in paths:
        if not os.path.isfile(path):
            raise FleetError(f"{path}: no such file")
        if os.path.getsize(path) > MAX_BILLING_BYTES:
            raise FleetError(f"{path}: more than {MAX_BILLING_BYTES} bytes")
        low = path.lower()
        if low.endswith(".json"):
            try:
                j = json.loads(_read_limited(Path(path), MAX_BILLING_BYTES))
            except ValueError as e:
                raise FleetError(f"{path}: not JSON ({e})") from e
            items = j if isinstance(j, list) else j.get("TrainingJobs", [j]) \
                if isinstance(j, dict) else None
            if not isinstance(items, list):
                raise FleetError(f"{path}: not a DescribeTrainingJob response (or a list)")
            for i, item in enumerate(items[:100_000]):
                if not isinstance(item, dict):
                    raise FleetError(f"{path}: item {i} is not an object")
                d = read_describe(item, f"{path} item {i}")
                describe[d["job"]] = d
        elif low.endswith(".parquet"):
            import pyarrow.parquet as pq

            t = pq.read_table(path)
            missing = [c for c in CUR_COLUMNS if c not in t.column_names]
            if missing:
                raise FleetError(f"{path}: not a CUR 2.0 file: no {', '.join(missing)}")
            merge_cur(cur, read_cur_rows(t.select(list(CUR_COLUMNS)).to_pylist(), path))
        elif low.endswith(".csv") or low.endswith(".csv.gz"):
            import gzip

            opener = gzip.open if low.endswith(".gz") else open
            with opener(path, "rt", newline="") as f:
                reader = csv.DictReader(f)
                missing = [c for c in CUR_COLUMNS if c not in (reader.fieldnames or [])]
                if missing:
                    raise FleetError(f"{path}: not a CUR 2.0 file: no {', '.join(missing)}")
                merge_cur(cur, read_cur_rows(reader, path))
        else:
            raise FleetError(f"{path}: --billing takes DescribeTrainingJob .json or CUR 2.0 "
                             ".csv / .csv.gz / .parquet")
    return describe, cur


def merge_cur(into: dict, more: dict) -> None:
    for job, v in more.items():
        j = into.setdefault(job, {"instance_hours": 0.0, "compute_cost_usd": 0.0,
                                  "storage_cost_usd": 0.0, "usage_types": set(),
                                  "by_usage": {}})
        for k in ("instance_hours", "compute_cost_usd", "storage_cost_usd"):
            j[k] += v[k]
        j["usage_types"] |= v["usage_types"]
        for ut, (amount, cost) in v["by_usage"].items():
            u = j["by_usage"].setdefault(ut, [0.0, 0.0])
            u[0] += amount
            u[1] += cost


def _job_of(s: dict) -> str:
    run = s["run"]
    tags = run.get("tags") if isinstance(run.get("tags"), dict) else {}
    return str(tags.get("training_job") or tags.get("sagemaker_job") or run.get("name") or "")


def _differs(a: float, b: float) -> bool:
    return abs(a - b) > max(MISMATCH_SECONDS, MISMATCH_SHARE * max(abs(a), abs(b)))


def reconcile(summaries: list[dict], describe: dict, cur: dict) -> list[dict]:
    """Per training job: what AWS billed beside what trainprof measured; a mismatch is shown."""
    by_job = {}
    for s in summaries:
        by_job.setdefault(_job_of(s), s)
    out = []
    for job in sorted(set(describe) | set(cur)):
        d, c, s = describe.get(job), cur.get(job), by_job.get(job)
        cost = (s or {}).get("cost") or {}
        measured = cost.get("billed_instance_seconds") if cost else None
        row = {"job": job, "run": s.get("_location") if s else None,
               "measured_billed_seconds": measured,
               "measured_cost_usd": cost.get("total_cost_usd") if cost else None,
               "measured_phases_seconds": {p["phase"]: p["billed_seconds"]
                                           for p in cost.get("phases") or []} if cost else {}}
        problems = []
        if d is not None:
            billed = d["billable_seconds"] * d["instance_count"] \
                if d["billable_seconds"] is not None else None
            row.update({"instance_type": d["instance_type"], "instance_count": d["instance_count"],
                        "spot": d["spot"], "billable_seconds": billed,
                        "training_seconds": d["training_seconds"],
                        "input_mode": d["input_mode"], "aws_phases_seconds": d["phases_seconds"],
                        "warm_pool_status": d["warm_pool_status"],
                        "warm_pool_billed_seconds": d["warm_pool_billed_seconds"]})
            if d["spot"] and d["billable_seconds"] is not None and d["training_seconds"]:
                row["spot_saving_pct"] = 100.0 * (1 - d["billable_seconds"]
                                                  / d["training_seconds"])
            if billed is not None and measured is not None and _differs(billed, measured):
                problems.append(f"billed {billed:.0f} s (BillableTimeInSeconds x InstanceCount) "
                                f"vs measured {measured:.0f} s")
            if s is not None and cost and d["instance_type"] and \
                    d["instance_type"] != cost.get("instance_type"):
                problems.append(f"instance type {d['instance_type']} billed, "
                                f"{cost.get('instance_type')} priced")
        if c is not None:
            row.update({"cur_instance_seconds": c["instance_hours"] * 3600.0,
                        "cur_cost_usd": c["compute_cost_usd"] + c["storage_cost_usd"],
                        "cur_usage_types": sorted(c["usage_types"])})
            if measured is not None and _differs(c["instance_hours"] * 3600.0, measured):
                problems.append(f"CUR {c['instance_hours'] * 3600.0:.0f} instance-seconds vs "
                                f"measured {measured:.0f} s")
        if s is None:
            problems.append("no run of this job among RUNS (tag the run training_job=NAME)")
        elif not cost:
            problems.append("the run has no price: " + str(s.get("cost_error") or ""))
        row["status"] = "match" if not problems else "mismatch"
        row["problems"] = problems
        out.append(row)
    return out
