#!/usr/bin/env python3
"""The results of bench/run_all.sh: every section appends records to one JSON-lines file, and
`finish` merges them with the targets table (bench/targets.toml) into bench/out/results.json
and prints the summary table. Standard library only: it runs under any of the benches' Pythons.

The JSON-lines file is $BENCH_RESULTS (run_all.sh sets it to bench/out/results.jsonl); with no
BENCH_RESULTS the Python API below does nothing, so a bench script run by hand still works.

Records (one JSON object a line; C++ benches write "figure" lines through bench/bench_results.h):
  {"kind": "figure", "name": N, "repeats": [...]}          one measurement per repeat; several
                                                           records of a figure add up their repeats
  {"kind": "peer", "figure": N, "repeats": [...], "detail": "HTA 0.2"}   the peer, same run
  {"kind": "peer", "figure": N, "skipped": REASON}         the peer could not run
  {"kind": "skip", "figure": N, "reason": REASON}          the figure could not be measured
  {"kind": "section", "name": S, "status": "ok"|"failed"|"skipped", "reason": R, "seconds": T}
  {"kind": "machine", "when": "before"|"after", ...}       the machine and its load
  {"kind": "meta", "mode": "full"|"quick"}

CLI (what the shell sections call):
  results.py add --name N (--value V | --repeats V,V,...)
  results.py peer --figure N (--value V | --repeats V,V,... | --skipped REASON) [--detail D]
  results.py skip --figure N --reason R
  results.py section --name S --status ok|failed|skipped [--reason R] [--seconds T]
  results.py machine --when before|after [--build-dir build/bench] [--py-build-dir build/py]
  results.py reference [--dir bench/out] [--repeat 5]     gzip -dc and memory-copy throughput
  results.py meta --mode quick
  results.py finish [--out bench/out/results.json]        merge, write, print the summary
  results.py targets-md                                   the targets table as Markdown (docs)
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TARGETS = ROOT / "bench" / "targets.toml"
ENV = "BENCH_RESULTS"
SCHEMA = 1


class BenchError(Exception):
    """Bad input to the results tools: the message names what is wrong."""


# ---- the targets table --------------------------------------------------------------------------

def load_targets(path: Path | str = TARGETS) -> dict[str, dict]:
    """Figure name -> its row of bench/targets.toml, checked; in the table's order."""
    path = Path(path)
    try:
        table = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise BenchError(f"{path}: {e}") from e
    figures = table.get("figure")
    if not isinstance(figures, dict) or not figures:
        raise BenchError(f"{path}: no [figure.\"NAME\"] tables")
    for name, row in figures.items():
        where = f"{path}: figure {name!r}"
        for key in ("section", "unit", "better", "what"):
            if not isinstance(row.get(key), str) or not row[key]:
                raise BenchError(f"{where}: missing {key}")
        if row["better"] not in ("higher", "lower"):
            raise BenchError(f"{where}: better must be 'higher' or 'lower', not {row['better']!r}")
        if "target" in row:
            if not isinstance(row["target"], (int, float)) or isinstance(row["target"], bool):
                raise BenchError(f"{where}: target must be a number")
            if row.get("op") not in (">=", "<="):
                raise BenchError(f"{where}: op must be '>=' or '<='")
            if row.get("on") not in ("value", "ratio"):
                raise BenchError(f"{where}: on must be 'value' or 'ratio'")
            if row["on"] == "ratio" and not row.get("peer"):
                raise BenchError(f"{where}: a target on the ratio needs a peer")
            if not row.get("source"):
                raise BenchError(f"{where}: a target needs its source (the issue)")
        else:
            for key in ("op", "on", "source"):
                if key in row:
                    raise BenchError(f"{where}: {key} without a target")
    return figures


def target_text(row: dict) -> str:
    if "target" not in row:
        return "-"
    return f"{'ratio ' if row['on'] == 'ratio' else ''}{row['op']} {fmt(row['target'])}"


