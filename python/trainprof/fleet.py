"""`trainprof fleet` and `trainprof export parquet`: spend across many runs, and runs as Parquet
(docs/fleet.md).

    trainprof fleet RUNS... [--json | --csv FILE | --parquet DIR | --html FILE] [--instance-type T]
    trainprof export parquet RUNS... --out DIR

RUNS are run directories, directories holding runs (searched 3 levels deep), globs, and object
storage URLs (s3://bucket/prefix: every run under the prefix, found by one paginated listing;
other fsspec URLs such as memory:// or file:// through fsspec). Endpoint and credentials come
from the standard AWS variables (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_PROFILE...).

The fleet view reads each run's summary.json (src/cli/run_summary.h: run.json, the user and
`trainprof cost RUN --json`, written at the end of record and import). A run without one is
summarised once here (the same cost, computed in-process by trainprof._api) and the summary
kept: next to the run when it is writable, else in $XDG_CACHE_HOME/trainprof/summaries.
A run priced with --instance-type (one that `trainprof cost` cannot price: no instance type
named or detected) is cached, never written next to it.

Spend is grouped in Cost Explorer's vocabulary: usage type REGION-Train:<instance type>
(instance hours) and REGION-Train:VolumeUsage.gp2 (the ML storage volume), with REGION the
region code of the price (us-east-1 -> USE1); by phase, tag, user, day and ISO week. Idle spend
is the cost advisor's utilisation-weighted idle-accelerator cost; savings are each what-if's
saving summed over the runs that have it, ranked. Runs without a price are listed as unpriced
(their cost is missing, not zero).

Warm-pool keep-alive time is priced at the instance rate where a DescribeTrainingJob (--billing)
or the run (run.json / tag warm_pool_seconds) says it was used; CUR line items (--billing) are
set beside the measured usage types; savings are also scaled to a month.

The native commands hand their arguments over to `python -m trainprof.fleet fleet|export-parquet`
(src/cli/fleet_command.cc); `record --out URL` and `agent --out URL` start `sync`; the other
native readers call `fetch` and `push` for RUN and --out URLs (src/cli/remote_run.cc).
Exit status: 0 done, 1 failure, 2 usage.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import fnmatch
import glob
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

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


# ---------------------------------------------------------------- object storage


def is_url(path: str) -> bool:
    return "://" in str(path)


def _s3_client():
    try:
        import boto3
        from botocore.config import Config
    except ImportError as e:  # pragma: no cover - boto3 is a test dependency
        raise FleetError(f"s3:// needs boto3 ({e})") from e
    cfg = Config(connect_timeout=3, read_timeout=30, retries={"max_attempts": 2})
    return boto3.client("s3", config=cfg)


def _s3_error(url: str, e: Exception) -> FleetError:
    """A clear message for what went wrong talking to the object store."""
    from botocore import exceptions as bx

    # boto3's transfers wrap the client's error (S3UploadFailedError): find it.
    seen = e
    for _ in range(8):
        if isinstance(seen, (bx.ClientError, bx.EndpointConnectionError)) or seen is None:
            break
        seen = seen.__cause__ or seen.__context__
    if seen is not None:
        e = seen
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "AWS"
    if isinstance(e, (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ReadTimeoutError)):
        return FleetError(f"{url}: cannot reach the object store at {endpoint} ({e})")
    if isinstance(e, bx.NoCredentialsError):
        return FleetError(f"{url}: no AWS credentials (set AWS_ACCESS_KEY_ID / AWS_PROFILE)")
    if isinstance(e, bx.ClientError):
        code = e.response.get("Error", {}).get("Code", "")
        if code in ("AccessDenied", "403", "Forbidden", "InvalidAccessKeyId",
                    "SignatureDoesNotMatch", "AllAccessDisabled"):
            return FleetError(f"{url}: access denied by the object store ({code})")
        if code in ("NoSuchBucket",):
            return FleetError(f"{url}: no such bucket")
        if code in ("NoSuchKey", "404"):
            return FleetError(f"{url}: not found")
        return FleetError(f"{url}: object store error {code}: {e}")
    return FleetError(f"{url}: {e}")


class Store:
    """Where runs are: the local file system, S3 (boto3) or another fsspec file system."""

    def __init__(self, url: str):
        self.url = url
        self.scheme = url.split("://", 1)[0] if is_url(url) else ""
        self._s3 = None
        self._fs = None
        if self.scheme in ("s3", "s3a"):
            self._s3 = _s3_client()
        elif self.scheme:
            try:
                import fsspec
                self._fs = fsspec.filesystem(self.scheme)
            except (ImportError, ValueError) as e:
                raise FleetError(f"{url}: no file system for {self.scheme}:// ({e})") from e

    @staticmethod
    def split(url: str) -> tuple[str, str]:
        rest = url.split("://", 1)[1]
        bucket, _, key = rest.partition("/")
        if not bucket:
            raise UsageError(f"{url}: no bucket in the URL")
        return bucket, key

    def list(self, url: str) -> list[tuple[str, int]]:
        """(url, size) of every object under the prefix `url`."""
        if self._s3 is not None:
            bucket, prefix = self.split(url)
            out = []
            try:
                pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                           Prefix=prefix)
                for page in pages:
                    for o in page.get("Contents", []):
                        out.append((f"{self.scheme}://{bucket}/{o['Key']}", int(o["Size"])))
                        if len(out) > 50 * MAX_RUNS:
                            raise FleetError(f"{url}: more than {50 * MAX_RUNS} objects")
            except FleetError:
                raise
            except Exception as e:
                raise _s3_error(url, e) from e
            return out
        try:
            found = self._fs.find(url, detail=True)
        except FileNotFoundError:
            return []
        except Exception as e:
            raise FleetError(f"{url}: {e}") from e
        proto = self.scheme + "://"
        return [(p if "://" in p else proto + p.lstrip("/"), int(d.get("size") or 0))
                for p, d in found.items()]

    def read(self, url: str, limit: int) -> bytes | None:
        """The object's bytes (None when it does not exist); more than `limit` is an error."""
        if self._s3 is not None:
            bucket, key = self.split(url)
            try:
                obj = self._s3.get_object(Bucket=bucket, Key=key)
            except Exception as e:
                err = _s3_error(url, e)
                if str(err).endswith(": not found"):
                    return None
                raise err from e
            if int(obj.get("ContentLength", 0)) > limit:
                raise FleetError(f"{url}: {obj['ContentLength']} bytes, more than {limit}")
            return obj["Body"].read(limit + 1)
        try:
            with self._fs.open(url, "rb") as f:
                data = f.read(limit + 1)
        except FileNotFoundError:
            return None
        if len(data) > limit:
            raise FleetError(f"{url}: more than {limit} bytes")
        return data

    def check_bucket(self, url: str) -> None:
        """Fails early, with a clear error, when the bucket is missing, forbidden or the
        store unreachable (before any work is done for it)."""
        if self._s3 is not None:
            bucket, _ = self.split(url)
            try:
                self._s3.head_bucket(Bucket=bucket)
            except Exception as e:
                err = _s3_error(url, e)
                if str(err) == f"{url}: not found":  # HEAD answers a bare 404
                    err = FleetError(f"{url}: no such bucket")
                raise err from e

    def write(self, url: str, data: bytes) -> None:
        if self._s3 is not None:
            bucket, key = self.split(url)
            try:
                self._s3.put_object(Bucket=bucket, Key=key, Body=data)
            except Exception as e:
                raise _s3_error(url, e) from e
            return
        with self._fs.open(url, "wb") as f:
            f.write(data)

    def delete(self, url: str) -> None:
        if self._s3 is not None:
            bucket, key = self.split(url)
            try:
                self._s3.delete_object(Bucket=bucket, Key=key)
            except Exception as e:
                raise _s3_error(url, e) from e
            return
        try:
            self._fs.rm(url)
        except FileNotFoundError:
            pass

    def download(self, url: str, size: int, local: Path) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        if self._s3 is not None:
            bucket, key = self.split(url)
            try:
                self._s3.download_file(bucket, key, str(local))
            except Exception as e:
                raise _s3_error(url, e) from e
            return
        self._fs.get(url, str(local))

    def upload_tree(self, local: Path, url: str) -> int:
        """Copies every file under `local` to `url`/...; returns the number of files."""
        n = 0
        for p in sorted(local.rglob("*")):
            if p.is_file() and not p.is_symlink():
                dest = url.rstrip("/") + "/" + p.relative_to(local).as_posix()
                if self._s3 is not None:
                    bucket, key = self.split(dest)
                    try:
                        self._s3.upload_file(str(p), bucket, key)
                    except Exception as e:
                        raise _s3_error(dest, e) from e
                else:
                    self._fs.put(str(p), dest)
                n += 1
        return n


