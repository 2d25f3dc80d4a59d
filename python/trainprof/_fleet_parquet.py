"""`trainprof export parquet RUNS... --out DIR`: runs as Hive-partitioned Parquet tables
(docs/fleet.md, "Parquet")."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

from trainprof._fleet_base import DEFAULT_REGION, FleetError, _num, usage_type
from trainprof._fleet_runs import find_runs, materialise, priced_cost
from trainprof._objstore import _open_out

_HIVE_BAD = re.compile(r"[^A-Za-z0-9._-]")


def partition_name(name: str) -> str:
    """A run's name as a Hive partition value (no '/', '=' or other specials)."""
    return _HIVE_BAD.sub("_", name)[:200] or "run"


def _schemas():
    import pyarrow as pa

    i64, f64, s = pa.int64(), pa.float64(), pa.string()
    return {
        "metrics": pa.schema([("node", s), ("metric", s), ("device", s), ("timestamp_ns", i64),
                              ("value", f64)]),
        "steps": pa.schema([("node", s), ("rank", i64), ("pid", i64), ("step", i64),
                            ("mode", s), ("start_ns", i64), ("duration_ns", i64),
                            ("data_wait_ns", i64), ("forward_ns", i64), ("backward_ns", i64),
                            ("optimizer_ns", i64)]),
        "events": pa.schema([("node", s), ("rank", i64), ("pid", i64), ("tid", i64),
                             ("name", s), ("category", s), ("mode", s), ("step", i64),
                             ("start_ns", i64), ("duration_ns", i64), ("kind", s),
                             ("args", s)]),
        "findings": pa.schema([("rule", s), ("severity", s), ("node", s), ("device", s),
                               ("start_ns", i64), ("end_ns", i64), ("message", s),
                               ("recommendation", s), ("evidence", s)]),
        "costs": pa.schema([("item", s), ("node", s), ("instance_type", s), ("usage_type", s),
                            ("phase", s), ("billed_seconds", f64), ("cost_usd", f64),
                            ("saving_usd", f64), ("title", s)]),
    }


def _table_of(tab, schema):
    """A trainprof reader table as a pyarrow table with `schema` (missing -> null)."""
    import numpy as np
    import pyarrow as pa

    cols = []
    for f in schema:
        name = f.name
        if name == "kind":
            col = tab.column("kind")
            cols.append(pa.array(np.where(col == 0, "span", "instant").astype(object)
                                 if len(col) else [], type=pa.string()))
            continue
        col = tab.column(name)
        if pa.types.is_int64(f.type):
            if col.dtype.kind == "f":  # nullable integers come back as float with NaN
                mask = np.isnan(col)
                cols.append(pa.array(np.where(mask, 0, col).astype(np.int64), mask=mask))
            else:
                cols.append(pa.array(col.astype(np.int64)))
        elif pa.types.is_float64(f.type):
            cols.append(pa.array(col.astype(np.float64)))
        else:
            cols.append(pa.array([None if v is None else str(v) for v in col], type=pa.string()))
    return pa.Table.from_arrays(cols, schema=schema)