def targets_markdown(targets: dict[str, dict]) -> str:
    lines = ["| figure | what | unit | better | target | peer | source |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, row in targets.items():
        what = row["what"].replace("|", "\\|")
        lines.append(f"| `{name}` | {what} | {row['unit']} | {row['better']} | "
                     f"{target_text(row)} | {row.get('peer', '-')} | {row.get('source', '-')} |")
    return "\n".join(lines) + "\n"


# ---- writing records ----------------------------------------------------------------------------

def results_file(path: str | None = None) -> Path | None:
    p = path or os.environ.get(ENV)
    return Path(p) if p else None


def _finite(values) -> list[float]:
    out = []
    for v in values:
        x = float(v)
        if not math.isfinite(x):
            raise BenchError(f"not a finite number: {v!r}")
        out.append(x)
    return out


def append(record: dict, path: str | None = None) -> None:
    """Appends one record to the results file (nothing when there is none)."""
    target = results_file(path)
    if target is None:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "a") as f:
        f.write(json.dumps(record) + "\n")


def _known(name: str) -> None:
    if name not in load_targets():
        raise BenchError(f"figure {name!r} is not in {TARGETS.relative_to(ROOT)}: add it there")


def add(name: str, repeats, path: str | None = None) -> None:
    """Records a figure: one value per repeat (a number is one repeat)."""
    repeats = _finite(repeats if isinstance(repeats, (list, tuple)) else [repeats])
    if not repeats:
        raise BenchError(f"figure {name!r}: no values")
    _known(name)
    append({"kind": "figure", "name": name, "repeats": repeats}, path)


def peer(figure: str, repeats=None, skipped: str | None = None, detail: str | None = None,
         path: str | None = None) -> None:
    """Records the peer's measurement of a figure, or why the peer could not run."""
    _known(figure)
    rec: dict = {"kind": "peer", "figure": figure}
    if skipped is not None:
        rec["skipped"] = skipped
    else:
        vals = _finite(repeats if isinstance(repeats, (list, tuple)) else [repeats])
        if not vals:
            raise BenchError(f"peer of {figure!r}: no values")
        rec["repeats"] = vals
    if detail:
        rec["detail"] = detail
    append(rec, path)


def skip(figure: str, reason: str, path: str | None = None) -> None:
    _known(figure)
    append({"kind": "skip", "figure": figure, "reason": reason}, path)


# ---- the machine --------------------------------------------------------------------------------

def _first_line(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.strip().splitlines()
    return lines[0] if lines else None


def _cmake_cache(build_dir: Path) -> dict[str, str]:
    cache = {}
    try:
        text = (build_dir / "CMakeCache.txt").read_text(errors="replace")
    except OSError:
        return cache
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z_0-9]+):[A-Z]+=(.*)$", line)
        if m:
            cache[m.group(1)] = m.group(2)
    return cache


def build_info(build_dir: Path) -> dict:
    cache = _cmake_cache(build_dir)
    if not cache:
        return {"dir": str(build_dir), "configured": False}
    cxx = cache.get("CMAKE_CXX_COMPILER", "")
    btype = cache.get("CMAKE_BUILD_TYPE", "")
    return {"dir": str(build_dir), "configured": True, "build_type": btype or "(none)",
            "compiler": _first_line([cxx, "--version"]) if cxx else None,
            "cxx_flags": " ".join(x for x in (cache.get("CMAKE_CXX_FLAGS", ""),
                                              cache.get(f"CMAKE_CXX_FLAGS_{btype.upper()}", ""))
                                  if x).strip()}


