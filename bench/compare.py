#!/usr/bin/env python3
"""What got faster or slower between two benchmark runs: bench/compare.py OLD.json NEW.json.

OLD and NEW are results files of bench/run_all.sh (bench/out/results.json; copy the first one
away before the second run). For every figure measured in both it prints the median and spread
(max - min over median) of each run's repeats, the ratio NEW/OLD of the medians, and a verdict:
  faster / slower (better / worse for sizes and shares)   the repeats of the two runs do not
                                                          overlap: the change exceeds the noise
  within noise                                            they overlap
  noise unknown                                           a run has a single repeat
The machines of the two runs and their reference measurements (gzip -dc, memory copy) come
first: a NEW machine whose reference is 0.8x OLD's explains a 0.8x throughput by itself. For
throughputs (units per second) the column "/ref" divides NEW/OLD by the gzip -dc reference's
NEW/OLD: above 1, the figure gained more than the machine did.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
from results import BenchError, fmt, pct  # noqa: E402

TIME_UNITS = {"s", "ms", "us", "ns"}


def load(path: str) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise BenchError(f"{path}: {e}") from e
    if not isinstance(data, dict) or not isinstance(data.get("figures"), list):
        raise BenchError(f"{path}: not a results file of bench/run_all.sh (no 'figures' list)")
    for f in data["figures"]:
        if not isinstance(f, dict) or not isinstance(f.get("name"), str):
            raise BenchError(f"{path}: a figure without a name")
    return data


def is_speed(unit: str) -> bool:
    return unit.endswith("/s") or unit.split("/")[0].strip() in TIME_UNITS


def verdict(old: dict, new: dict) -> str:
    better = new.get("better", "higher")
    up = new["value"] > old["value"]
    improved = up if better == "higher" else (not up and new["value"] != old["value"])
    word = ("faster" if improved else "slower") if is_speed(new.get("unit", "")) else \
        ("better" if improved else "worse")
    if new["value"] == old["value"]:
        return "same"
    o, n = old.get("repeats") or [], new.get("repeats") or []
    if len(o) < 2 or len(n) < 2:
        return f"{word}? (noise unknown: {min(len(o), len(n))} repeat)"
    if min(n) > max(o) or max(n) < min(o):
        return word
    return "within noise"


def compare(old: dict, new: dict) -> list[dict]:
    """One row per figure of either file, in NEW's order (then OLD's leftovers)."""
    olds = {f["name"]: f for f in old["figures"]}
    news = {f["name"]: f for f in new["figures"]}
    names = [f["name"] for f in new["figures"]] + [n for n in olds if n not in news]
    rows = []
    for name in names:
        o, n = olds.get(name), news.get(name)
        row = {"name": name, "unit": (n or o)["unit"],
               "old": o.get("value") if o else None, "old_spread": o.get("spread") if o else None,
               "new": n.get("value") if n else None, "new_spread": n.get("spread") if n else None,
               "ratio": None, "per_ref": None, "verdict": None}
        if o is None or n is None:
            row["verdict"] = f"only in {'NEW' if o is None else 'OLD'}"
        elif o.get("value") is None or n.get("value") is None:
            missing = [w for w, f in (("OLD", o), ("NEW", n)) if f.get("value") is None]
            row["verdict"] = "not measured in " + " and ".join(
                f"{w} ({(o if w == 'OLD' else n).get('status', '?')})" for w in missing)
        else:
            row["ratio"] = n["value"] / o["value"] if o["value"] else None
            row["verdict"] = verdict(o, n)
        rows.append(row)
    ref = next((r["ratio"] for r in rows if r["name"] == "reference.gzip_dc"), None)
    for row in rows:
        if (ref and row["ratio"] is not None and row["unit"].endswith("/s")
                and not row["name"].startswith("reference.")):
            row["per_ref"] = row["ratio"] / ref
    return rows


def machine_line(label: str, r: dict) -> str:
    m = r.get("machine", {})
    load = m.get("load_before", {}).get("loadavg")
    return (f"{label}: {m.get('cpu_model', '?')}, {m.get('cores', '?')} cores, "
            f"{m.get('memory_gib', '?')} GiB, {m.get('kernel', '?')}, commit {m.get('commit', '?')}"
            f", {r.get('mode', '?')} mode, load before {load[0] if load else '?'}")


def report(old: dict, new: dict) -> str:
    rows = compare(old, new)
    out = [machine_line("OLD", old), machine_line("NEW", new)]
    for row in rows:
        if row["name"].startswith("reference.") and row["ratio"] is not None:
            out.append(f"reference {row['name'][len('reference.'):]}: NEW/OLD = "
                       f"{row['ratio']:.2f}x (the machines' own speed; throughputs scale with it)")
    header = ("figure", "unit", "OLD median", "spread", "NEW median", "spread", "NEW/OLD",
              "/ref", "verdict")
    table = [(r["name"], r["unit"], fmt(r["old"]), pct(r["old_spread"]), fmt(r["new"]),
              pct(r["new_spread"]), "-" if r["ratio"] is None else f"{r['ratio']:.3f}x",
              "-" if r["per_ref"] is None else f"{r['per_ref']:.3f}x", r["verdict"])
             for r in rows]
    widths = [max(len(t[i]) for t in [header, *table]) for i in range(len(header) - 1)]
    for t in [header, *table]:
        out.append("  ".join(c.ljust(w) for c, w in zip(t, widths)) + "  " + t[-1])
    beyond = [r["verdict"] for r in rows if r["verdict"] in ("faster", "slower", "better", "worse")]
    out.append(
        f"{len(beyond)} beyond the noise ("
        + ", ".join(f"{beyond.count(w)} {w}" for w in ("faster", "slower", "better", "worse"))
        + f"), {sum(r['verdict'] == 'within noise' for r in rows)} within noise, "
        f"{sum('noise unknown' in r['verdict'] for r in rows)} noise unknown, "
        f"{sum(r['ratio'] is None for r in rows)} not measured in both")
    out.append("spread: (max - min) / median of a run's repeats; faster/slower (better/worse): "
               "the two runs' repeats do not overlap; /ref: a throughput's NEW/OLD over the "
               "gzip -dc reference's")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--json", action="store_true", help="the rows as JSON")
    a = ap.parse_args(argv)
    try:
        old, new = load(a.old), load(a.new)
    except BenchError as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(compare(old, new), indent=1))
    else:
        sys.stdout.write(report(old, new))
    return 0


if __name__ == "__main__":
    sys.exit(main())