def export_run(run_dir: Path, name: str, out: Path, instance_type: str = "") -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    import trainprof

    run = trainprof.open(str(run_dir))
    sch = _schemas()
    part = partition_name(name)
    tables = {
        "metrics": _table_of(run.system_metrics(), sch["metrics"]),
        "steps": _table_of(run.steps(), sch["steps"]),
        "events": _table_of(run.events(), sch["events"]),
    }
    f_rows = {k: [] for k in sch["findings"].names}
    for f in run.findings():
        for k in sch["findings"].names:
            v = getattr(f, k)
            f_rows[k].append(json.dumps(v, sort_keys=True) if k == "evidence" else v)
    tables["findings"] = pa.table(f_rows, schema=sch["findings"])
    c_rows = {k: [] for k in sch["costs"].names}

    def add(**kw):
        for k in sch["costs"].names:
            c_rows[k].append(kw.get(k))
    try:
        cost = priced_cost(run, instance_type)
    except Exception as e:
        cost = None
        add(item="unpriced", title=str(e))
    if cost is not None:
        add(item="total", instance_type=cost.get("instance_type"),
            billed_seconds=_num(cost.get("billed_instance_seconds")),
            cost_usd=_num(cost.get("total_cost_usd")))
        for n in cost.get("nodes") or []:
            np_ = n.get("price") or cost.get("price") or {}
            add(item="node", node=n.get("node"), instance_type=n.get("instance_type"),
                usage_type=usage_type(np_, DEFAULT_REGION, str(n.get("instance_type"))),
                billed_seconds=_num(n.get("billed_seconds")),
                cost_usd=_num(n.get("compute_cost_usd")))
            if _num(n.get("storage_cost_usd")) > 0:
                add(item="storage", node=n.get("node"), instance_type=n.get("instance_type"),
                    usage_type=usage_type(np_, DEFAULT_REGION, "", storage=True),
                    billed_seconds=_num(n.get("billed_seconds")),
                    cost_usd=_num(n.get("storage_cost_usd")))
            for p in n.get("phases") or []:
                add(item="phase", node=n.get("node"), instance_type=n.get("instance_type"),
                    phase=p.get("phase"), billed_seconds=_num(p.get("billed_seconds")),
                    cost_usd=_num(p.get("cost_usd")))
        if cost.get("idle_accelerator_cost_usd") is not None:
            add(item="idle", cost_usd=_num(cost["idle_accelerator_cost_usd"]))
        for w in cost.get("what_ifs") or []:
            add(item="what_if", phase=w.get("id"), title=w.get("title"),
                instance_type=w.get("instance_type") or None,
                cost_usd=_num(w.get("new_cost_usd")), saving_usd=_num(w.get("saving_usd")))
    tables["costs"] = pa.table(c_rows, schema=sch["costs"])
    counts = {}
    for t, tab in tables.items():
        d = out / t / f"run={part}"
        d.mkdir(parents=True, exist_ok=True)
        pq.write_table(tab, d / "part-0.parquet")
        counts[t] = tab.num_rows
    return counts


def export_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="trainprof export parquet", description=(
        "Runs as Hive-partitioned Parquet: OUT/<table>/run=<name>/part-0.parquet for metrics, "
        "steps, events, findings and costs (docs/fleet.md)."))
    ap.add_argument("runs", nargs="+", metavar="RUNS")
    ap.add_argument("--out", required=True, help="directory or URL (s3://bucket/prefix)")
    ap.add_argument("--instance-type", default="",
                    help="price the runs that have no price otherwise (no instance type named or "
                         "detected) as this type")
    ap.add_argument("--json", action="store_true", help="print what was written as JSON")
    a = ap.parse_args(argv)
    refs = find_runs(a.runs)
    names: dict[str, str] = {}
    for r in refs:
        p = partition_name(r.name)
        if p in names:
            raise FleetError(f"two runs export as run={p}: {names[p]} and {r.location} "
                             "(rename one)")
        names[p] = r.location
    local, finish = _open_out(a.out)
    scratch = Path(tempfile.mkdtemp(prefix="trainprof-export-"))
    written = []
    try:
        for r in refs:
            run_dir = materialise(r, scratch)
            counts = export_run(run_dir, r.name, local, a.instance_type)
            written.append({"run": r.location, "partition": partition_name(r.name),
                            "rows": counts})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        finish()
    if a.json:
        json.dump({"out": a.out, "runs": written}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        for w in written:
            rows = ", ".join(f"{k} {v}" for k, v in w["rows"].items())
            print(f"{w['run']} -> run={w['partition']}: {rows}")
        print(f"wrote {len(written)} runs to {a.out}")
    return 0