def machine_info(build_dir: Path, py_build_dir: Path) -> dict:
    cpu = None
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        m = re.search(r"^MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M)
        mem_gib = round(int(m.group(1)) / 1048576, 1) if m else None
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    git = _first_line(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    dirty = _first_line(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"])
    return {"cpu_model": cpu or platform.processor() or "unknown", "cores": os.cpu_count(),
            "usable_cores": usable, "memory_gib": mem_gib,
            "kernel": f"{platform.system()} {platform.release()}",
            "python": platform.python_version(), "python_executable": sys.executable,
            "build": build_info(build_dir), "python_build": build_info(py_build_dir),
            "commit": (git or "unknown") + (" (with uncommitted changes)" if dirty else "")}


def load_now() -> dict:
    return {"loadavg": [round(x, 2) for x in os.getloadavg()],
            "utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


# ---- reference measurements ---------------------------------------------------------------------

REFERENCE_RAW_BYTES = 32_000_000


def reference_file(directory: Path) -> tuple[Path, int]:
    """A fixed gzip file: the same generated, trace-like 32 MB of text on every machine
    (seeded), compressed once with `gzip -6`. Returns its path and its decompressed size."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "reference-32MB.json.gz"
    if not path.exists():
        rng = random.Random(20261202)
        parts, size, i = [], 0, 0
        while size < REFERENCE_RAW_BYTES:
            r = rng.getrandbits(32)
            line = (f'{{"ph": "X", "name": "op{r % 97}", "ts": {i * 1000 + r % 1000}, '
                    f'"dur": {r % 5000}, "args": {{"External id": {i}}}}}\n')
            parts.append(line)
            size += len(line)
            i += 1
        raw = "".join(parts).encode()[:REFERENCE_RAW_BYTES]
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            subprocess.run(["gzip", "-6", "-c"], input=raw, stdout=f, check=True)
        tmp.rename(path)
    return path, REFERENCE_RAW_BYTES


def measure_gzip(path: Path, raw_bytes: int, repeat: int) -> list[float]:
    rates = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        done = subprocess.run(["gzip", "-dc", str(path)], stdout=subprocess.PIPE, check=True)
        secs = time.perf_counter() - t0
        if len(done.stdout) != raw_bytes:
            raise BenchError(f"{path}: decompressed to {len(done.stdout)} bytes, "
                             f"expected {raw_bytes}")
        rates.append(raw_bytes / 1e6 / secs)
    return rates


def measure_memcpy(repeat: int, size: int = 256 << 20) -> list[float]:
    src = bytearray(b"\x5a") * size  # written, so that no page is the shared zero page
    dst = bytearray(b"\x00") * size
    view = memoryview(dst)
    view[:] = src  # fault every page of both in
    rates = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        view[:] = src
        rates.append(size / 1e9 / (time.perf_counter() - t0))
    return rates


# ---- merging ------------------------------------------------------------------------------------

def read_records(path: Path) -> list[dict]:
    records = []
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise BenchError(f"cannot read the results records {path}: {e}") from e
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise BenchError(f"{path}:{n}: not JSON ({e})") from e
        if not isinstance(rec, dict) or "kind" not in rec:
            raise BenchError(f"{path}:{n}: a record needs a 'kind'")
        records.append(rec)
    return records


def spread(values: list[float]) -> float | None:
    """(max - min) / median of the repeats: the relative range; None with one repeat."""
    if len(values) < 2:
        return None
    med = statistics.median(values)
    if med == 0:
        return None
    return (max(values) - min(values)) / abs(med)


def ratio_of(value: float | None, peer_value: float | None, better: str) -> float | None:
    """How many times better than the peer (above 1: trainprof wins)."""
    if value is None or peer_value is None or value <= 0 or peer_value <= 0:
        return None
    return value / peer_value if better == "higher" else peer_value / value


def meets(x: float, op: str, target: float) -> bool:
    return x >= target if op == ">=" else x <= target


def merge(records: list[dict], targets: dict[str, dict]) -> dict:
    repeats: dict[str, list[float]] = {}
    peers: dict[str, dict] = {}
    skips: dict[str, str] = {}
    sections: dict[str, dict] = {}
    machine: dict = {}
    meta: dict = {"mode": "full"}
    unknown: list[str] = []
    for rec in records:
        kind = rec["kind"]
        if kind == "figure":
            name = rec.get("name")
            if name not in targets:
                unknown.append(str(name))
                continue
            repeats.setdefault(name, []).extend(_finite(rec.get("repeats", [])))
        elif kind == "peer":
            name = rec.get("figure")
            if name not in targets:
                unknown.append(str(name))
                continue
            p = peers.setdefault(name, {"repeats": [], "skipped": None, "detail": None})
            if "skipped" in rec:
                p["skipped"] = rec["skipped"]
            else:
                p["repeats"].extend(_finite(rec.get("repeats", [])))
            if rec.get("detail"):
                p["detail"] = rec["detail"]
        elif kind == "skip":
            if rec.get("figure") not in targets:
                unknown.append(str(rec.get("figure")))
                continue
            skips[rec["figure"]] = rec.get("reason", "")
        elif kind == "section":
            sections[rec["name"]] = {k: rec[k] for k in ("status", "reason", "seconds")
                                     if k in rec}
        elif kind == "machine":
            when = rec.get("when")
            info = {k: v for k, v in rec.items() if k not in ("kind", "when")}
            load = {"loadavg": info.pop("loadavg", None), "utc": info.pop("utc", None)}
            if when == "before":
                machine.update(info)
            else:
                machine.update({k: v for k, v in info.items() if k not in machine})
            machine[f"load_{when}"] = load
        elif kind == "meta":
            meta.update({k: v for k, v in rec.items() if k != "kind"})
        else:
            raise BenchError(f"unknown record kind {kind!r}")

    figures = []
    for name, row in targets.items():
        reps = repeats.get(name, [])
        value = statistics.median(reps) if reps else None
        p = peers.get(name, {"repeats": [], "skipped": None, "detail": None})
        peer_value = statistics.median(p["repeats"]) if p["repeats"] else None
        ratio = ratio_of(value, peer_value, row["better"])
        fig = {"name": name, "section": row["section"], "what": row["what"],
               "unit": row["unit"], "better": row["better"], "value": value,
               "repeats": reps, "median": value, "spread": spread(reps),
               "min": min(reps) if reps else None, "max": max(reps) if reps else None,
               "peer": row.get("peer"), "peer_detail": p["detail"], "peer_value": peer_value,
               "peer_repeats": p["repeats"], "peer_spread": spread(p["repeats"]),
               "ratio": ratio, "target": row.get("target"), "op": row.get("op"),
               "on": row.get("on"), "source": row.get("source"), "met": None,
               "status": None, "reason": None}
        if row.get("peer") and peer_value is None:
            fig["peer_status"] = f"skipped: {p['skipped']}" if p["skipped"] else "not measured"
        section = sections.get(row["section"], {})
        if value is None:
            if name in skips:
                fig["status"], fig["reason"] = "skipped", skips[name]
            elif section.get("status") in ("failed", "skipped"):
                fig["status"] = section["status"]
                fig["reason"] = f"section {row['section']} {section['status']}: " + \
                    section.get("reason", "")
            elif not section:
                fig["status"], fig["reason"] = "missing", f"section {row['section']} did not run"
            else:
                fig["status"], fig["reason"] = "missing", "the section reported no value"
        elif "target" not in row:
            fig["status"] = "measured"
        else:
            checked = value if row["on"] == "value" else ratio
            if checked is None:
                fig["status"] = "not checked"
                fig["reason"] = f"peer {fig.get('peer_status', 'not measured')}"
            else:
                fig["met"] = meets(checked, row["op"], row["target"])
                fig["status"] = "met" if fig["met"] else "NOT met"
        figures.append(fig)

    with_target = [f for f in figures if f["target"] is not None]
    counts = {"targets": len(with_target),
              "met": sum(1 for f in with_target if f["status"] == "met"),
              "not_met": sum(1 for f in with_target if f["status"] == "NOT met"),
              "not_measured": sum(1 for f in with_target if f["status"] not in ("met", "NOT met")),
              "failed_sections": sorted(s for s, v in sections.items()
                                        if v.get("status") == "failed")}
    return {"schema": SCHEMA, "mode": meta.get("mode", "full"), "machine": machine,
            "sections": sections, "figures": figures, "counts": counts,
            "unknown_figures": sorted(set(unknown))}


# ---- printing -----------------------------------------------------------------------------------

def fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if abs(x) >= 1e4:
        return f"{x:,.0f}"
    return f"{x:.4g}"


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def _figure(results: dict, name: str) -> dict | None:
    return next((f for f in results["figures"] if f["name"] == name), None)


def machine_lines(results: dict) -> list[str]:
    m = results.get("machine", {})
    lines = []
    if m:
        b, pb = m.get("build", {}), m.get("python_build", {})

        def build(x: dict) -> str:
            if not x.get("configured"):
                return f"{x.get('dir', '?')} not configured"
            return f"{x['build_type']} ({x['dir']}, {x.get('compiler') or 'compiler ?'})"

        lines.append(f"machine: {m.get('cpu_model')}, {m.get('cores')} cores "
                     f"({m.get('usable_cores')} usable), {m.get('memory_gib')} GiB, "
                     f"{m.get('kernel')}, Python {m.get('python')}")
        lines.append(f"build: benches {build(b)}; Python package {build(pb)}; "
                     f"commit {m.get('commit')}")
        la = [m.get(f"load_{w}", {}).get("loadavg") for w in ("before", "after")]
        lines.append("load average (1/5/15 min): before "
                     + (" ".join(f"{x:.2f}" for x in la[0]) if la[0] else "-")
                     + ", after " + (" ".join(f"{x:.2f}" for x in la[1]) if la[1] else "-"))
    else:
        lines.append("machine: not recorded")
    refs = []
    for name, label in (("reference.gzip_dc", "gzip -dc"), ("reference.memcpy", "memory copy")):
        f = _figure(results, name)
        if f and f["value"] is not None:
            refs.append(f"{label} {fmt(f['value'])} {f['unit']} (spread {pct(f['spread'])})")
    lines.append("reference on this machine: " + ("; ".join(refs) if refs else "not measured"))
    return lines


def summary(results: dict) -> str:
    out = [f"== summary ({results['mode']} mode)"]
    if results["mode"] == "quick":
        out.append("QUICK mode (BENCH_QUICK=1): smaller inputs and fewer repeats; "
                   "the figures are rough")
    out += machine_lines(results)
    if results["sections"]:
        out.append("sections: " + ", ".join(
            f"{s} {v.get('status', '?')}"
            + (f" ({v['seconds']:.0f} s)" if isinstance(v.get("seconds"), (int, float)) else "")
            + (f" [{v['reason']}]" if v.get("reason") and v.get("status") != "ok" else "")
            for s, v in results["sections"].items()))
    header = ("figure", "value", "unit", "spread", "n", "peer value", "ratio", "target", "status")
    rows = []
    for f in results["figures"]:
        throughput = f["unit"].endswith("/s") and not f["name"].startswith("reference.")
        status = f["status"]
        if f["reason"]:
            status += f" ({f['reason']})"
        elif f.get("peer_status") and f["peer"]:
            status += f" (peer {f['peer_status']})"
        if throughput and f["value"] is not None:
            status += " [ref]"
        rows.append((f["name"], fmt(f["value"]), f["unit"], pct(f["spread"]),
                     str(len(f["repeats"])), fmt(f["peer_value"]),
                     "-" if f["ratio"] is None else f"{f['ratio']:.2f}x",
                     "-" if f["target"] is None else
                     f"{'ratio ' if f['on'] == 'ratio' else ''}{f['op']} {fmt(f['target'])}",
                     status))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    for r in [header, *rows]:
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    c = results["counts"]
    out.append(f"targets: {c['targets']}: {c['met']} met, {c['not_met']} NOT met, "
               f"{c['not_measured']} not measured")
    out.append("ratio: times better than the peer measured in the same run (above 1: trainprof "
               "wins); spread: (max - min) / median of the repeats; [ref]: a throughput, read it "
               "beside the reference line above")
    if c["failed_sections"]:
        out.append("FAILED sections: " + ", ".join(c["failed_sections"]))
    if results["unknown_figures"]:
        out.append("figures reported but not in bench/targets.toml (ignored): "
                   + ", ".join(results["unknown_figures"]))
    return "\n".join(out) + "\n"


# ---- CLI ----------------------------------------------------------------------------------------

def _floats(text: str) -> list[float]:
    try:
        return _finite(x for x in text.split(",") if x.strip())
    except ValueError as e:
        raise BenchError(f"not a comma-separated list of numbers: {text!r}") from e


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", help=f"the JSON-lines records (default ${ENV})")
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("add")
    a.add_argument("--name", required=True)
    g = a.add_mutually_exclusive_group(required=True)
    g.add_argument("--value", type=float)
    g.add_argument("--repeats")
    p = sub.add_parser("peer")
    p.add_argument("--figure", required=True)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--value", type=float)
    g.add_argument("--repeats")
    g.add_argument("--skipped")
    p.add_argument("--detail")
    s = sub.add_parser("skip")
    s.add_argument("--figure", required=True)
    s.add_argument("--reason", required=True)
    s = sub.add_parser("section")
    s.add_argument("--name", required=True)
    s.add_argument("--status", required=True, choices=["ok", "failed", "skipped"])
    s.add_argument("--reason", default="")
    s.add_argument("--seconds", type=float)
    m = sub.add_parser("machine")
    m.add_argument("--when", required=True, choices=["before", "after"])
    m.add_argument("--build-dir", default=str(ROOT / "build" / "bench"))
    m.add_argument("--py-build-dir", default=str(ROOT / "build" / "py"))
    r = sub.add_parser("reference")
    r.add_argument("--dir", default=str(ROOT / "bench" / "out"))
    r.add_argument("--repeat", type=int, default=5)
    mt = sub.add_parser("meta")
    mt.add_argument("--mode", choices=["full", "quick"], required=True)
    f = sub.add_parser("finish")
    f.add_argument("--out", help="results.json (default: beside the records file)")
    f.add_argument("--targets", default=str(TARGETS))
    t = sub.add_parser("targets-md")
    t.add_argument("--targets", default=str(TARGETS))
    args = ap.parse_args(argv)

    try:
        if args.cmd == "targets-md":
            sys.stdout.write(targets_markdown(load_targets(args.targets)))
            return 0
        path = results_file(args.file)
        if path is None:
            raise BenchError(f"no results file: set ${ENV} or pass --file")
        file = str(path)
        if args.cmd == "add":
            add(args.name, [args.value] if args.value is not None else _floats(args.repeats), file)
        elif args.cmd == "peer":
            if args.skipped is not None:
                peer(args.figure, skipped=args.skipped, detail=args.detail, path=file)
            else:
                vals = [args.value] if args.value is not None else _floats(args.repeats)
                peer(args.figure, vals, detail=args.detail, path=file)
        elif args.cmd == "skip":
            skip(args.figure, args.reason, file)
        elif args.cmd == "section":
            rec = {"kind": "section", "name": args.name, "status": args.status,
                   "reason": args.reason}
            if args.seconds is not None:
                rec["seconds"] = args.seconds
            append(rec, file)
        elif args.cmd == "machine":
            info = machine_info(Path(args.build_dir), Path(args.py_build_dir))
            append({"kind": "machine", "when": args.when, **info, **load_now()}, file)
        elif args.cmd == "meta":
            append({"kind": "meta", "mode": args.mode}, file)
        elif args.cmd == "reference":
            if not shutil.which("gzip"):
                skip("reference.gzip_dc", "gzip not installed", file)
            else:
                gz, raw = reference_file(Path(args.dir))
                rates = measure_gzip(gz, raw, args.repeat)
                add("reference.gzip_dc", rates, file)
                print(f"reference: gzip -dc {statistics.median(rates):.0f} MB/s "
                      f"(median of {len(rates)}: {', '.join(f'{x:.0f}' for x in rates)})")
            rates = measure_memcpy(args.repeat)
            add("reference.memcpy", rates, file)
            print(f"reference: memory copy {statistics.median(rates):.2f} GB/s "
                  f"(median of {len(rates)}: {', '.join(f'{x:.2f}' for x in rates)})")
        elif args.cmd == "finish":
            results = merge(read_records(path), load_targets(args.targets))
            out = Path(args.out) if args.out else path.with_name("results.json")
            out.write_text(json.dumps(results, indent=1) + "\n")
            sys.stdout.write(summary(results))
            print(f"results: {out}")
    except BenchError as e:
        print(f"results.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
