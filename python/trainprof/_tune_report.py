"""How `trainprof tune` ranks, explains and prints its trials (docs/tune.md): each knob's effect
across trials, the evidence of the best one against the baseline, the summary (text table,
JSON, tune.html) and `trainprof report STATE` of a state directory. What a trial measured, and
its price, come from trainprof._tune_results."""

from __future__ import annotations

import html
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

from trainprof import _tune_knobs as K
from trainprof._tune_results import DEFAULT, changed_as_run, typed


# ---------------------------------------------------------------------------------------------
# Ranking and explaining


def canonical_values(knobs, base: dict | None) -> dict[str, dict[str, str]]:
    """Per own knob, the values that leave the job as it is, written as DEFAULT: the value
    the baseline ran with, or every value when the baseline shows the knob does not apply
    (no DataLoader, no torch)."""
    out: dict[str, dict[str, str]] = {}
    if base is None:
        return out
    obs = base.get("observed") or {}
    for k in knobs:
        if k.kind != "own":
            continue
        own = K.OWN_KNOBS[k.name]
        loader = k.name in ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers",
                            "batch_size")
        if loader:
            applies = obs.get("dataloader")
        elif k.name == "channels_last":
            applies = obs.get("conv2d")
        else:
            applies = k.name in obs
        m = {}
        for v in k.values:
            if v == DEFAULT:
                continue
            if not applies or K.parse_value(own, v) == obs.get(k.name):
                m[v] = DEFAULT
        out[k.name] = m
    return out


def _canon(r: dict, canon) -> dict[str, str]:
    return {k: canon.get(k, {}).get(v, v) for k, v in r["raw_settings"].items()}


def effects(knobs, results: list[dict], canon, min_effect: float) -> list[dict]:
    """Each knob's effect on throughput: for each value, the median ratio against the
    baseline value over pairs of trials that differ in this knob only (else the medians of
    all trials with either value, marked unpaired)."""
    measured = [r for r in results if r["status"] in ("ok", "pruned") and r["samples_per_second"]]
    crashed = [r for r in results if r["status"] in ("failed", "oom", "timeout")]
    out = []
    for k in knobs:
        base_v = DEFAULT if k.kind == "own" else k.baseline
        values = []
        for v in k.values:
            cv = canon.get(k.name, {}).get(v, v)
            if cv == base_v:
                continue
            ratios = []
            for r in measured:
                cr = _canon(r, canon)
                if cr[k.name] != cv:
                    continue
                for q in measured:
                    cq = _canon(q, canon)
                    if cq[k.name] == base_v and all(cq[n] == cr[n] for n in cr if n != k.name):
                        ratios.append(r["samples_per_second"] / q["samples_per_second"])
            paired = bool(ratios)
            if not ratios:
                a = [r["samples_per_second"] for r in measured if _canon(r, canon)[k.name] == cv]
                b = [r["samples_per_second"] for r in measured
                     if _canon(r, canon)[k.name] == base_v]
                if a and b:
                    ratios = [statistics.median(a) / statistics.median(b)]
            n_crash = sum(1 for r in crashed if _canon(r, canon)[k.name] == cv)
            if any(v2 == v for v2 in [x["value"] for x in values]):
                continue
            values.append({"value": typed(v), "text": v,
                           "ratio": statistics.median(ratios) if ratios else None,
                           "pairs": len(ratios) if paired else 0, "crashed": n_crash})
        applies = bool(values) or k.kind != "own"
        measured_vals = [x for x in values if x["ratio"] is not None]
        if not values:
            verdict = "does not apply to this job" if k.kind == "own" else "not varied"
        elif not measured_vals:
            verdict = "not measured" + (" (every other value crashed)" if any(
                x["crashed"] for x in values) else "")
        elif all(abs(x["ratio"] - 1.0) < min_effect for x in measured_vals):
            verdict = f"no effect (every value within ±{min_effect * 100:.0f} % of the baseline's)"
        else:
            best = max(measured_vals, key=lambda x: x["ratio"])
            verdict = (f"best {k.name}={best['text']}: {_pct(best['ratio'])}" if best["ratio"] > 1
                       else "every other value is slower")
        out.append({"knob": k.name, "kind": k.kind, "changes_math": k.changes_math,
                    "baseline": None if k.kind == "own" else typed(k.baseline),
                    "applies": applies,
                    "no_effect": bool(measured_vals) and all(
                        abs(x["ratio"] - 1.0) < min_effect for x in measured_vals),
                    "verdict": verdict, "values": values})
    return out


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f} %"