# ---------------------------------------------------------------- finding runs


@dataclass
class RunRef:
    location: str  # a local directory or a URL (no trailing slash)
    store: Store | None = None
    files: list[tuple[str, int]] = field(default_factory=list)  # remote: (url, size) inside

    @property
    def remote(self) -> bool:
        return self.store is not None

    @property
    def name(self) -> str:
        return self.location.rstrip("/").rsplit("/", 1)[-1]


def _local_runs(root: str, depth: int) -> list[str]:
    if os.path.isfile(os.path.join(root, "run.json")):
        return [root]
    if depth <= 0:
        return []
    out = []
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    for e in entries:
        if e.is_dir(follow_symlinks=False) and not e.name.startswith("."):
            out += _local_runs(e.path, depth - 1)
    return out


def find_runs(args: list[str]) -> list[RunRef]:
    refs: list[RunRef] = []
    stores: dict[str, Store] = {}
    seen: set[str] = set()
    for arg in args:
        if is_url(arg):
            scheme = arg.split("://", 1)[0]
            store = stores.get(scheme) or stores.setdefault(scheme, Store(arg))
            pattern = arg.rstrip("/")
            # One listing of the prefix before the first wildcard.
            wild = re.search(r"[*?\[]", pattern)
            prefix = pattern[:wild.start()] if wild else pattern
            objects = store.list(prefix)
            by_run: dict[str, list[tuple[str, int]]] = {}
            for url, size in objects:
                if url.endswith("/run.json"):
                    by_run.setdefault(url[: -len("/run.json")], [])
            if not by_run:
                raise FleetError(f"{arg}: no run (no run.json) under this prefix")
            roots = sorted(by_run)
            for url, size in objects:
                # The deepest run root holding this object.
                parent = url.rsplit("/", 1)[0]
                while parent and parent not in by_run and "/" in parent:
                    parent = parent.rsplit("/", 1)[0]
                if parent in by_run:
                    by_run[parent].append((url, size))
            def ancestors(r: str):
                yield r
                while "/" in r.split("://", 1)[1]:
                    r = r.rsplit("/", 1)[0]
                    yield r
            if wild:
                matched = [r for r in roots
                           if any(fnmatch.fnmatchcase(x, pattern) for x in ancestors(r))]
            else:
                matched = [r for r in roots if r == pattern or r.startswith(pattern + "/")]
            if not matched:
                raise FleetError(f"{arg}: no run (no run.json) under this prefix")
            for r in matched:
                if r not in seen:
                    seen.add(r)
                    refs.append(RunRef(r, store, by_run[r]))
            continue
        paths = sorted(glob.glob(arg)) if glob.has_magic(arg) else [arg]
        if not paths:
            raise FleetError(f"{arg}: matches nothing")
        found_any = False
        for p in paths:
            if not os.path.exists(p):
                raise FleetError(f"{p}: no such file or directory")
            for r in _local_runs(p, MAX_SEARCH_DEPTH):
                found_any = True
                key = os.path.realpath(r)
                if key not in seen:
                    seen.add(key)
                    refs.append(RunRef(r))
        if not found_any:
            raise FleetError(f"{arg}: no run directory (no run.json) here or {MAX_SEARCH_DEPTH} "
                             "levels below")
        if len(refs) > MAX_RUNS:
            raise FleetError(f"more than {MAX_RUNS} runs")
    return refs


def materialise(ref: RunRef, into: Path) -> Path:
    """A local copy of a remote run (the whole directory), or the local run itself."""
    if not ref.remote:
        return Path(ref.location)
    total = sum(s for _, s in ref.files)
    if total > MAX_REMOTE_RUN_BYTES:
        raise FleetError(f"{ref.location}: {total} bytes, more than {MAX_REMOTE_RUN_BYTES} to copy")
    local = into / hashlib.sha1(ref.location.encode()).hexdigest()[:16] / ref.name
    for url, size in ref.files:
        rel = url[len(ref.location) + 1:]
        if not rel or ".." in rel.split("/"):
            continue
        ref.store.download(url, size, local / rel)
    return local


# ---------------------------------------------------------------- summaries


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "trainprof" / "summaries"


def _load_json(data: bytes, what: str) -> dict:
    try:
        j = json.loads(data)
    except ValueError as e:
        raise FleetError(f"{what}: not JSON ({e})") from e
    if not isinstance(j, dict):
        raise FleetError(f"{what}: not a JSON object")
    return j


def _user_of(path: str) -> str:
    try:
        import pwd
        return pwd.getpwuid(os.stat(path).st_uid).pw_name
    except (KeyError, OSError, ImportError):
        return ""


def make_summary(run_dir: Path, instance_type: str = "") -> dict:
    """The summary of a run that has none: as src/cli/run_summary.cc writes it."""
    import trainprof

    run_json = _load_json(_read_limited(run_dir / "run.json", MAX_RUN_JSON_BYTES),
                          f"{run_dir}/run.json")
    s = {"summary_version": SUMMARY_VERSION, "user": _user_of(str(run_dir / "run.json")),
         "run": run_json, "cost": None, "cost_error": None}
    try:
        cost = priced_cost(trainprof.open(str(run_dir)), instance_type)
        for n in cost.get("nodes", []):
            n.pop("gpus", None)
        s["cost"] = cost
    except Exception as e:  # the cost advisor's error: why this run has no price
        s["cost_error"] = str(e)
    if instance_type:
        s["priced_as"] = instance_type
    return s


