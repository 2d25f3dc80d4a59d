"""What the fleet modules share (docs/fleet.md): limits on what is read, the usage-type vocabulary
(Cost Explorer's REGION-Train:...), and the two errors the commands turn into exit statuses
(UsageError: 2, FleetError: 1)."""

from __future__ import annotations

SUMMARY_NAME = "summary.json"
SUMMARY_VERSION = 1
MAX_SUMMARY_BYTES = 8 << 20  # a summary is a few KB; anything this big is not one
MAX_RUN_JSON_BYTES = 1 << 20
MAX_RUNS = 1_000_000
MAX_SEARCH_DEPTH = 3
MAX_REMOTE_RUN_BYTES = 8 << 30  # a remote run copied here for export or summarising

# AWS region -> the prefix of its usage types in Cost Explorer / the CUR.
REGION_CODES = {
    "us-east-1": "USE1", "us-east-2": "USE2", "us-west-1": "USW1", "us-west-2": "USW2",
    "ca-central-1": "CAN1", "ca-west-1": "CAN2", "sa-east-1": "SAE1",
    "eu-west-1": "EU", "eu-west-2": "EUW2", "eu-west-3": "EUW3", "eu-central-1": "EUC1",
    "eu-central-2": "EUC2", "eu-north-1": "EUN1", "eu-south-1": "EUS1", "eu-south-2": "EUS2",
    "ap-northeast-1": "APN1", "ap-northeast-2": "APN2", "ap-northeast-3": "APN3",
    "ap-southeast-1": "APS1", "ap-southeast-2": "APS2", "ap-southeast-3": "APS4",
    "ap-south-1": "APS3", "ap-south-2": "APS5", "ap-east-1": "APE1", "me-south-1": "MES1",
    "me-central-1": "MEC1", "af-south-1": "AFS1", "il-central-1": "ILC1",
}
DEFAULT_REGION = "us-east-1"
STORAGE_USAGE = "VolumeUsage.gp2"


class UsageError(Exception):
    pass


class FleetError(Exception):
    pass


def region_code(region: str) -> str:
    return REGION_CODES.get(region, region.upper() if region else "USE1")


def usage_type(price: dict, region: str, instance_type: str, storage: bool = False) -> str:
    """Cost Explorer's usage type of an instance's hours (or its storage volume): SageMaker
    training `USE1-Train:ml.g5.xlarge` / `USE1-Train:VolumeUsage.gp2`; an EC2 price (a type
    detected from the hardware) `BoxUsage:p4d.24xlarge` / `EBS:VolumeUsage.gp2`, with the
    region prefix EC2 leaves out in us-east-1."""
    region = str(price.get("region") or region)
    if price.get("service") == "ec2":
        prefix = "" if region == "us-east-1" else region_code(region) + "-"
        return f"{prefix}EBS:{STORAGE_USAGE}" if storage else f"{prefix}BoxUsage:{instance_type}"
    code = region_code(region)
    return f"{code}-Train:{STORAGE_USAGE}" if storage else f"{code}-Train:{instance_type}"


def _num(x) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else 0.0