def _bytes(n) -> str:
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def evidence(r: dict, base: dict | None) -> list[str]:
    """Why this trial is faster or slower than the baseline, from what both runs show."""
    out = []
    if r["status"] in ("failed", "oom", "no_steps", "timeout"):
        return [r["error"]] if r["error"] else []
    if base is None or r is base:
        if r.get("data_wait_share") is not None:
            out.append(f"data wait {r['data_wait_share'] * 100:.0f} % of the step "
                       f"({r['data_wait_per_step_s'] * 1e3:.3g} ms)")
        if r["findings"]:
            out.append("fired: " + ", ".join(r["findings"]))
        return out
    bw, tw = base.get("data_wait_share"), r.get("data_wait_share")
    bs, ts = base.get("data_wait_per_step_s"), r.get("data_wait_per_step_s")
    if bw is not None and tw is not None and (bw >= 0.1 or tw >= 0.1) and (
            abs(bw - tw) >= 0.05 or (bs and ts is not None and abs(ts / bs - 1) >= 0.2)):
        out.append(f"data wait {bw * 100:.0f} % -> {tw * 100:.0f} % of the step "
                   f"({bs * 1e3:.3g} -> {ts * 1e3:.3g} ms)")
    if r["status"] == "ok":  # a pruned trial ran too few steps for the rules' windows
        gone = sorted(set(base["findings"]) - set(r["findings"]))
        new = sorted(set(r["findings"]) - set(base["findings"]))
        if gone:
            out.append(", ".join(gone) + " no longer fires")
        if new:
            out.append(", ".join(new) + " fires")
    bc, tc = base.get("cpu_cores"), r.get("cpu_cores")
    if bc and tc and abs(tc / bc - 1) >= 0.2:
        out.append(f"CPU {bc:.1f} -> {tc:.1f} cores")
    bm, tm = base.get("peak_rss_bytes"), r.get("peak_rss_bytes")
    if bm and tm and abs(tm / bm - 1) >= 0.2:
        out.append(f"memory {_bytes(bm)} -> {_bytes(tm)}")
    if r["changes_math"] and r.get("loss"):
        bl = base.get("loss")
        txt = f"loss {r['loss']['first']:.4g} -> {r['loss']['last']:.4g}"
        if bl:
            txt += f" (baseline {bl['first']:.4g} -> {bl['last']:.4g})"
        out.append(txt)
    return out


def _shell_quote(a: str) -> str:
    import shlex

    return shlex.quote(a)


def command_line(r: dict, record: bool) -> str:
    """The trial's setting as a command line; own knobs need `trainprof record` to apply."""
    words = [*r["env"]]
    if record:
        words += ["trainprof", "record", "--"]
    words += [_shell_quote(a) for a in r["command"]]
    return " ".join(words)


def command_as_run(r: dict, knobs, canon) -> str:
    """The trial's command line as the job saw it: a value of trainprof's own knob that the
    baseline shows leaves the job as it is (canon: canonical_values) is left out, and
    `trainprof record` is needed only while one of its own knobs is left."""
    drop = {f"{k.env}={r['raw_settings'][k.name]}" for k in knobs
            if k.kind == "own" and canon.get(k.name, {}).get(r["raw_settings"][k.name]) == DEFAULT}
    env = [e for e in r["env"] if e not in drop]
    own_env = {k.env for k in knobs if k.kind == "own"}
    record = any(e.split("=", 1)[0] in own_env for e in env)
    return command_line(dict(r, env=env), record)


