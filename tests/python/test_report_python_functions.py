"""The report's "Python functions" section (issue 16 item 5), checked against truths trainprof
did not compute:

- a small pure-Python job under `trainprof record --python-profile 2-4` whose call counts are
  planted exactly (and whose times are planted as time.sleep lower bounds): the report's top
  functions by own and cumulative time, calls, primitive calls, per-call times and callers;
- SageMaker Debugger's real cProfile dumps (../shared/data/smdebug) imported: every function
  the report shows, and which ones, equal Python's own pstats reading the same files (the top
  20 by own time and by cumulative time over *all* the dump's functions, though only the 500
  with the most cumulative time are stored).
"""

from __future__ import annotations

import json
import pstats
import shutil
import subprocess
import sys
import textwrap
from decimal import Decimal
from pathlib import Path

from conftest import SHARED_DATA, trainprof_command

TOP = 20  # report_python.h kPythonTopFunctions
MAX_CALLERS = 10  # stored caller edges per function
MS = 1_000_000

# Per training step: load -> nap(3 ms) once, compute -> nap(5 ms) three times, fib(10) (177
# calls, one of them primitive). Steps 2..4 are profiled: three steps.
JOB = textwrap.dedent("""
    import time
    import trainprof

    def nap(ms):
        time.sleep(ms / 1000)

    def load():
        nap(3)

    def compute():
        for _ in range(3):
            nap(5)

    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    def train_step():
        load()
        compute()
        fib(10)

    for _ in range(7):
        with trainprof.step():
            train_step()
""")
STEPS = 3