def _read_limited(path: Path, limit: int) -> bytes:
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise FleetError(f"{path}: more than {limit} bytes")
    return data


def _needs_pricing(s: dict, instance_type: str) -> bool:
    return bool(instance_type) and s.get("cost") is None


def _cache_path(ref: RunRef, priced: str) -> Path:
    key_src = ref.location if ref.remote else os.path.realpath(ref.location)
    stamp = ""
    if not ref.remote:
        try:
            stamp = str(os.stat(Path(ref.location) / "run.json").st_mtime_ns)
        except OSError:
            pass
    else:
        stamp = str(sum(sz for _, sz in ref.files))
    return _cache_dir() / (hashlib.sha256(f"{key_src}\0{stamp}\0{priced}".encode())
                           .hexdigest()[:32] + ".json")


def _write_cache(cache: Path, data: bytes) -> None:
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, cache)
    except OSError:
        pass  # not kept: summarised again next time


def _read_cache(cache: Path, ref: RunRef) -> dict | None:
    if not cache.is_file():
        return None
    try:
        s = _load_json(_read_limited(cache, MAX_SUMMARY_BYTES), str(cache))
        return _checked(s, ref) if s.get("summary_version") == SUMMARY_VERSION else None
    except (FleetError, OSError):
        return None


def load_summary(ref: RunRef, instance_type: str, scratch: Path) -> dict:
    """The run's summary: summary.json, else made once and kept (next to the run when it is
    writable, else cached). A run without a price is priced as `instance_type` (cached)."""
    s = None
    if ref.remote:
        data = ref.store.read(ref.location + "/" + SUMMARY_NAME, MAX_SUMMARY_BYTES) \
            if any(u.endswith("/" + SUMMARY_NAME) for u, _ in ref.files) else None
        if data is not None:
            s = _load_json(data, ref.location + "/" + SUMMARY_NAME)
    else:
        p = Path(ref.location) / SUMMARY_NAME
        if p.is_file():
            s = _load_json(_read_limited(p, MAX_SUMMARY_BYTES), str(p))
    if s is not None and s.get("summary_version") != SUMMARY_VERSION:
        s = None  # another version: summarised again
    if s is None:
        s = _read_cache(_cache_path(ref, ""), ref)
    if s is None:
        s = make_summary(materialise(ref, scratch))
        data = json.dumps(s, separators=(",", ":")).encode()
        try:
            if ref.remote:
                ref.store.write(ref.location + "/" + SUMMARY_NAME, data)
            else:
                tmp = Path(ref.location) / f".{SUMMARY_NAME}.{os.getpid()}"
                tmp.write_bytes(data)
                os.replace(tmp, Path(ref.location) / SUMMARY_NAME)
        except (OSError, FleetError):
            _write_cache(_cache_path(ref, ""), data)
    s = _checked(s, ref)
    if not _needs_pricing(s, instance_type):
        return s
    cache = _cache_path(ref, instance_type)
    priced = _read_cache(cache, ref)
    if priced is None:
        priced = make_summary(materialise(ref, scratch), instance_type)
        _write_cache(cache, json.dumps(priced, separators=(",", ":")).encode())
    return _checked(priced, ref)


def _checked(s: dict, ref: RunRef) -> dict:
    if not isinstance(s.get("run"), dict):
        raise FleetError(f"{ref.location}/{SUMMARY_NAME}: no \"run\" object")
    c = s.get("cost")
    if c is not None and not (isinstance(c, dict) and isinstance(c.get("total_cost_usd"),
                                                                   (int, float))):
        raise FleetError(f"{ref.location}/{SUMMARY_NAME}: \"cost\" has no total_cost_usd")
    s["_location"] = ref.location
    return s


# ---------------------------------------------------------------- the fleet view


def _num(x) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else 0.0


@dataclass
class RunRow:
    location: str
    name: str
    run_id: str
    source: str
    user: str
    tags: dict
    start_ns: int
    instance_type: str
    instance_count: int
    region: str
    priced: bool
    cost_error: str
    total_cost_usd: float
    compute_cost_usd: float
    storage_cost_usd: float
    billed_instance_seconds: float
    idle_cost_usd: float | None
    usage: list  # (usage_type, hours, cost_usd)
    phases: list  # (phase, billed_seconds, cost_usd)
    what_ifs: list  # (id, title, saving_usd)
    rules_fired: list
    job: str = ""  # the training job it is matched to (tag training_job, else its name)
    end_ns: int = 0
    price_usd_per_hour: float | None = None
    warm_pool: dict | None = None  # {"seconds", "cost_usd", "usd_per_hour", "source"}


def run_row(s: dict) -> RunRow:
    run = s["run"]
    cost = s.get("cost") or {}
    tags = run.get("tags") if isinstance(run.get("tags"), dict) else {}
    tags = {str(k): str(v) for k, v in list(tags.items())[:256]}
    user = str(run.get("user") or tags.get("user") or s.get("user") or "")
    price = cost.get("price") or {}
    region = str(price.get("region") or tags.get("region") or run.get("region")
                 or DEFAULT_REGION)
    usage = []
    nodes = cost.get("nodes") or []
    for n in nodes[:100_000]:
        np_ = n.get("price") or price
        hours = _num(n.get("billed_seconds")) / 3600.0
        itype = str(n.get("instance_type") or cost.get("instance_type") or "unknown")
        usage.append((usage_type(np_, region, itype), hours, _num(n.get("compute_cost_usd"))))
        if _num(n.get("storage_cost_usd")) > 0:
            usage.append((usage_type(np_, region, itype, storage=True), hours,
                          _num(n.get("storage_cost_usd"))))
    if cost and not nodes:
        hours = _num(cost.get("billed_instance_seconds")) / 3600.0
        itype = str(cost.get("instance_type") or "unknown")
        usage.append((usage_type(price, region, itype), hours, _num(cost.get("compute_cost_usd"))))
        if _num(cost.get("storage_cost_usd")) > 0:
            usage.append((usage_type(price, region, itype, storage=True), hours,
                          _num(cost.get("storage_cost_usd"))))
    phases = [(str(p.get("phase")), _num(p.get("billed_seconds")), _num(p.get("cost_usd")))
              for p in (cost.get("phases") or [])[:64]]
    what_ifs = [(str(w.get("id") or w.get("title")), str(w.get("title") or w.get("id")),
                 _num(w.get("saving_usd"))) for w in (cost.get("what_ifs") or [])[:64]]
    idle = cost.get("idle_accelerator_cost_usd")
    start = run.get("start_ns")
    return RunRow(
        location=s.get("_location", ""), name=str(run.get("name") or ""),
        run_id=str(run.get("run_id") or ""), source=str(run.get("source") or ""), user=user,
        tags=tags, start_ns=int(start) if isinstance(start, int) else 0,
        instance_type=str(cost.get("instance_type") or run.get("instance_type") or ""),
        instance_count=int(_num(cost.get("instance_count") or run.get("instance_count"))),
        region=region, priced=bool(cost), cost_error=str(s.get("cost_error") or ""),
        total_cost_usd=_num(cost.get("total_cost_usd")),
        compute_cost_usd=_num(cost.get("compute_cost_usd")),
        storage_cost_usd=_num(cost.get("storage_cost_usd")),
        billed_instance_seconds=_num(cost.get("billed_instance_seconds")),
        idle_cost_usd=_num(idle) if isinstance(idle, (int, float)) else None,
        usage=usage, phases=phases, what_ifs=what_ifs,
        rules_fired=[str(r) for r in (cost.get("rules_fired") or [])[:256]],
        job=_job_of(s), end_ns=int(run["end_ns"]) if isinstance(run.get("end_ns"), int) else 0,
        price_usd_per_hour=_rate_of(cost))


