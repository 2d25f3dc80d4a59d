"""`trainprof instances --sort gb|fp32|bf16`: instance types ranked by what an hour buys, $ per
GiB of accelerator memory and $ per peak dense TFLOP (issue 21). The figures and the order are
computed here from data/catalog with the csv module, independently of trainprof's catalog
loader and of the command."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "data" / "catalog"


def number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def expected() -> dict[tuple[str, str, str], dict[str, float | None]]:
    """(service, type, region) -> the hourly price per GiB / fp32 TFLOP / bf16 TFLOP, by hand."""
    with open(CATALOG / "accelerators.csv", newline="") as f:
        accel = {r["accel_model"]: r for r in csv.DictReader(f)}
    out = {}
    with open(CATALOG / "instances.csv", newline="") as f:
        for r in csv.DictReader(f):
            n = int(number(r["accel_count"]) or 0)
            price = number(r["price_usd_per_hour"])
            a = accel.get(r["accel_model"], {})
            gib = number(r["accel_mem_gib_each"]) or number(a.get("memory_gib", ""))
            fp32 = number(a.get("fp32_tflops", ""))
            bf16 = number(a.get("bf16_tensor_tflops_dense", ""))
            ok = price is not None and n > 0
            out[(r["service"], r["instance_type"], r["region"])] = {
                "gb": price / (n * gib) if ok and gib else None,
                "fp32": price / (n * fp32) if ok and fp32 else None,
                "bf16": price / (n * bf16) if ok and bf16 else None,
            }
    return out


FIELD = {"gb": "usd_per_accelerator_gib_hour", "fp32": "usd_per_fp32_tflop_hour",
         "bf16": "usd_per_bf16_tflop_hour"}


@pytest.mark.parametrize("sort", ["gb", "fp32", "bf16"])
def test_ranking_matches_the_catalog_by_hand(trainprof_cli, sort):
    truth = expected()
    got = json.loads(subprocess.run(trainprof_cli + ["instances", "--sort", sort, "--json"],
                                    check=True, capture_output=True, text=True).stdout)
    assert got["sort"] == sort
    rows = got["instances"]
    assert len(rows) == len(truth)
    keys = []
    for r in rows:
        want = truth[(r["service"], r["instance_type"], r["region"])]
        for s, field in FIELD.items():
            if want[s] is None:
                assert r[field] is None, (r["instance_type"], field)
            else:
                assert r[field] == pytest.approx(want[s], rel=1e-9), (r["instance_type"], field)
        keys.append(want[sort])
    # Ascending by the figure; types without it (CPU-only, unpriced, no bf16) come last.
    have = [k for k in keys if k is not None]
    assert have == sorted(have) and len(have) > 10
    assert all(k is None for k in keys[len(have):])


def test_what_the_brief_says_holds_on_ec2(trainprof_cli):
    """The brief's rules of thumb, checked against the catalog: on EC2, g4dn is the cheapest
    per GB of GPU memory; per fp32 FLOP the cheapest is a g-family type too (g6e today, g5 in
    the brief's older table). The table shows the columns, said under it."""
    truth = expected()
    ec2 = {k: v for k, v in truth.items() if k[0] == "ec2" and v["gb"] is not None}
    cheapest_gb = min(ec2, key=lambda k: ec2[k]["gb"])
    out = subprocess.run(trainprof_cli + ["instances", "--service", "ec2", "--sort", "gb"],
                         check=True, capture_output=True, text=True).stdout
    lines = out.splitlines()
    assert "$/GIB-H" in lines[0] and "$/FP32-TF-H" in lines[0] and "$/BF16-TF-H" in lines[0]
    assert lines[1].split()[0] == cheapest_gb[1] and cheapest_gb[1].startswith("g4dn.")
    assert "sorted by gb" in out
    out = subprocess.run(trainprof_cli + ["instances", "--service", "ec2", "--sort", "fp32"],
                         check=True, capture_output=True, text=True).stdout
    cheapest_fp32 = min(ec2, key=lambda k: ec2[k]["fp32"] if ec2[k]["fp32"] else 1e9)
    assert out.splitlines()[1].split()[0] == cheapest_fp32[1] and cheapest_fp32[1].startswith("g")


def test_unknown_sort_is_an_error(trainprof_cli):
    r = subprocess.run(trainprof_cli + ["instances", "--sort", "tflops"], capture_output=True,
                       text=True)
    assert r.returncode != 0 and "--sort" in r.stderr


def test_python_api_sorts_the_same(trainprof_cli):
    import trainprof

    frame = trainprof.instances(sort="fp32", provider="aws", as_frame=True)
    truth = expected()
    have = [truth[(r.service, r.instance_type, r.region)]["fp32"] for r in frame.itertuples()]
    priced = [h for h in have if h is not None]
    assert priced == sorted(priced) and frame["usd_per_fp32_tflop_hour"].iloc[0] == priced[0]