def _record(tmp_path: Path) -> dict:
    script = tmp_path / "job.py"
    script.write_text(JOB)
    run = tmp_path / "run"
    proc = subprocess.run(
        trainprof_command() + ["record", "--out", str(run), "--interval", "500ms", "--no-gpu",
                               "--python-profile", "2-4", "--", sys.executable, str(script)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "again.json"
    subprocess.run(trainprof_command() + ["report", str(run), "--out", str(tmp_path / "r.html"),
                                          "--json", str(out)], check=True, capture_output=True)
    return json.loads(out.read_text())


def _row(rows: list[dict], function: str) -> dict:
    (row,) = [r for r in rows if r["function"] == function]
    return row


def test_recorded_python_profile_against_the_planted_job(tmp_path):
    report = _record(tmp_path)
    py = report["python"]
    assert py["profile_count"] == 1 and py["note"] == ""
    (prof,) = py["profiles"]
    assert prof["steps"] == "2-4"
    by_total, by_cum = prof["by_total"], prof["by_cumulative"]
    for rows, key in ((by_total, "total_ns"), (by_cum, "cumulative_ns")):
        assert len(rows) == min(TOP, prof["functions"])
        assert [r[key] for r in rows] == sorted((r[key] for r in rows), reverse=True)

    # Own time: the sleeps are the builtin's own time (12 of them, 18 ms a step at least).
    sleep = by_total[0]
    assert sleep["function"] == "<built-in method time.sleep>", by_total[:3]
    assert sleep["calls"] == 4 * STEPS and sleep["primitive_calls"] == 4 * STEPS
    assert sleep["total_ns"] >= 18 * MS * STEPS
    assert sleep["total_per_call_ns"] == sleep["total_ns"] / sleep["calls"]
    (sleep_caller,) = sleep["callers"]
    assert sleep_caller["function"] == "nap" and sleep_caller["calls"] == 4 * STEPS

    # Cumulative time and callers, with exact counts.
    step = _row(by_cum, "train_step")
    assert step["calls"] == STEPS and step["cumulative_ns"] >= 18 * MS * STEPS
    # Called from the module's frame, entered before profiling began: cProfile knows no caller.
    assert step["callers"] == [] and step["caller_count"] == 0
    compute, load, nap = (_row(by_cum, f) for f in ("compute", "load", "nap"))
    assert compute["calls"] == load["calls"] == STEPS and nap["calls"] == 4 * STEPS
    assert compute["cumulative_ns"] >= 15 * MS * STEPS and load["cumulative_ns"] >= 3 * MS * STEPS
    assert step["cumulative_ns"] >= compute["cumulative_ns"] + load["cumulative_ns"]
    assert compute["cumulative_per_call_ns"] == compute["cumulative_ns"] / STEPS
    # nap's callers, the most cumulative time first: compute (9 calls, 45 ms), load (3, 9 ms).
    assert [(c["function"], c["calls"]) for c in nap["callers"]] == [("compute", 9), ("load", 3)]
    assert nap["callers"][0]["cumulative_ns"] >= 15 * MS * STEPS
    assert nap["caller_count"] == 2
    assert (nap["callers"][0]["cumulative_ns"] + nap["callers"][1]["cumulative_ns"]
            == nap["cumulative_ns"])

    # Recursion: fib(10) is 177 calls, one primitive, per step.
    fib = next(r for r in by_total + by_cum if r["function"] == "fib")
    assert (fib["calls"], fib["primitive_calls"]) == (177 * STEPS, STEPS)
    assert fib["cumulative_per_call_ns"] == fib["cumulative_ns"] / STEPS
    assert {c["function"]: c["calls"] for c in fib["callers"]} == {"train_step": STEPS,
                                                                   "fib": 176 * STEPS}
    html = (tmp_path / "r.html").read_text()
    assert '<section id="python"><h2>Python functions</h2>' in html
    assert f"<td>{177 * STEPS}/{STEPS}</td>" in html


def test_no_profile_says_how_to_get_one(tmp_path):
    """A job recorded without --python-profile: the section says how to record one."""
    script = tmp_path / "job.py"
    script.write_text("import trainprof\nfor _ in range(3):\n    with trainprof.step():\n"
                      "        pass\n")
    run = tmp_path / "run"
    subprocess.run(trainprof_command() + ["record", "--out", str(run), "--no-gpu", "--",
                                          sys.executable, str(script)],
                   check=True, capture_output=True, timeout=120)
    report = json.loads((run / "report.json").read_text())
    assert report["python"]["profiles"] == []
    assert "--python-profile 10-20" in report["python"]["note"]
    html = (run / "report.html").read_text()
    assert "trainprof record --python-profile 10-20" in html
    assert "Top functions by own time" not in html


CPROFILE = (SHARED_DATA / "smdebug" / "tests" / "profiler" / "resources" /
            "tfprofiler_timeline_traces" / "framework" / "tensorflow" / "cProfile")


def _pstats_row(key, value) -> dict:
    (file, line, func), (cc, nc, tt, ct, callers) = key, value
    # An edge is (calls, primitive calls, own s, cumulative s), as pstats.print_callers reads it.
    edges = [{"function": f, "file": fl, "line": ln, "calls": e[0], "primitive_calls": e[1],
              "total_ns": int(e[2] * 1e9), "cumulative_ns": int(e[3] * 1e9)}
             for (fl, ln, f), e in callers.items()]
    edges.sort(key=lambda e: (-e["cumulative_ns"], -e["calls"], e["file"], e["line"],
                              e["function"]))
    return {"function": func, "file": file, "line": line, "calls": nc, "primitive_calls": cc,
            "total_ns": int(tt * 1e9), "cumulative_ns": int(ct * 1e9),
            "total_per_call_ns": int(tt * 1e9) / nc if nc else None,
            "cumulative_per_call_ns": int(ct * 1e9) / cc if cc else None,
            "caller_count": len(callers), "callers": edges[:MAX_CALLERS]}


def test_sagemaker_cprofile_dumps_in_the_report_match_pstats(tmp_path):
    dumps = sorted(CPROFILE.glob("*/python_stats"))
    assert len(dumps) == 3
    src = tmp_path / "job" / "framework" / "tensorflow" / "cProfile"
    for d in dumps:  # only the cProfile dumps: a quick import
        (src / d.parent.name).mkdir(parents=True)
        shutil.copy(d, src / d.parent.name / "python_stats")
    run = tmp_path / "run"
    subprocess.run(trainprof_command() + ["import", "smdebug", str(tmp_path / "job"), "--out",
                                          str(run)], check=True, capture_output=True, timeout=120)
    out = tmp_path / "report.json"
    subprocess.run(trainprof_command() + ["report", str(run), "--out", str(tmp_path / "r.html"),
                                          "--json", str(out)], check=True, capture_output=True)
    py = json.loads(out.read_text())["python"]
    assert py["profile_count"] == 3 and len(py["profiles"]) == 3
    by_end = {p["end_ns"]: p for p in py["profiles"]}
    for d in dumps:
        start_us, end_us, node_id, step = d.parent.name.split("_")
        prof = by_end[int(Decimal(end_us) * 1000)]
        assert prof["node"] == "algo-1" and prof["pid"] == 151
        assert prof["steps"] == (f"{step}-{step}" if int(step) >= 0 else None)
        stats = pstats.Stats(str(d)).stats
        assert prof["functions"] == min(500, len(stats))
        want = {k: _pstats_row(k, v) for k, v in stats.items()}
        for rows, key in ((prof["by_total"], "total_ns"), (prof["by_cumulative"], "cumulative_ns")):
            # Which functions: the top 20 of all the dump's functions (ties may come in either
            # order, so the values are compared in order and each row against its own entry).
            top = sorted((w[key] for w in want.values()), reverse=True)[:TOP]
            assert [r[key] for r in rows] == top, d
            for r in rows:
                assert r == want[(r["file"], r["line"], r["function"])], (d, r["function"])
    html = (tmp_path / "r.html").read_text()
    assert html.count('<div class="pyprofile">') == 3
    assert "Steps 2-2 · node algo-1 · pid 151" in html and "Time window · node algo-1" in html