def _rate_of(cost: dict) -> float | None:
    """The run's hourly instance price (its price, else its first node's)."""
    for p in [cost.get("price")] + [n.get("price") for n in (cost.get("nodes") or [])[:1]]:
        if isinstance(p, dict) and isinstance(p.get("price_usd_per_hour"), (int, float)):
            return float(p["price_usd_per_hour"])
    return None


MAX_WARM_POOL_SECONDS = 366 * 86400  # per instance; more is not a keep-alive time
WARM_POOL_KEY = "warm_pool_seconds"


def warm_pool_of(s: dict, describe: dict) -> tuple[float, str] | None:
    """Warm-pool keep-alive seconds billed for a run (all its instances), and where they come
    from: the job's DescribeTrainingJob (WarmPoolStatus.ResourceRetainedBillableTimeInSeconds
    x InstanceCount, as AWS documents the bill), else the run's run.json or tag
    `warm_pool_seconds` (per instance, as SageMaker reports it, x the run's instance count)."""
    d = describe.get(_job_of(s))
    if d is not None and isinstance(d.get("warm_pool_billed_seconds"), (int, float)) \
            and not isinstance(d["warm_pool_billed_seconds"], bool) \
            and d["warm_pool_billed_seconds"] > 0:
        secs = float(d["warm_pool_billed_seconds"])
        if secs > MAX_WARM_POOL_SECONDS:
            raise FleetError(f"job {d['job']}: ResourceRetainedBillableTimeInSeconds {secs:.0f} "
                             f"is more than {MAX_WARM_POOL_SECONDS}")
        return (secs * d["instance_count"],
                f"DescribeTrainingJob {d['job']}: WarmPoolStatus."
                f"ResourceRetainedBillableTimeInSeconds {secs:.0f} x InstanceCount "
                f"{d['instance_count']}")
    run = s["run"]
    tags = run.get("tags") if isinstance(run.get("tags"), dict) else {}
    for where, val in (("run.json", run.get(WARM_POOL_KEY)), ("tag", tags.get(WARM_POOL_KEY))):
        if val is None:
            continue
        try:
            secs = float(val)
        except (TypeError, ValueError):
            secs = float("nan")
        if not 0 <= secs <= MAX_WARM_POOL_SECONDS:
            raise FleetError(f"{s.get('_location', '')}: {where} {WARM_POOL_KEY}={val!r}: not a "
                             f"number of seconds between 0 and {MAX_WARM_POOL_SECONDS}")
        if secs == 0:
            return None
        cost = s.get("cost") or {}
        count = cost.get("instance_count") or run.get("instance_count") or 1
        count = int(count) if isinstance(count, int) and 0 < count <= 100_000 else 1
        return secs * count, f"{where} {WARM_POOL_KEY}={val} x instance count {count}"
    return None


def apply_warm_pool(row: RunRow, s: dict, describe: dict) -> None:
    """Prices the run's warm-pool keep-alive time at its instance rate, into its total, its
    usage type's hours and cost and a phase of its own ("warm_pool")."""
    found = warm_pool_of(s, describe)
    if found is None or not row.priced:
        return
    secs, source = found
    if row.price_usd_per_hour is None:
        row.warm_pool = {"seconds": secs, "cost_usd": None, "usd_per_hour": None,
                         "source": source + "; no hourly price to price it"}
        return
    cost = secs * row.price_usd_per_hour / 3600.0
    row.warm_pool = {"seconds": secs, "cost_usd": cost, "usd_per_hour": row.price_usd_per_hour,
                     "source": source}
    row.total_cost_usd += cost
    row.compute_cost_usd += cost
    instance_usage = next((u for u in row.usage if not u[0].endswith(STORAGE_USAGE)), None)
    ut = instance_usage[0] if instance_usage else usage_type({}, row.region,
                                                             row.instance_type or "unknown")
    row.usage = row.usage + [(ut, secs / 3600.0, cost)]
    row.phases = row.phases + [("warm_pool", secs, cost)]


def _day(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d") if ns \
        else "unknown"


def _week(ns: int) -> str:
    if not ns:
        return "unknown"
    y, w, _ = dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).isocalendar()
    return f"{y}-W{w:02d}"


def _ranked(d: dict, key: str, extra=None) -> list:
    rows = []
    for k, v in d.items():
        r = {key: k, "cost_usd": v[0], "runs": v[1]}
        if extra:
            r.update(extra(k, v))
        rows.append(r)
    rows.sort(key=lambda r: (-r["cost_usd"], str(r[key])))
    return rows


MONTH_DAYS = 30.0


