"""The shipped instance catalog (data/catalog) against its research source
(../shared/data/cloud), each read here with the csv module, independently of
scripts/build_catalog.py and of trainprof's catalog loader: every price carries a date and a
source, and the catalog says what the source says today."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "data" / "catalog"
CLOUD = REPO.parent / "shared" / "data" / "cloud"
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def cloud() -> list[dict]:
    if not CLOUD.exists():
        pytest.fail(f"shared data not found at {CLOUD}")
    return rows(CLOUD / "instances.csv")


# (file, price column, source column, date column): every priced figure of the catalog.
PRICED = [
    ("instances.csv", "price_usd_per_hour", "price_source", "price_as_of"),
    ("instances.csv", "spot_discount_pct", "spot_source", "spot_as_of"),
    ("storage.csv", "price_usd_per_gb_month", "price_source", "price_as_of"),
]


@pytest.mark.parametrize("name,price,source,date", PRICED)
def test_every_price_has_a_date_and_a_source(name, price, source, date):
    table = rows(CATALOG / name)
    priced = [r for r in table if r[price].strip()]
    assert priced, f"{name}: no {price} at all"
    for r in priced:
        what = f"{name} {r.get('instance_type') or r.get('storage')} {price}={r[price]}"
        float(r[price])  # a number, not text
        assert r[source].strip(), f"{what}: no {source}"
        assert DATE.match(r[date]), f"{what}: {date} is {r[date]!r}, not YYYY-MM-DD"
    # An empty price is "not found": it carries no date pretending otherwise.
    for r in table:
        if not r[price].strip():
            assert not r[date].strip(), (name, r.get("instance_type"), date)


def test_accelerator_figures_have_a_date_and_a_source():
    for r in rows(CATALOG / "accelerators.csv"):
        assert r["source"].strip(), r["accel_model"]
        assert DATE.match(r["as_of"]), (r["accel_model"], r["as_of"])


def test_prices_dates_and_sources_are_the_research_tables(cloud):
    """Each AWS research row is a SageMaker row `ml.X` and an EC2 row; GCP/Azure rows as they are.
    Price, date and source of each catalog row equal the research table's cells."""
    catalog = {(r["service"], r["instance_type"]): r for r in rows(CATALOG / "instances.csv")}
    expected = {}
    for r in cloud:
        if r["provider"] == "aws":
            if r["ondemand_usd_hr"]:
                expected[("sagemaker-training", r["instance_type"])] = (
                    r["ondemand_usd_hr"], r["source"], r["as_of"])
            if r["ec2_equivalent"] and r["ec2_ondemand_usd_hr"]:
                expected[("ec2", r["ec2_equivalent"])] = (
                    r["ec2_ondemand_usd_hr"], r["ec2_price_source"], r["ec2_as_of"])
        elif r["ondemand_usd_hr"]:
            expected[(r["service"], r["instance_type"])] = (
                r["ondemand_usd_hr"], r["source"], r["as_of"])
    assert len(expected) > 100
    for key, (price, source, as_of) in expected.items():
        assert key in catalog, f"{key} is in the research table but not in the catalog"
        row = catalog[key]
        assert float(row["price_usd_per_hour"]) == float(price), key
        assert row["price_source"] == source, (key, row["price_source"], source)
        assert row["price_as_of"] == as_of, key
    # Nothing priced in the catalog that the research table does not price.
    priced = {k for k, r in catalog.items() if r["price_usd_per_hour"]}
    assert priced == set(expected)


@pytest.mark.parametrize("instance_type,column,service,catalog_type", [
    ("ml.p4d.24xlarge", "ondemand_usd_hr", "sagemaker-training", "ml.p4d.24xlarge"),
    ("ml.g5.xlarge", "ondemand_usd_hr", "sagemaker-training", "ml.g5.xlarge"),
    ("ml.p4d.24xlarge", "ec2_ondemand_usd_hr", "ec2", "p4d.24xlarge"),
])
def test_named_prices_equal_the_research_table(cloud, instance_type, column, service,
                                               catalog_type):
    src = [r for r in cloud if r["instance_type"] == instance_type]
    assert len(src) == 1
    cat = [r for r in rows(CATALOG / "instances.csv")
           if r["service"] == service and r["instance_type"] == catalog_type]
    assert len(cat) == 1
    assert src[0][column] and float(cat[0]["price_usd_per_hour"]) == float(src[0][column])


def test_spot_bills_the_research_tables_spot_list_price(cloud, tmp_path):
    """GCP's research rows give the Spot VM list price itself; `cost --spot` bills that price,
    not one rebuilt from the rounded discount (a3-megagpu-8g: 23.2752 $/h, not 23.2344), with
    the spot figure's date and source."""
    import json
    import subprocess

    from conftest import trainprof_command

    run = tmp_path / "run"
    subprocess.run(trainprof_command() + ["demo", "--out", str(run)], check=True,
                   capture_output=True, timeout=300)
    listed = [r for r in cloud if r["provider"] == "gcp" and r["spot_usd_hr"]]
    assert len(listed) >= 10
    for r in listed:
        out = subprocess.run(trainprof_command() + ["cost", str(run), "--instance-type",
                                                    r["instance_type"], "--spot", "--json"],
                             check=True, capture_output=True, text=True, timeout=120).stdout
        (node,) = json.loads(out)["nodes"]
        price = node["price"]
        assert price["price_usd_per_hour"] == pytest.approx(float(r["spot_usd_hr"]), abs=1e-12), r
        assert price["spot_as_of"] == r["spot_as_of"]
        assert r["spot_source"] in price["spot_source"]
