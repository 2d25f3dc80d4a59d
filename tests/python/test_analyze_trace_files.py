"""`trainprof analyze TRACE... [--diff TRACE]`: Kineto trace files analysed in one command.

The files are imported into a scratch run (mkdtemp under $TMPDIR) that the command removes. What
it prints must be what `import kineto` + `analyze RUN` print for the same files (the oracle here
is the two-step path, itself checked against HTA in test_hta_differential.py); bad input gets an
error naming it and leaves nothing behind.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import SHARED_DATA, trainprof_command  # noqa: E402

HTA = SHARED_DATA / "traces/HolisticTraceAnalysis/tests/data"
BASE = HTA / "trace_compare/base/base.json.gz"
TEST = HTA / "trace_compare/test/test.json.gz"
RANKS = [HTA / "trace_filter/sampled_rank-0.json.gz", HTA / "trace_filter/sampled_rank-1.json.gz"]


def run(args, tmpdir, check=True):
    return subprocess.run(trainprof_command() + args, capture_output=True, text=True, check=check,
                          env={**os.environ, "TMPDIR": str(tmpdir)})


def imported(files, out):
    subprocess.run(trainprof_command() + ["import", "kineto", *map(str, files), "--out", str(out)],
                   check=True, capture_output=True, text=True)
    return str(out)


def test_text_json_and_diff_equal_the_imported_runs(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    base_run = imported([BASE], tmp_path / "base")
    test_run = imported([TEST], tmp_path / "test")
    ranks_run = imported(RANKS, tmp_path / "ranks")
    cases = [
        (["analyze", str(TEST)], ["analyze", test_run]),
        (["analyze", str(TEST), "--json", "--top", "3"], ["analyze", test_run, "--json", "--top", "3"]),
        (["analyze", *map(str, RANKS), "--json"], ["analyze", ranks_run, "--json"]),
        (["analyze", str(TEST), "--diff", str(BASE), "--json"],
         ["analyze", test_run, "--diff", base_run, "--json"]),
        (["analyze", str(TEST), "--diff", base_run], ["analyze", test_run, "--diff", base_run]),
    ]
    for one, two in cases:
        a = run(one, scratch).stdout
        b = run(two, scratch).stdout
        assert a == b, f"{one} differs from {two}"
        assert a.strip(), one  # not vacuous: both printed an analysis
    assert "rank" in run(["analyze", str(TEST)], scratch).stdout
    assert list(scratch.iterdir()) == []


def test_bad_input_is_named_and_leaves_nothing(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    missing = tmp_path / "no_such_trace.json"
    r = run(["analyze", str(missing)], scratch, check=False)
    assert r.returncode != 0 and "no_such_trace.json" in r.stderr and "no such" in r.stderr

    two_runs = [imported([BASE], tmp_path / "a"), imported([TEST], tmp_path / "b")]
    r = run(["analyze", *two_runs], scratch, check=False)
    assert r.returncode != 0 and "is a directory" in r.stderr

    # A truncated gzip trace: the import's error names the file; the scratch run is removed.
    whole = BASE.read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    r = run(["analyze", str(cut), "--json"], scratch, check=False)
    assert r.returncode != 0 and "cut.json.gz" in r.stderr, r.stderr
    assert list(scratch.iterdir()) == []

    # Not JSON at all.
    junk = tmp_path / "junk.json"
    junk.write_bytes(gzip.compress(b"\x00" * 64))
    r = run(["analyze", str(junk)], scratch, check=False)
    assert r.returncode != 0 and "junk.json" in r.stderr, r.stderr
    assert list(scratch.iterdir()) == []


def test_without_tmpdir_a_small_trace_goes_through_memory_and_is_removed(tmp_path):
    """Without $TMPDIR the scratch run of a small trace is made in /dev/shm (a tmpfs), else in
    /tmp; either way it is gone when the command ends."""
    env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
    parents = [Path(p) for p in ("/dev/shm", "/tmp") if Path(p).is_dir()]

    def scratch_dirs():
        return {d for p in parents for d in p.glob("trainprof-analyze-*")}

    before = scratch_dirs()
    out = subprocess.run(trainprof_command() + ["analyze", str(TEST), "--json"], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out == run(["analyze", imported([TEST], tmp_path / "t"), "--json"], tmp_path).stdout
    assert scratch_dirs() - before == set()


def test_messages_name_the_files_given_not_the_scratch_run(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    # Text mode: the diff's header names the baseline as given.
    out = run(["analyze", str(TEST), "--diff", str(BASE)], scratch).stdout
    assert f"diff vs {BASE}" in out and "trainprof-analyze" not in out
    # A trace without spans: the error names the file.
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"traceEvents": []}))
    r = run(["analyze", str(empty)], scratch, check=False)
    assert r.returncode != 0 and str(empty) in r.stderr and "trainprof-analyze" not in r.stderr
    # The data's problems, as `import kineto` counts them, go to stderr.
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1000, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "no_ts", "pid": 1, "tid": 1, "dur": 5}]}))
    r = run(["analyze", str(bad), "--json"], scratch)
    assert f"warning: {bad}: 1 " in r.stderr, r.stderr
    # --scaling compares runs; trace files are refused with the reason.
    r = run(["analyze", str(TEST), "--scaling", str(BASE)], scratch, check=False)
    assert r.returncode != 0 and "--scaling compares run directories" in r.stderr
    assert list(scratch.iterdir()) == []


def test_out_of_range_options_are_refused_by_name(tmp_path):
    # A threshold of 1e308 us overflowed to 0 ns in silence (every gap became "other"); NaN and
    # negative values were taken; --top -3 too. Each is refused, naming the option.
    for args in (["--kernel-wait-threshold-us", "1e308"], ["--kernel-wait-threshold-us", "inf"],
                 ["--kernel-wait-threshold-us", "nan"], ["--kernel-wait-threshold-us=-5"],
                 ["--top", "-3"], ["--top", "0"]):
        proc = run(["analyze", str(BASE), "--json", *args], tmp_path, check=False)
        assert proc.returncode != 0, args
        assert args[0].split("=")[0] in proc.stderr, proc.stderr
        assert proc.stdout == ""
    # A day is the largest threshold: every gap shorter than that is kernel_wait, as with the
    # largest threshold HTA's own arithmetic would take.
    day = json.loads(run(["analyze", str(BASE), "--json", "--kernel-wait-threshold-us",
                          "86400000000"], tmp_path).stdout)
    for rank in day["ranks"]:
        assert not [e for e in rank["idle"] if e["category"] == "other" and e["time_us"] > 0], rank