def _iso(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def fleet_period(rows: list[RunRow]) -> dict | None:
    """The time the fleet covers: the first run's start to the last run's end (its start when
    it has no end). Savings a month are scaled from it to 30 days; a fleet covering less than
    a day counts as one day (no month extrapolated from minutes)."""
    starts = [r.start_ns for r in rows if r.start_ns > 0]
    if not starts:
        return None
    first = min(starts)
    last = max(max(r.end_ns, r.start_ns) for r in rows if r.start_ns > 0)
    days = (last - first) / 86_400e9
    return {"start": _iso(first), "end": _iso(last), "days": days,
            "scaled_from_days": max(days, 1.0)}


def _billed_by_usage(rows: list[RunRow], cur: dict) -> tuple[dict, dict]:
    """CUR line items of the fleet's jobs per usage type ({type: [amount, cost, jobs]}) and
    what the CUR holds for training jobs that are not among the runs."""
    jobs = {r.job for r in rows if r.job}
    by_type: dict = {}
    other = {"jobs": 0, "cost_usd": 0.0}
    for job, c in cur.items():
        if job not in jobs:
            other["jobs"] += 1
            other["cost_usd"] += c["compute_cost_usd"] + c["storage_cost_usd"]
            continue
        for ut, (amount, cost) in c["by_usage"].items():
            v = by_type.setdefault(ut, [0.0, 0.0, set()])
            v[0] += amount
            v[1] += cost
            v[2].add(job)
    return by_type, other


def aggregate(rows: list[RunRow], top: int = 10, cur: dict | None = None) -> dict:
    priced = [r for r in rows if r.priced]
    total = sum(r.total_cost_usd for r in priced)
    usage: dict = {}
    phase: dict = {}
    tag: dict = {}
    user: dict = {}
    day: dict = {}
    week: dict = {}
    itype: dict = {}
    day_itype: dict = {}
    savings: dict = {}
    idle = 0.0
    idle_runs = 0
    tag_keys = sorted({k for r in priced for k in r.tags})
    for r in priced:
        for ut, hours, c in r.usage:
            u = usage.setdefault(ut, [0.0, 0.0, set()])
            u[0] += hours
            u[1] += c
            u[2].add(r.location)
        for ph, secs, c in r.phases:
            p = phase.setdefault(ph, [0.0, 0.0, 0])
            p[0] += secs
            p[1] += c
            p[2] += 1
        for k in tag_keys:
            v = tag.setdefault(k, {}).setdefault(r.tags.get(k), [0.0, 0])
            v[0] += r.total_cost_usd
            v[1] += 1
        for d, key in ((user, r.user), (day, _day(r.start_ns)), (week, _week(r.start_ns)),
                       (itype, r.instance_type)):
            v = d.setdefault(key, [0.0, 0])
            v[0] += r.total_cost_usd
            v[1] += 1
        v = day_itype.setdefault((_day(r.start_ns), r.instance_type), [0.0, 0])
        v[0] += r.total_cost_usd
        v[1] += 1
        if r.idle_cost_usd is not None:
            idle += r.idle_cost_usd
            idle_runs += 1
        for wid, title, saving in r.what_ifs:
            v = savings.setdefault(wid, [0.0, 0, title])
            v[0] += saving
            v[1] += 1
    by_usage = [{"usage_type": k, "hours": v[0], "cost_usd": v[1], "runs": len(v[2])}
                for k, v in usage.items()]
    billed_other = None
    if cur is not None:
        billed, billed_other = _billed_by_usage(priced, cur)
        for u in by_usage:
            b = billed.pop(u["usage_type"], None)
            u["billed_usage_amount"] = b[0] if b else None
            u["billed_cost_usd"] = b[1] if b else None
            u["billed_jobs"] = len(b[2]) if b else 0
        for k, b in billed.items():  # billed, never measured: shown, not hidden
            by_usage.append({"usage_type": k, "hours": 0.0, "cost_usd": 0.0, "runs": 0,
                             "billed_usage_amount": b[0], "billed_cost_usd": b[1],
                             "billed_jobs": len(b[2])})
    by_usage.sort(key=lambda r: (-r["cost_usd"], -(r.get("billed_cost_usd") or 0.0),
                                 r["usage_type"]))
    period = fleet_period(priced)
    month = MONTH_DAYS / period["scaled_from_days"] if period else None
    warm = [r for r in priced if r.warm_pool]
    by_phase = [{"phase": k, "billed_seconds": v[0], "hours": v[0] / 3600.0, "cost_usd": v[1],
                 "runs": v[2], "share": v[1] / total if total else None} for k, v in phase.items()]
    by_phase.sort(key=lambda r: (-r["cost_usd"], r["phase"]))
    out = {
        "runs": len(rows),
        "priced_runs": len(priced),
        "total_cost_usd": total,
        "idle_cost_usd": idle if idle_runs else None,
        "idle_measured_runs": idle_runs,
        "idle_share": idle / total if idle_runs and total else None,
        "by_usage_type": by_usage,
        "by_phase": by_phase,
        "by_tag": {k: [{"value": v, "cost_usd": c[0], "runs": c[1]}
                       for v, c in sorted(d.items(), key=lambda x: (-x[1][0], str(x[0])))]
                   for k, d in tag.items()},
        "by_user": _ranked(user, "user"),
        "by_instance_type": _ranked(itype, "instance_type"),
        "by_day": sorted(_ranked(day, "day"), key=lambda r: r["day"]),
        "by_week": sorted(_ranked(week, "week"), key=lambda r: r["week"]),
        "by_day_instance_type": [{"day": k[0], "instance_type": k[1], "cost_usd": v[0],
                                  "runs": v[1]} for k, v in sorted(day_itype.items())],
        "period": period,
        "savings": sorted(({"what": k, "title": v[2], "runs": v[1], "saving_usd": v[0],
                            "saving_usd_per_month": v[0] * month if month else None}
                           for k, v in savings.items()),
                          key=lambda r: (-r["saving_usd"], r["what"])),
        "warm_pool": {
            "seconds": sum(r.warm_pool["seconds"] for r in warm),
            "cost_usd": sum(r.warm_pool["cost_usd"] or 0.0 for r in warm),
            "runs": [{"run": r.location, "job": r.job, **r.warm_pool} for r in warm],
        },
        "top_runs": [{"run": r.location, "name": r.name, "instance_type": r.instance_type,
                      "total_cost_usd": r.total_cost_usd, "idle_cost_usd": r.idle_cost_usd,
                      "idle_share": (r.idle_cost_usd / r.total_cost_usd
                                     if r.idle_cost_usd is not None and r.total_cost_usd
                                     else None),
                      "report": _report_of(r.location)}
                     for r in sorted(priced, key=lambda r: -r.total_cost_usd)[:top]],
        "unpriced": [{"run": r.location, "why": r.cost_error} for r in rows if not r.priced],
    }
    if billed_other is not None:
        out["billed_other_jobs"] = billed_other
    return out


def _report_of(location: str) -> str | None:
    """The run's report.html (path), when a local run has one."""
    if not location or is_url(location):
        return None
    f = Path(location) / "report.html"
    return str(f.resolve()) if f.is_file() else None


def _usd(x) -> str:
    if x is None:
        return "n/a"
    return f"${x:,.2f}" if abs(x) >= 0.01 or x == 0 else f"${x:.4f}"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))).rstrip()
                     for r in rows) + "\n"


