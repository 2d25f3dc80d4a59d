"""Runs to and from object storage: `sync` (record --out URL / agent --out URL: a run directory
mirrored while it is written), `fetch` and `push` (the native readers' RUN and --out URLs,
src/cli/remote_run.cc)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from trainprof._fleet_base import (
    FleetError, MAX_REMOTE_RUN_BYTES, MAX_RUN_JSON_BYTES, SUMMARY_NAME, UsageError,
)
from trainprof._fleet_runs import find_runs
from trainprof._objstore import Store, is_url

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
