#!/usr/bin/env python3
"""Builds data/catalog/ (the instance catalog trainprof ships) from the research tables.

Input: ../shared/data/cloud/instances.csv and gpus.csv (see NOTES.md there for every source).
Output: data/catalog/instances.csv (one row per billable instance type and service: each AWS
research row gives a SageMaker training row `ml.X` and an EC2 row `X`, each with its own price,
date and source), data/catalog/accelerators.csv (peak figures) and leaves storage.csv alone
(hand-written: two storage rates with their sources).

Empty cells stay empty ("not found"), never 0. Run: python3 scripts/build_catalog.py [SRC_DIR]
"""
import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "..", "shared", "data", "cloud")
OUT = os.path.join(ROOT, "data", "catalog")

COLUMNS = [
    "provider", "service", "instance_type", "region", "family", "vcpus", "memory_gib",
    "accel_count", "accel_model", "accel_mem_gib_each", "accel_mem_mib_api", "local_nvme_gb",
    "price_usd_per_hour", "price_basis", "price_source", "price_as_of",
    "spot_discount_pct", "spot_price_usd_per_hour", "spot_interrupt_bucket", "spot_source",
    "spot_as_of",
    "confidence", "notes", "spec_source",
]


def main():
    rows = list(csv.DictReader(open(os.path.join(SRC, "instances.csv"), newline="")))
    out = []
    for r in rows:
        base = {
            "provider": r["provider"], "region": r["region"], "family": r["family"],
            "vcpus": r["vcpus"], "memory_gib": r["memory_gib"], "accel_count": r["accel_count"],
            "accel_model": "" if r["accel_model"] == "none" else r["accel_model"],
            "accel_mem_gib_each": r["accel_mem_gib_each"] if r["accel_count"] not in ("", "0") else "",
            "accel_mem_mib_api": r["accel_mem_mib_api"], "local_nvme_gb": r["local_nvme_gb"],
            "spot_discount_pct": r["spot_discount_pct"],
            # A spot list price where the source gives one for the row's own service (GCP's
            # Spot VM price); AWS's spot_usd_hr is a 2024 EC2 average, a discount only
            # (NOTES.md section 1 and its sources list).
            "spot_price_usd_per_hour": r["spot_usd_hr"] if r["provider"] == "gcp" else "",
            "spot_interrupt_bucket": r["spot_interrupt_bucket"],
            "spot_source": (r["spot_basis"] + " ; " + r["spot_source"]).strip(" ;"),
            "spot_as_of": r["spot_as_of"], "confidence": r["confidence"], "notes": r["notes"],
            "spec_source": r["spec_source"],
        }
        if r["provider"] == "aws":
            sm = dict(base)
            sm.update({
                "service": "sagemaker-training", "instance_type": r["instance_type"],
                "price_usd_per_hour": r["ondemand_usd_hr"], "price_basis": r["price_basis"],
                "price_source": r["source"] if r["ondemand_usd_hr"] else "",
                "price_as_of": r["as_of"] if r["ondemand_usd_hr"] else "",
            })
            if not r["ondemand_usd_hr"]:
                sm["notes"] = (sm["notes"] + "; no SageMaker price in the sources read").strip("; ")
            out.append(sm)
            if r["ec2_equivalent"]:
                ec2 = dict(base)
                ec2.update({
                    "service": "ec2", "instance_type": r["ec2_equivalent"],
                    "price_usd_per_hour": r["ec2_ondemand_usd_hr"],
                    "price_basis": "ec2 on-demand linux",
                    "price_source": r["ec2_price_source"] if r["ec2_ondemand_usd_hr"] else "",
                    "price_as_of": r["ec2_as_of"] if r["ec2_ondemand_usd_hr"] else "",
                    "notes": "",
                })
                out.append(ec2)
        else:
            row = dict(base)
            row.update({
                "service": r["service"], "instance_type": r["instance_type"],
                "price_usd_per_hour": r["ondemand_usd_hr"], "price_basis": r["price_basis"],
                "price_source": r["source"], "price_as_of": r["as_of"],
            })
            out.append(row)
    with open(os.path.join(OUT, "instances.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        for row in out:
            w.writerow(row)
    gpus = list(csv.DictReader(open(os.path.join(SRC, "gpus.csv"), newline="")))
    with open(os.path.join(OUT, "accelerators.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(gpus[0].keys()), lineterminator="\n")
        w.writeheader()
        for row in gpus:
            w.writerow(row)
    print(f"{len(out)} instance rows, {len(gpus)} accelerators -> {OUT}")


if __name__ == "__main__":
    main()