def summarize(spec, results: list[dict], price, *, elapsed_s: float, trials_s: float, ran: int,
              stop_reason: str, setup_s: float) -> dict:
    o = spec.options
    base = next((r for r in results if r.get("baseline") and r["status"] == "ok"), None)
    if base is None:
        base = next((r for r in results if r.get("baseline")), None)
    canon = canonical_values(spec.knobs, base if base and base["status"] == "ok" else None)
    base_ok = base is not None and base["status"] == "ok"
    for r in results:
        r["changed"] = changed_as_run(spec.knobs, r["raw_settings"], canon)
    for r in results:
        r["speedup"] = (r["samples_per_second"] / base["samples_per_second"]
                        if base_ok and r["samples_per_second"] else None)
        r["evidence"] = evidence(r, base if base_ok else None)
    ok = [r for r in results if r["status"] == "ok" and r.get("objective") is not None]
    best = max(ok, key=lambda r: r["objective"]) if ok else None
    notes = list(spec.notes)
    objective = o.objective
    if objective == "samples_per_usd" and price is None:
        objective = "samples_per_second"
        notes.append("no price for this machine (give --instance-type or --price-usd-per-hour): "
                     "ranked by throughput")
    if any(r["throughput_unit"] == "steps" and r["samples_per_second"] for r in results):
        notes.append("the batch size is unknown for some trials (no DataLoader seen): their "
                     "throughput is in steps/s (give --samples-per-step)")
    for r in results:
        if r["status"] in ("failed", "oom", "timeout") and len(r["changed"]) == 1:
            notes.append(f"{r['changed'][0]} failed ({r['status']}) in trial {r['trial']}: "
                         f"other settings with it were skipped")
    in_code = []
    if best is not None:
        for k in spec.knobs:
            v = best["raw_settings"][k.name]
            if k.kind == "own" and v != DEFAULT and canon.get(k.name, {}).get(v) != DEFAULT:
                in_code.append(K.OWN_KNOBS[k.name].in_code.format(
                    v=typed(v), dtype={"bf16": "bfloat16", "fp16": "float16"}.get(v, v)))
    ranked = sorted(results, key=_rank_key)
    # the setting with the fewest changes whose objective is within --min-effect of the best's
    simplest = None
    if best is not None and best["objective"] > 0:
        near = [r for r in ok if r["objective"] >= best["objective"] * (1 - o.min_effect)]
        simplest = min(near, key=lambda r: (len(r["changed"]), -r["objective"]))
        if simplest is best:
            simplest = None
    return {
        "baseline": base,
        "best": best,
        "trials": results,
        "ranked": [r["trial"] for r in ranked],
        "objective": objective,
        "price": price,
        "effects": effects(spec.knobs, results, canon, o.min_effect),
        "best_command": command_as_run(best, spec.knobs, canon) if best else None,
        "best_in_code": in_code,
        "simplest": None if simplest is None else {
            "trial": simplest["trial"], "changed": simplest["changed"],
            "command": command_as_run(simplest, spec.knobs, canon)},
        "command": spec.command,
        "knobs": [{"name": k.name, "kind": k.kind, "env": k.env, "values": k.values,
                   "changes_math": k.changes_math} for k in spec.knobs],
        "state": str(spec.state),
        "elapsed_s": elapsed_s,
        "trials_s": trials_s,
        "outside_trials_s": max(0.0, elapsed_s - trials_s),
        "outside_share": max(0.0, elapsed_s - trials_s) / elapsed_s if elapsed_s > 0 else None,
        "setup_s": setup_s,
        "trials_run_now": ran,
        "stop_reason": stop_reason,
        "epoch_samples": o.epoch_samples,
        "min_effect": o.min_effect,
        "notes": notes,
    }


_STATUS_ORDER = {"ok": 0, "pruned": 1, "stopped": 2, "interrupted": 2, "no_steps": 3,
                 "timeout": 4, "oom": 5, "failed": 6}


def _rank_key(r: dict):
    obj = r.get("objective")
    return (0 if r["status"] == "ok" else 1, -(obj if obj is not None else -math.inf),
            _STATUS_ORDER.get(r["status"], 9), r["trial"])


def _fmt(v, spec: str = ".1f", na: str = "-") -> str:
    return na if v is None else format(v, spec)


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in
                 enumerate(zip(row, widths))]
        out.append("  ".join(cells).rstrip())
    return out


def _what(r: dict, spec_knobs: list[dict]) -> str:
    txt = ", ".join(r["changed"]) or "(baseline)"
    if r["changes_math"]:
        txt += " [changes the training]"
    return txt