def render_text(a: dict) -> str:
    o = io.StringIO()
    o.write(f"fleet: {a['runs']} runs ({a['priced_runs']} priced), total {_usd(a['total_cost_usd'])}"
            f", idle accelerators {_usd(a['idle_cost_usd'])}"
            + (f" ({a['idle_share']:.0%})" if a["idle_share"] is not None else "")
            + f" over {a['idle_measured_runs']} runs with GPU utilisation\n\n")
    if "billed_other_jobs" in a:  # CUR line items beside what was measured
        o.write(_table([["usage type", "hours", "cost", "runs", "billed (CUR)", "CUR amount"]]
                       + [[u["usage_type"], f"{u['hours']:.2f}", _usd(u["cost_usd"]),
                           str(u["runs"]), _usd(u["billed_cost_usd"]),
                           f"{u['billed_usage_amount']:.3f}"
                           if u["billed_usage_amount"] is not None else "n/a"]
                          for u in a["by_usage_type"]]))
        other = a["billed_other_jobs"]
        o.write(f"(CUR: {other['jobs']} more training jobs, not among the runs, billed "
                f"{_usd(other['cost_usd'])})\n\n")
    else:
        o.write(_table([["usage type", "hours", "cost", "runs"]]
                       + [[u["usage_type"], f"{u['hours']:.2f}", _usd(u["cost_usd"]),
                           str(u["runs"])] for u in a["by_usage_type"]]) + "\n")
    o.write(_table([["phase", "hours", "cost", "share"]]
                   + [[p["phase"], f"{p['hours']:.2f}", _usd(p["cost_usd"]),
                       f"{p['share']:.0%}" if p["share"] is not None else "n/a"]
                      for p in a["by_phase"]]) + "\n")
    for key, vals in a["by_tag"].items():
        o.write(_table([[f"tag {key}", "cost", "runs"]]
                       + [[str(v["value"]) if v["value"] is not None else "(untagged)",
                           _usd(v["cost_usd"]), str(v["runs"])] for v in vals]) + "\n")
    o.write(_table([["user", "cost", "runs"]]
                   + [[u["user"] or "(unknown)", _usd(u["cost_usd"]), str(u["runs"])]
                      for u in a["by_user"]]) + "\n")
    o.write(_table([["week", "cost", "runs"]]
                   + [[w["week"], _usd(w["cost_usd"]), str(w["runs"])] for w in a["by_week"]])
            + "\n")
    wp = a.get("warm_pool") or {}
    if wp.get("runs"):
        o.write(f"warm-pool keep-alive: {wp['seconds'] / 3600:.2f} instance-hours, "
                f"{_usd(wp['cost_usd'])} over {len(wp['runs'])} runs (phase warm_pool)\n")
        for w in wp["runs"][:10]:
            o.write(f"  {w['run']}: {w['seconds']:.0f} s, {_usd(w['cost_usd'])} ({w['source']})\n")
        o.write("\n")
    if a["savings"]:
        per = a.get("period")
        o.write(_table([["saving (what-if)", "runs", "saving", "a month"]]
                       + [[s["what"], str(s["runs"]), _usd(s["saving_usd"]),
                           "-" + _usd(s["saving_usd_per_month"]) + " a month"
                           if s.get("saving_usd_per_month") is not None else "n/a"]
                          for s in a["savings"]]))
        if per:
            o.write(f"(a month: the savings of the fleet's {per['days']:.2f} days, {per['start']} "
                    f"to {per['end']}, scaled to 30 days"
                    + (" counting it as one day" if per["days"] < 1 else "") + ")\n")
        o.write("\n")
    if a.get("reconciliation"):
        def sec(x):
            return f"{x:.0f}" if isinstance(x, (int, float)) else "n/a"
        o.write(_table([["job (billed vs measured)", "billed s", "CUR s", "measured s", "status"]]
                       + [[r["job"], sec(r.get("billable_seconds")),
                           sec(r.get("cur_instance_seconds")), sec(r["measured_billed_seconds"]),
                           r["status"]] for r in a["reconciliation"]]) + "\n")
        for r in a["reconciliation"]:
            for p in r["problems"]:
                o.write(f"  {r['job']}: {p}\n")
    if a["unpriced"]:
        o.write(f"{len(a['unpriced'])} runs without a price (cost n/a, not counted):\n")
        for u in a["unpriced"][:10]:
            o.write(f"  {u['run']}: {u['why']}\n")
        if len(a["unpriced"]) > 10:
            o.write(f"  ... and {len(a['unpriced']) - 10} more (--json lists all)\n")
    return o.getvalue()


def write_csv(a: dict, out) -> None:
    """Long form: dimension, key, hours, cost_usd, runs (one row per group)."""
    w = csv.writer(out)
    w.writerow(["dimension", "key", "hours", "cost_usd", "runs"])
    w.writerow(["total", "", "", a["total_cost_usd"], a["priced_runs"]])
    w.writerow(["idle", "", "", a["idle_cost_usd"] if a["idle_cost_usd"] is not None else "",
                a["idle_measured_runs"]])
    for u in a["by_usage_type"]:
        w.writerow(["usage_type", u["usage_type"], u["hours"], u["cost_usd"], u["runs"]])
    for p in a["by_phase"]:
        w.writerow(["phase", p["phase"], p["hours"], p["cost_usd"], p["runs"]])
    for k, vals in a["by_tag"].items():
        for v in vals:
            w.writerow([f"tag:{k}", "" if v["value"] is None else v["value"], "", v["cost_usd"],
                        v["runs"]])
    for dim, key in (("by_user", "user"), ("by_instance_type", "instance_type"),
                     ("by_day", "day"), ("by_week", "week")):
        for v in a[dim]:
            w.writerow([key, v[key], "", v["cost_usd"], v["runs"]])
    for s in a["savings"]:
        w.writerow(["saving", s["what"], "", s["saving_usd"], s["runs"]])
        if s.get("saving_usd_per_month") is not None:
            w.writerow(["saving_per_month", s["what"], "", s["saving_usd_per_month"], s["runs"]])
    if a.get("warm_pool", {}).get("runs"):
        wp = a["warm_pool"]
        w.writerow(["warm_pool", "", wp["seconds"] / 3600.0, wp["cost_usd"], len(wp["runs"])])
    for u in a["by_usage_type"]:
        if u.get("billed_cost_usd") is not None:
            w.writerow(["billed_usage_type", u["usage_type"], "", u["billed_cost_usd"],
                        u["billed_jobs"]])


