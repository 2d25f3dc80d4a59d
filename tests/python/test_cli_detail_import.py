"""`trainprof detail` and `trainprof import` from the command line: what a user sees when the
request cannot be served or the input is not what was named, and the import's counts against
the trace file read independently (Python's json)."""

from __future__ import annotations

import json
import subprocess
import sys

import trainprof
from conftest import smallest_kineto_trace, trainprof_command


def _run(*args, timeout=120):
    return subprocess.run([*trainprof_command(), *args], capture_output=True, text=True,
                          timeout=timeout)


def test_detail_refuses_what_it_cannot_serve(tmp_path):
    not_a_run = _run("detail", str(tmp_path), "--steps", "3")
    assert not_a_run.returncode != 0 and "not a run directory" in not_a_run.stderr

    run = tmp_path / "run"
    done = _run("record", "--out", str(run), "--no-gpu", "--", sys.executable, "-c", "pass")
    assert done.returncode == 0, done.stderr
    zero = _run("detail", str(run), "--steps", "0")
    assert zero.returncode != 0 and "--steps" in zero.stderr
    ended = _run("detail", str(run), "--steps", "2")
    assert ended.returncode != 0 and "has ended" in ended.stderr and "exit status 0" in ended.stderr
    assert not (run / "detail-request.json").exists()


def _kineto_trace():
    """The smallest real Kineto trace in the shared data with complete events."""
    return smallest_kineto_trace(
        lambda doc: any(e.get("ph") == "X" for e in doc.get("traceEvents", [])))


def test_import_kineto_counts_every_complete_event_of_a_real_trace(tmp_path):
    path, doc = _kineto_trace()
    run = tmp_path / "run"
    proc = _run("import", "kineto", str(path), "--out", str(run), timeout=300)
    assert proc.returncode == 0, proc.stderr
    complete = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    events = trainprof.open(str(run)).events().to_pandas()
    # every complete event of the file, by category, and nothing else of ph X
    want = {}
    for e in complete:
        want[str(e.get("cat", ""))] = want.get(str(e.get("cat", "")), 0) + 1
    got = events.groupby("category", observed=True).size().to_dict()
    for cat, n in want.items():
        assert got.get(cat, 0) == n, (cat, got.get(cat, 0), n, path.name)


def test_import_of_a_missing_or_wrong_input_says_so_and_leaves_nothing(tmp_path):
    missing = _run("import", "kineto", str(tmp_path / "nope.json"), "--out", str(tmp_path / "a"))
    assert missing.returncode != 0 and "nope.json" in missing.stderr
    assert not (tmp_path / "a").exists()
    text = tmp_path / "notes.json"
    text.write_text("this is not JSON\n")
    wrong = _run("import", "kineto", str(text), "--out", str(tmp_path / "b"))
    assert wrong.returncode != 0 and "notes.json" in wrong.stderr
    assert not (tmp_path / "b").exists()