def render_text(s: dict) -> str:
    trials = {r["trial"]: r for r in s["trials"]}
    lines = []
    per = "samples/s" if not any(r["throughput_unit"] == "steps" for r in s["trials"]
                                 if r["samples_per_second"]) else "per s"
    head = ["#", "trial", "status", per, "vs base"]
    price = s["price"]
    epoch = bool(s["epoch_samples"])
    if price:
        head.append("samples/$")
    if epoch:
        head.append("$/epoch" if price else "epoch")
    head += ["what changed", "evidence"]
    rows = [head]
    rank = 0
    for n in s["ranked"]:
        r = trials[n]
        rank_txt = str(rank := rank + 1) if r["status"] == "ok" else "-"
        row = [rank_txt, str(n), r["status"], _fmt(r["samples_per_second"]),
               _fmt(r["speedup"], ".2f") + ("x" if r["speedup"] is not None else "")]
        if price:
            row.append(_fmt(r["samples_per_usd"], ".3g"))
        if epoch:
            if price:
                row.append(_fmt(r.get("usd_per_epoch"), ".4g"))
            else:
                row.append(_fmt(r.get("epoch_s"), ".0f") + ("s" if r.get("epoch_s") else ""))
        row += [_what(r, s["knobs"]), "; ".join(r["evidence"])]
        rows.append(row)
    right = {0, 1, 3, 4} | ({5} if price else set()) | ({5 + bool(price)} if epoch else set())
    n_ok = sum(1 for r in s["trials"] if r["status"] == "ok")
    lines.append(f"trainprof tune: {len(s['trials'])} trials ({n_ok} complete), "
                 f"{s['trials_run_now']} run now in {s['elapsed_s']:.0f} s "
                 f"({s['outside_trials_s']:.1f} s outside trials); stopped: {s['stop_reason']}")
    obj = {"samples_per_usd": "samples per dollar", "samples_per_second": "throughput",
           "step_time": "time per step"}[s["objective"]]
    lines.append(f"objective: {obj}" + (f" at ${price['usd_per_hour']:.4g}/h "
                                         f"({price['instance_type'] or price['source']})"
                                         if price else ""))
    for note in s["notes"]:
        lines.append(f"note: {note}")
    lines.append("")
    lines += _table(rows, right)
    lines.append("")
    lines.append("knob effects (throughput against the baseline value, other knobs equal):")
    for e in s["effects"]:
        vals = ", ".join(
            f"{x['text']}: " + (_pct(x["ratio"]) if x["ratio"] is not None else "n/a")
            + (f" ({x['crashed']} crashed)" if x["crashed"] else "")
            + ("" if x["pairs"] or x["ratio"] is None else " unpaired")
            for x in e["values"])
        flag = " [changes the training]" if e["changes_math"] else ""
        lines.append(f"  {e['knob']}{flag}: {e['verdict']}" + (f"  ({vals})" if vals else ""))
    lines.append("")
    best = s["best"]
    if best is not None:
        lines.append(f"best: trial {best['trial']} ({', '.join(best['changed']) or 'the baseline'})"
                     + (f", {best['speedup']:.2f}x the baseline" if best["speedup"] else ""))
        lines.append(f"  command: {s['best_command']}")
        for c in s["best_in_code"]:
            lines.append(f"  in code: {c}")
        lines.append(f"  report:  trainprof report {best['run']}")
        simple = s.get("simplest")
        if simple:
            lines.append(f"  within {s['min_effect'] * 100:.0f} % of it with fewer changes: trial "
                         f"{simple['trial']} ({', '.join(simple['changed']) or 'the baseline'}): "
                         f"{simple['command']}")
    if s.get("projections"):
        lines.append(f"projections of trial {s['projections'][0]['from_trial']} onto other "
                     f"instance types (not measured; ranked by samples per dollar):")
        for p in s["projections"]:
            lines.append(f"  {p['instance_type']:<16} {_fmt(p['samples_per_second']):>9} samples/s"
                         f" {_fmt(p['samples_per_usd'], '.3g'):>9} samples/$"
                         f"  ${_fmt(p['usd_per_hour'], '.3f')}/h  ({p['basis']})")
    lines.append(f"state: {s['state']} (results: tune.json, tune.html; trial runs: trials/NNN; "
                 f"re-run the same command to continue)")
    return "\n".join(lines) + "\n"


def write_outputs(state: Path, s: dict) -> None:
    tmp = state / "tune.json.tmp"
    tmp.write_text(json.dumps(s, indent=1) + "\n")
    os.replace(tmp, state / "tune.json")
    tmp = state / "tune.html.tmp"
    tmp.write_text(render_html(s))
    os.replace(tmp, state / "tune.html")


