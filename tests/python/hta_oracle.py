"""HolisticTraceAnalysis (pip `holistictraceanalysis==0.5.0`) as an oracle for `trainprof analyze
--hta-compat`: the figures HTA gives for a set of trace files, in one plain dict.

Used by tests/python/test_hta_differential.py and bench/hta_ratio.py.
"""

import logging
import math
import os
import time
import warnings


def _quiet():
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    for name in ("hta", "hta.configs.config"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _num(v):
    """None for HTA's undefined values (0/0 is NaN, x/0 is inf)."""
    v = float(v)
    return v if math.isfinite(v) else None


def hta_figures(files):
    """Loads `files` (one per rank) with HTA's TraceAnalysis and returns
    {"ranks": {rank: {"temporal": {...} | None, "idle": {(stream, category): (us, ratio)},
                      "overlap_pct": float | None}},
     "kernel_types": {label: pct}, "kernel_type_us": {label: us},
     "load_s": seconds, "analyze_s": seconds, "errors": {analysis: text}}.
    An analysis HTA fails on (e.g. its temporal breakdown of a trace without GPU kernels raises
    IndexError) is left out and named in "errors"."""
    _quiet()
    from hta.trace_analysis import TraceAnalysis

    paths = [os.path.abspath(f) for f in files]
    t0 = time.perf_counter()
    ta = TraceAnalysis(trace_files=paths, trace_dir="/")
    t1 = time.perf_counter()
    ranks = sorted(ta.t.traces.keys())
    out = {"ranks": {r: {"temporal": None, "idle": {}, "overlap_pct": None} for r in ranks},
           "kernel_types": {}, "kernel_type_us": {}, "errors": {}}
    try:
        for row in ta.get_temporal_breakdown(visualize=False).to_dict("records"):
            out["ranks"][row["rank"]]["temporal"] = {
                "idle_us": float(row["idle_time(us)"]),
                "compute_us": float(row["compute_time(us)"]),
                "non_compute_us": float(row["non_compute_time(us)"]),
                "kernel_us": float(row["kernel_time(us)"]),
                "idle_pct": float(row["idle_time_pctg"]),
                "compute_pct": float(row["compute_time_pctg"]),
                "non_compute_pct": float(row["non_compute_time_pctg"]),
            }
    except Exception as e:  # noqa: BLE001 - HTA's own failure is a result here
        out["errors"]["temporal"] = repr(e)
    try:
        kt, _ = ta.get_gpu_kernel_breakdown(visualize=False)
        for row in kt.to_dict("records"):
            out["kernel_types"][row["kernel_type"]] = float(row["percentage"])
            out["kernel_type_us"][row["kernel_type"]] = float(row["sum"])
    except Exception as e:  # noqa: BLE001
        out["errors"]["kernel_types"] = repr(e)
    try:
        idle, _ = ta.get_idle_time_breakdown(ranks=ranks, visualize=False)
        for row in idle.to_dict("records"):
            out["ranks"][row["rank"]]["idle"][(int(row["stream"]), row["idle_category"])] = (
                _num(row["idle_time"]), _num(row["idle_time_ratio"]))
    except Exception as e:  # noqa: BLE001
        out["errors"]["idle"] = repr(e)
    try:
        for row in ta.get_comm_comp_overlap(visualize=False).to_dict("records"):
            out["ranks"][row["rank"]]["overlap_pct"] = _num(row["comp_comm_overlap_pctg"])
    except Exception as e:  # noqa: BLE001
        out["errors"]["overlap"] = repr(e)
    out["load_s"] = t1 - t0
    out["analyze_s"] = time.perf_counter() - t1
    return out


def trainprof_figures(doc):
    """The same figures from `trainprof analyze --hta-compat --json` output (a dict)."""
    out = {"ranks": {}, "kernel_types": {}, "kernel_type_us": {}}
    for r in doc["ranks"]:
        key = r["rank"] if r["rank"] is not None else r["label"]
        idle = {}
        for e in r["idle"]:
            idle[(int(e["stream"]), e["category"])] = (e["time_us"], e["ratio"])
        out["ranks"][key] = {"temporal": r["temporal"], "idle": idle,
                             "overlap_pct": r["comm_comp_overlap_pct"]}
    for k in doc.get("kernel_types", []):
        out["kernel_types"][k["type"]] = k["pct"]
        out["kernel_type_us"][k["type"]] = k["time_us"]
    return out


def compare(hta, tp, tol_pp=0.1):
    """Differences beyond `tol_pp` percentage points (and beyond 0.1 % of the span for times)
    as readable lines; empty when trainprof reproduces HTA."""
    bad = []
    h_ranks = sorted(hta["ranks"])
    t_ranks = list(tp["ranks"])
    if len(h_ranks) == 1 and len(t_ranks) == 1:
        pairs = [(h_ranks[0], t_ranks[0])]
    else:
        pairs = [(r, r) for r in h_ranks]
    for hr, tr in pairs:
        h = hta["ranks"][hr]
        t = tp["ranks"].get(tr)
        if t is None:
            bad.append(f"rank {tr}: missing in trainprof (ranks {t_ranks})")
            continue
        ht, tt = h["temporal"], t["temporal"]
        if "temporal" in hta["errors"]:
            # Where HTA has no breakdown (no GPU kernels, or whole-microsecond intervals that
            # end before they start), trainprof gives none either, never impossible figures.
            if tt is not None:
                bad.append(f"rank {tr}: temporal {tt} where HTA has none "
                           f"({hta['errors']['temporal']})")
        else:
            if tt is None:
                bad.append(f"rank {tr}: no temporal breakdown, HTA has {ht}")
            else:
                span = max(ht["kernel_us"], 1.0)
                for k in ("idle_pct", "compute_pct", "non_compute_pct"):
                    if abs(ht[k] - tt[k]) > tol_pp + 1e-9:
                        bad.append(f"rank {tr} temporal {k}: HTA {ht[k]} trainprof {tt[k]}")
                for k in ("idle_us", "compute_us", "non_compute_us", "kernel_us"):
                    if abs(ht[k] - tt[k]) > span * tol_pp / 100 + 1e-6:
                        bad.append(f"rank {tr} temporal {k}: HTA {ht[k]} trainprof {tt[k]}")
        if "idle" not in hta["errors"]:
            totals = {}
            for (s, _), (us, _) in h["idle"].items():
                totals[s] = totals.get(s, 0.0) + abs(us or 0.0)
            for key in set(h["idle"]) | set(t["idle"]):
                hu, hratio = h["idle"].get(key, (0.0, 0.0))
                tu, tratio = t["idle"].get(key, (0.0, 0.0))
                if hratio is None:  # HTA's 0/0
                    hratio = tratio
                if abs((hu or 0.0) - tu) > max(totals.get(key[0], 0.0), 1.0) * tol_pp / 100 + 1e-6:
                    bad.append(f"rank {tr} idle {key}: HTA {hu} us trainprof {tu} us")
                if abs(hratio - tratio) * 100 > tol_pp + 1e-9:
                    bad.append(f"rank {tr} idle {key} ratio: HTA {hratio} trainprof {tratio}")
        if "overlap" not in hta["errors"]:
            ho, to = h["overlap_pct"], t["overlap_pct"]
            if (ho is None) != (to is None) or (ho is not None and abs(ho - to) > tol_pp + 1e-9):
                bad.append(f"rank {tr} comm-comp overlap: HTA {ho} trainprof {to}")
    if "kernel_types" not in hta["errors"]:
        for label in set(hta["kernel_types"]) | set(tp["kernel_types"]):
            hp = hta["kernel_types"].get(label, 0.0)
            tpp = tp["kernel_types"].get(label, 0.0)
            if abs(hp - tpp) > tol_pp + 1e-9:
                bad.append(f"kernel type {label!r}: HTA {hp} % trainprof {tpp} %")
    return bad