def _open_out(out: str):
    """(local directory to write into, finish()) for a local or remote --out."""
    if not is_url(out):
        Path(out).mkdir(parents=True, exist_ok=True)
        return Path(out), lambda: None
    store = Store(out)
    store.check_bucket(out)
    tmp = Path(tempfile.mkdtemp(prefix="trainprof-out-"))

    def finish():
        try:
            store.upload_tree(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return tmp, finish


def write_fleet_parquet(rows: list[RunRow], out: str) -> None:
    """runs.parquet (one row per run), usage.parquet, phases.parquet, what_ifs.parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    local, finish = _open_out(out)
    runs = {k: [] for k in ("run", "name", "run_id", "source", "user", "start_ns", "day", "week",
                            "instance_type", "instance_count", "region", "priced",
                            "total_cost_usd", "compute_cost_usd", "storage_cost_usd",
                            "billed_instance_seconds", "idle_cost_usd", "tags")}
    usage = {k: [] for k in ("run", "usage_type", "hours", "cost_usd")}
    phases = {k: [] for k in ("run", "phase", "billed_seconds", "cost_usd")}
    whatifs = {k: [] for k in ("run", "what", "title", "saving_usd")}
    for r in rows:
        for k, v in (("run", r.location), ("name", r.name), ("run_id", r.run_id),
                     ("source", r.source), ("user", r.user), ("start_ns", r.start_ns),
                     ("day", _day(r.start_ns)), ("week", _week(r.start_ns)),
                     ("instance_type", r.instance_type), ("instance_count", r.instance_count),
                     ("region", r.region), ("priced", r.priced),
                     ("total_cost_usd", r.total_cost_usd if r.priced else None),
                     ("compute_cost_usd", r.compute_cost_usd if r.priced else None),
                     ("storage_cost_usd", r.storage_cost_usd if r.priced else None),
                     ("billed_instance_seconds", r.billed_instance_seconds if r.priced else None),
                     ("idle_cost_usd", r.idle_cost_usd), ("tags", list(r.tags.items()))):
            runs[k].append(v)
        for ut, h, c in r.usage:
            for k, v in (("run", r.location), ("usage_type", ut), ("hours", h), ("cost_usd", c)):
                usage[k].append(v)
        for ph, s, c in r.phases:
            for k, v in (("run", r.location), ("phase", ph), ("billed_seconds", s),
                         ("cost_usd", c)):
                phases[k].append(v)
        for wid, title, s in r.what_ifs:
            for k, v in (("run", r.location), ("what", wid), ("title", title), ("saving_usd", s)):
                whatifs[k].append(v)
    try:
        runs_t = pa.table({**{k: v for k, v in runs.items() if k != "tags"},
                           "tags": pa.array(runs["tags"], type=pa.map_(pa.string(), pa.string()))})
        pq.write_table(runs_t, local / "runs.parquet")
        pq.write_table(pa.table(usage, schema=pa.schema([
            ("run", pa.string()), ("usage_type", pa.string()), ("hours", pa.float64()),
            ("cost_usd", pa.float64())])), local / "usage.parquet")
        pq.write_table(pa.table(phases, schema=pa.schema([
            ("run", pa.string()), ("phase", pa.string()), ("billed_seconds", pa.float64()),
            ("cost_usd", pa.float64())])), local / "phases.parquet")
        pq.write_table(pa.table(whatifs, schema=pa.schema([
            ("run", pa.string()), ("what", pa.string()), ("title", pa.string()),
            ("saving_usd", pa.float64())])), local / "what_ifs.parquet")
    finally:
        finish()


def fleet_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="trainprof fleet", description=(
        "Spend across many runs in Cost Explorer's vocabulary (usage type, phase, tag, user, "
        "day, week), idle spend and the what-ifs' savings summed over the fleet (docs/fleet.md)."))
    ap.add_argument("runs", nargs="+", metavar="RUNS",
                    help="run directories, directories of runs, globs, s3://bucket/prefix URLs")
    out = ap.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the fleet as JSON")
    out.add_argument("--csv", metavar="FILE", help="write the groups as CSV ('-': stdout)")
    out.add_argument("--parquet", metavar="DIR",
                     help="write runs/usage/phases/what_ifs .parquet into DIR (or a URL)")
    out.add_argument("--html", metavar="FILE",
                     help="write the fleet page (one self-contained HTML file; or a URL)")
    ap.add_argument("--instance-type", default="",
                    help="price the runs that have no price otherwise (no instance type named or "
                         "detected) as this type")
    ap.add_argument("--top", type=int, default=10, help="top jobs listed (default 10)")
    ap.add_argument("--billing", nargs="+", default=[], metavar="FILE",
                    help="what AWS billed: DescribeTrainingJob .json, CUR 2.0 .csv[.gz] / "
                         ".parquet; reconciled per job with the runs (tag training_job=NAME)")
    a = ap.parse_args(argv)
    if not 0 <= a.top <= 10_000:
        raise UsageError("--top: between 0 and 10000")
    refs = find_runs(a.runs)
    scratch = Path(tempfile.mkdtemp(prefix="trainprof-fleet-"))
    try:
        summaries = [load_summary(r, a.instance_type, scratch) for r in refs]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    describe, cur = read_billing(a.billing) if a.billing else ({}, {})
    has_cur = any(b.lower().endswith((".csv", ".csv.gz", ".parquet")) for b in a.billing)
    rows = [run_row(s) for s in summaries]
    for r, s in zip(rows, summaries):
        apply_warm_pool(r, s, describe)
    agg = aggregate(rows, a.top, cur if has_cur else None)
    if a.billing:
        agg["reconciliation"] = reconcile(summaries, describe, cur)
    if a.json:
        json.dump(agg, sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif a.csv:
        if a.csv == "-":
            write_csv(agg, sys.stdout)
        elif is_url(a.csv):
            buf = io.StringIO()
            write_csv(agg, buf)
            Store(a.csv).write(a.csv, buf.getvalue().encode())
        else:
            with open(a.csv, "w", newline="") as f:
                write_csv(agg, f)
    elif a.parquet:
        write_fleet_parquet(rows, a.parquet)
    elif a.html:
        from trainprof._fleet_page import render_html
        page = render_html(agg).encode()
        if is_url(a.html):
            Store(a.html).write(a.html, page)
        else:
            Path(a.html).write_bytes(page)
    else:
        sys.stdout.write(render_text(agg))
    return 0


# ---------------------------------------------------------------- export parquet

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


def priced_cost(run, instance_type: str = "") -> dict:
    """`trainprof cost RUN --json`; a run it cannot price (no instance type named or detected)
    priced as `instance_type` when one is given."""
    try:
        return run.cost()
    except Exception:
        if not instance_type:
            raise
        return run.cost(instance_type=instance_type)


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


# ---------------------------------------------------------------- what AWS billed

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


# ---------------------------------------------------------------- sync (record --out URL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _merged_run_json(local: bytes, remote: bytes | None) -> bytes:
    """run.json of a run several nodes upload to (`agent --out s3://...`): the first one's
    identity (name, run_id, tags) kept, the earliest start and the latest end."""
    if remote is None:
        return local
    try:
        mine, theirs = json.loads(local), json.loads(remote)
    except ValueError:
        return local
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return local
    out = dict(theirs)
    for key, pick in (("start_ns", min), ("end_ns", max)):
        vals = [v for v in (mine.get(key), theirs.get(key))
                if isinstance(v, int) and not isinstance(v, bool)]
        if vals:
            out[key] = pick(vals)
    return json.dumps(out, indent=2).encode() + b"\n"


def sync_once(local: Path, url: str, store: Store, sent: dict, shared: bool = False,
              delete_gone: bool = False) -> int:
    """Uploads the files of `local` that are new or changed since `sent` (path -> (size,
    mtime)); run.json and summary.json last (a reader takes run.json for a run). Returns the
    number uploaded. `shared`: other nodes upload the same run (their run.json is merged).
    `delete_gone`: a file uploaded before and gone locally since (SQLite's write-ahead log
    once checkpointed) is deleted remotely, first: a stale log beside a newer database would
    roll its pages back."""
    if delete_gone:
        for rel in sorted(sent):
            if not (local / rel).exists():
                store.delete(url.rstrip("/") + "/" + rel)
                del sent[rel]
    files = []
    for p in local.rglob("*"):
        if p.is_file() and not p.is_symlink() and not p.name.startswith("."):
            try:
                st = p.stat()
            except OSError:
                continue  # gone meanwhile
            rel = p.relative_to(local).as_posix()
            if sent.get(rel) != (st.st_size, st.st_mtime_ns):
                files.append((rel in ("run.json", SUMMARY_NAME), rel, p, st))
    n = 0
    for _, rel, p, st in sorted(files):
        try:
            data = p.read_bytes()
        except OSError:
            continue
        if shared and rel == "run.json":
            data = _merged_run_json(data, store.read(url.rstrip("/") + "/run.json",
                                                     MAX_RUN_JSON_BYTES))
        store.write(url.rstrip("/") + "/" + rel, data)
        sent[rel] = (st.st_size, st.st_mtime_ns)
        n += 1
    return n


def sync_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m trainprof.fleet sync", description=(
        "Copies a run directory to object storage: once, or (--follow PID) every --every "
        "seconds while PID runs, then once more. `trainprof record --out s3://...` starts it."))
    ap.add_argument("local")
    ap.add_argument("url")
    ap.add_argument("--follow", type=int, default=0, metavar="PID")
    ap.add_argument("--every", type=float, default=2.0)
    ap.add_argument("--shared", action="store_true",
                    help="several nodes upload this run (`agent --out`): run.json is merged; "
                         "also set by TRAINPROF_SHARED_RUN=1 in the environment")
    a = ap.parse_args(argv)
    shared = a.shared or os.environ.get("TRAINPROF_SHARED_RUN") == "1"
    if not is_url(a.url):
        raise UsageError(f"{a.url}: not a URL")
    if not 0.1 <= a.every <= 3600:
        raise UsageError("--every: between 0.1 and 3600 seconds")
    store = Store(a.url)
    local = Path(a.local)
    sent: dict = {}
    if not a.follow:
        store.check_bucket(a.url)
        n = sync_once(local, a.url, store, sent, shared)
        print(f"uploaded {n} files of {local} to {a.url}", file=sys.stderr)
        return 0
    import signal
    import time

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # ^C stops the job; the recorder stops us
    # The recorder starts us with SIGTERM blocked (src/cli/fleet_command.cc), so that one sent
    # while this interpreter started is not lost: with the handler in place, let it in.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    last_error = ""
    while True:
        done = stop or not _alive(a.follow)
        try:
            if local.is_dir():
                sync_once(local, a.url, store, sent, shared, delete_gone=True)
            last_error = ""
        except FleetError as e:  # keep trying: the local run is complete whatever happens
            if str(e) != last_error:
                print(f"trainprof: warning: upload: {e} (the run stays in {local})",
                      file=sys.stderr)
                last_error = str(e)
        if done:
            return 0 if not last_error else 1
        for _ in range(int(a.every * 10)):
            if stop or not _alive(a.follow):
                break
            time.sleep(0.1)


# ---------------------------------------------------------------- fetch / push (readers)


def _manifest(local: Path) -> dict:
    """rel path -> [size, mtime_ns] of every file under `local` (what a push compares with)."""
    out = {}
    for p in local.rglob("*"):
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            out[p.relative_to(local).as_posix()] = [st.st_size, st.st_mtime_ns]
    return out


def fetch_main(argv: list[str]) -> int:
    """A remote run (or the runs under a prefix) copied into a local directory, for the native
    readers (`trainprof show s3://...`: src/cli/remote_run.cc). Exit 1 with the URL named when
    the store is unreachable, refuses, has no such bucket or no run at that prefix."""
    ap = argparse.ArgumentParser(prog="python -m trainprof.fleet fetch", description=(
        "Copies the run at URL (or every run under the prefix) into LOCAL."))
    ap.add_argument("url")
    ap.add_argument("local")
    ap.add_argument("--one", action="store_true",
                    help="URL must be one run (not a prefix holding several)")
    ap.add_argument("--manifest", metavar="FILE",
                    help="write what was copied (path -> size, mtime) to FILE, for push")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="copy only these files of the run (e.g. run.json); none there is fine")
    a = ap.parse_args(argv)
    if not is_url(a.url):
        raise UsageError(f"{a.url}: not a URL")
    url = a.url.rstrip("/")
    local = Path(a.local)
    if a.only:
        store = Store(url)
        store.check_bucket(url)
        for name in a.only:
            if "/" in name or name in ("", ".", ".."):
                raise UsageError(f"--only {name}: a file name")
            data = store.read(url + "/" + name, MAX_RUN_JSON_BYTES)
            if data is not None:
                local.mkdir(parents=True, exist_ok=True)
                (local / name).write_bytes(data)
        return 0
    Store(url).check_bucket(url)  # missing, forbidden or unreachable: said before listing
    refs = find_runs([url])
    if a.one and (len(refs) != 1 or refs[0].location != url):
        some = ", ".join(r.location for r in refs[:3]) + (" ..." if len(refs) > 3 else "")
        raise FleetError(f"{a.url}: not one run but a prefix holding {len(refs)} ({some}); "
                         "name one run")
    total = sum(s for r in refs for _, s in r.files)
    if total > MAX_REMOTE_RUN_BYTES:
        raise FleetError(f"{a.url}: {total} bytes, more than {MAX_REMOTE_RUN_BYTES} to copy")
    local.mkdir(parents=True, exist_ok=True)
    for r in refs:
        for obj, size in r.files:
            rel = obj[len(url) + 1:]
            if not rel or ".." in rel.split("/") or rel.startswith("/"):
                continue
            r.store.download(obj, size, local / rel)
    if a.manifest:
        Path(a.manifest).write_text(json.dumps(_manifest(local)))
    return 0


def push_main(argv: list[str]) -> int:
    """Uploads a command's local output to URL: a file to URL itself, a directory's files under
    URL; with --manifest (what fetch copied) only the files added or changed since."""
    ap = argparse.ArgumentParser(prog="python -m trainprof.fleet push", description=(
        "Uploads LOCAL (a file or a directory) to URL."))
    ap.add_argument("local")
    ap.add_argument("url")
    ap.add_argument("--manifest", metavar="FILE")
    a = ap.parse_args(argv)
    if not is_url(a.url):
        raise UsageError(f"{a.url}: not a URL")
    local = Path(a.local)
    store = Store(a.url)
    if local.is_file():
        store.check_bucket(a.url)
        if local.stat().st_size > MAX_REMOTE_RUN_BYTES:
            raise FleetError(f"{local}: more than {MAX_REMOTE_RUN_BYTES} bytes to upload")
        store.write(a.url, local.read_bytes())
        return 0
    if not local.is_dir():
        raise FleetError(f"{local}: nothing was written to upload to {a.url}")
    sent = {}
    if a.manifest:
        sent = {k: tuple(v) for k, v in json.loads(Path(a.manifest).read_text()).items()}
    if _manifest(local).keys() - sent.keys() or any(
            tuple(v) != sent.get(k) for k, v in _manifest(local).items()):
        store.check_bucket(a.url)
        sync_once(local, a.url, store, sent)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    verbs = {"fleet": fleet_main, "export-parquet": export_main, "sync": sync_main,
             "fetch": fetch_main, "push": push_main}
    if not argv or argv[0] not in verbs:
        print("usage: python -m trainprof.fleet fleet|export-parquet|sync|fetch|push ARGS...",
              file=sys.stderr)
        return 2
    try:
        return verbs[argv[0]](argv[1:])
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except FleetError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