def render_html(s: dict) -> str:
    """One self-contained page: the ranked table with a link to each trial's report."""
    e = html.escape
    trials = {r["trial"]: r for r in s["trials"]}
    state = Path(s["state"]).resolve()
    rows = []
    for n in s["ranked"]:
        r = trials[n]
        run = Path(r["run"]).resolve()
        try:
            rel = os.path.relpath(run, state)
        except ValueError:
            rel = str(run)
        report = f'<a href="{e(rel)}/report.html">report</a>' if (run / "report.html").exists() \
            else e(rel)
        rows.append(
            f"<tr class='{e(r['status'])}'><td>{n}</td><td>{e(r['status'])}</td>"
            f"<td class=n>{e(_fmt(r['samples_per_second']))}</td>"
            f"<td class=n>{e(_fmt(r['speedup'], '.2f'))}</td>"
            f"<td class=n>{e(_fmt(r['samples_per_usd'], '.3g'))}</td>"
            f"<td>{e(_what(r, s['knobs']))}</td><td>{e('; '.join(r['evidence']))}</td>"
            f"<td>{report}</td></tr>")
    effects = "".join(f"<li><b>{e(x['knob'])}</b>: {e(x['verdict'])}</li>" for x in s["effects"])
    best = s["best"]
    best_html = (f"<p>Best: trial {best['trial']}; command: <code>{e(s['best_command'])}</code></p>"
                 if best else "<p>No trial completed.</p>")
    notes = "".join(f"<li>{e(n)}</li>" for n in s["notes"])
    proj = "".join(
        f"<tr><td>{e(p['instance_type'])}</td><td class=n>{e(_fmt(p['samples_per_second']))}</td>"
        f"<td class=n>{e(_fmt(p['samples_per_usd'], '.3g'))}</td>"
        f"<td class=n>{e(_fmt(p['usd_per_hour'], '.3f'))}</td><td>{e(p['basis'])}</td></tr>"
        for p in s.get("projections") or [])
    if proj:
        proj = ("<h2>Projections onto other instance types (not measured)</h2><table><thead><tr>"
                "<th>instance type</th><th>samples/s</th><th>samples/$</th><th>$/h</th>"
                "<th>basis</th></tr></thead><tbody>" + proj + "</tbody></table>")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>trainprof tune: {e(' '.join(s['command']))}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:left}}
td.n{{text-align:right}}tr.failed,tr.oom,tr.timeout{{color:#a00}}tr.pruned{{color:#777}}
code{{background:#f4f4f4;padding:.1em .3em}}</style></head><body>
<h1>trainprof tune</h1>
<p>Command: <code>{e(' '.join(s['command']))}</code>; objective: {e(s['objective'])};
{len(s['trials'])} trials, {s['elapsed_s']:.0f} s.</p>
<ul>{notes}</ul>
{best_html}
<table><thead><tr><th>trial</th><th>status</th><th>samples/s</th><th>vs baseline</th>
<th>samples/$</th><th>what changed</th><th>evidence</th><th>run</th></tr></thead>
<tbody>{''.join(rows)}</tbody></table>
{proj}
<h2>Knob effects</h2><ul>{effects}</ul>
</body></html>
"""


MAX_REPORTED_TRIALS = 1000


def report_state(state: Path, out: str | None = None) -> int:
    """`trainprof report STATE` on a tune state directory (src/cli/report_command.cc hands it
    over): writes each trial's report into its run (where it has none yet), so that the table's
    "report" links open, then the result table itself (tune.html, or `out`)."""
    path = state / "tune.json"
    try:
        if path.stat().st_size > 256 << 20:
            raise ValueError("larger than 256 MiB")
        s = json.loads(path.read_text())
        trials = s["trials"]
        if not isinstance(trials, list):
            raise ValueError("'trials' is not a list")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: {path}: not a tune result ({exc})", file=sys.stderr)
        return 1
    exe = os.environ.get("TRAINPROF_BIN") or "trainprof"
    written = 0
    for r in trials[:MAX_REPORTED_TRIALS]:
        run = Path(str(r.get("run", "")))
        if not run.is_absolute():  # as tune stored it, relative to where tune ran
            run = run if run.exists() else state / "trials" / run.name
        r["run"] = str(run)
        if not (run / "run.json").exists() or (run / "report.html").exists():
            continue
        proc = subprocess.run([exe, "report", "-q", str(run)], capture_output=True, text=True,
                              timeout=600)
        if proc.returncode != 0:
            print(f"warning: the report of trial {r.get('trial')} failed: "
                  f"{proc.stderr.strip()[-300:]}", file=sys.stderr)
        else:
            written += 1
    s["state"] = str(state)
    target = Path(out) if out else state / "tune.html"
    target.write_text(render_html(s))
    print(f"wrote {target} (the tune result table; {written} trial report(s) written)")
    return 0

