"""The runs the fleet commands read: local directories, globs and object-storage URLs (searched
MAX_SEARCH_DEPTH levels deep), copied here when a command needs the whole run; and each run's
summary.json (src/cli/run_summary.h), made and cached once for a run that has none."""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from trainprof._fleet_base import (
    FleetError, MAX_REMOTE_RUN_BYTES, MAX_RUNS, MAX_RUN_JSON_BYTES, MAX_SEARCH_DEPTH,
    MAX_SUMMARY_BYTES, SUMMARY_NAME, SUMMARY_VERSION,
)
from trainprof._objstore import Store, is_url

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


def priced_cost(run, instance_type: str = "") -> dict:
    """`trainprof cost RUN --json`; a run it cannot price (no instance type named or detected)
    priced as `instance_type` when one is given."""
    try:
        return run.cost()
    except Exception:
        if not instance_type:
            raise
        return run.cost(instance_type=instance_type)
