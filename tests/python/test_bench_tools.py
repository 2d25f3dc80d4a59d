"""The benchmark tools (bench/lib/results.py, bench/compare.py, bench/run_all.sh's summary path)
on small generated inputs whose medians, spreads and ratios are known by construction. No real
benchmark runs here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "lib" / "results.py"
COMPARE = ROOT / "bench" / "compare.py"
sys.path.insert(0, str(ROOT / "bench" / "lib"))
import results as R  # noqa: E402


def run(args, env=None, **kw):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=60, **kw)


def cli(records: Path, *args):
    p = run([RESULTS, "--file", records, *args])
    assert p.returncode == 0, p.stderr
    return p


def test_targets_table_is_valid_and_quoted_by_the_docs():
    targets = R.load_targets()
    assert "import.synthetic_events_per_s" in targets
    row = targets["import.synthetic_events_per_s"]
    assert (row["target"], row["op"], row["on"], row["source"]) == (2000000, ">=", "value",
                                                                   "issue 5")
    # docs/benchmarks.md quotes the table as `results.py targets-md` prints it
    table = run([RESULTS, "targets-md"]).stdout
    assert table.count("\n") == len(targets) + 2
    assert table in (ROOT / "docs" / "benchmarks.md").read_text()


def test_bad_targets_rows_are_named(tmp_path):
    bad = tmp_path / "t.toml"
    bad.write_text('[figure."x.y"]\nsection = "s"\nunit = "s"\nbetter = "up"\nwhat = "w"\n')
    with pytest.raises(R.BenchError, match=r"figure 'x.y': better must be"):
        R.load_targets(bad)
    bad.write_text('[figure."x.y"]\nsection = "s"\nunit = "s"\nbetter = "lower"\nwhat = "w"\n'
                   'target = 1\nop = ">="\non = "ratio"\nsource = "issue 1"\n')
    with pytest.raises(R.BenchError, match="a target on the ratio needs a peer"):
        R.load_targets(bad)


def test_results_cli_merges_repeats_peers_and_checks_targets(tmp_path):
    rec = tmp_path / "results.jsonl"
    # two records of one figure add up their repeats: 29, 35, 31, 33 -> median 32
    cli(rec, "add", "--name", "store.read_cpp", "--repeats", "29,35")
    cli(rec, "add", "--name", "store.read_cpp", "--repeats", "31,33")
    # lower is better: ratio = peer / value = 100 / 2.5 = 40; the target <= 2 is NOT met
    cli(rec, "add", "--name", "store.bytes_per_value", "--value", "2.5")
    cli(rec, "peer", "--figure", "store.bytes_per_value", "--value", "100", "--detail", "JSON")
    # a target on the ratio: psutil 30 us vs 6 us -> 5x >= 3: met; spread (8 - 4) / 6
    cli(rec, "add", "--name", "collect.node_us", "--repeats", "4,6,8")
    cli(rec, "peer", "--figure", "collect.node_us", "--repeats", "30,27,33")
    # a ratio target whose peer did not install: not checked, with the reason
    cli(rec, "add", "--name", "collect.tree20_us", "--value", "10")
    cli(rec, "peer", "--figure", "collect.tree20_us", "--skipped", "psutil not installed")
    cli(rec, "skip", "--figure", "report.24h_open_s", "--reason", "chromium not installed")
    cli(rec, "section", "--name", "store", "--status", "ok", "--seconds", "12")
    cli(rec, "section", "--name", "import", "--status", "failed", "--reason", "exit 3: boom")
    cli(rec, "section", "--name", "report", "--status", "ok")
    p = cli(rec, "finish")
    data = json.loads((tmp_path / "results.json").read_text())
    figs = {f["name"]: f for f in data["figures"]}
    assert list(figs) == list(R.load_targets())  # every row of the table, in its order

    f = figs["store.read_cpp"]
    assert f["repeats"] == [29, 35, 31, 33]
    assert (f["value"], f["median"], f["min"], f["max"]) == (32, 32, 29, 35)
    assert f["spread"] == pytest.approx(6 / 32)
    assert (f["target"], f["met"], f["status"]) == (30, True, "met")

    f = figs["store.bytes_per_value"]
    assert (f["value"], f["peer_value"], f["ratio"]) == (2.5, 100, 40)
    assert (f["met"], f["status"], f["spread"], f["peer_detail"]) == (False, "NOT met", None,
                                                                      "JSON")
    f = figs["collect.node_us"]
    assert (f["value"], f["peer_value"], f["ratio"], f["met"]) == (6, 30, 5, True)
    assert f["spread"] == pytest.approx(4 / 6)
    assert f["peer_spread"] == pytest.approx(6 / 30)
    f = figs["collect.tree20_us"]
    assert (f["met"], f["status"], f["ratio"]) == (None, "not checked", None)
    assert f["reason"] == "peer skipped: psutil not installed"
    f = figs["import.real_events_per_s"]
    assert (f["status"], f["reason"]) == ("failed", "section import failed: exit 3: boom")
    assert figs["report.24h_open_s"]["status"] == "skipped"
    assert figs["report.24h_s"]["reason"] == "the section reported no value"
    assert figs["rules.1x30_s"]["reason"] == "section rules did not run"
    n_targets = sum(1 for r in R.load_targets().values() if "target" in r)
    assert data["counts"] == {"targets": n_targets, "met": 2, "not_met": 1,
                              "not_measured": n_targets - 3, "failed_sections": ["import"]}

    lines = p.stdout.splitlines()
    row = next(ln for ln in lines if ln.startswith("store.bytes_per_value "))
    assert row.split() == ["store.bytes_per_value", "2.5", "bytes/value", "-", "1", "100",
                           "40.00x", "<=", "2", "NOT", "met"]
    row = next(ln for ln in lines if ln.startswith("collect.node_us "))
    assert row.split()[:9] == ["collect.node_us", "6", "us/sample", "66.7", "%", "3", "30",
                               "5.00x", "ratio"]
    assert row.split()[-1] == "met"
    row = next(ln for ln in lines if ln.startswith("import.synthetic_events_per_s "))
    assert row.endswith("failed (section import failed: exit 3: boom)")
    assert f"targets: {n_targets}: 2 met, 1 NOT met, {n_targets - 3} not measured" in lines
    assert "FAILED sections: import" in lines


def test_results_refuses_bad_input(tmp_path):
    rec = tmp_path / "r.jsonl"
    p = run([RESULTS, "--file", rec, "add", "--name", "store.no_such_figure", "--value", "1"])
    assert p.returncode == 2 and "'store.no_such_figure' is not in bench/targets.toml" in p.stderr
    p = run([RESULTS, "--file", rec, "add", "--name", "store.read_cpp", "--repeats", "1,x"])
    assert p.returncode == 2 and "not a comma-separated list of numbers" in p.stderr
    p = run([RESULTS, "--file", rec, "add", "--name", "store.read_cpp", "--value", "nan"])
    assert p.returncode == 2 and "not a finite number" in p.stderr
    rec.write_text('{"kind": "figure", "name": "store.read_cpp", "repeats": [1]}\n{oops\n')
    p = run([RESULTS, "--file", rec, "finish"])
    assert p.returncode == 2 and f"{rec}:2: not JSON" in p.stderr
    # without BENCH_RESULTS the Python API does nothing (a bench run by hand only prints)
    env = {k: v for k, v in os.environ.items() if k != "BENCH_RESULTS"}
    p = run(["-c", f"import sys; sys.path.insert(0, {str(RESULTS.parent)!r}); import results; "
             "results.add('store.read_cpp', [1.0]); print(results.results_file())"], env=env)
    assert p.returncode == 0 and p.stdout.strip() == "None"


def results_file(path: Path, figures: list[dict], gzip_mbs: list[float]) -> Path:
    """A results.json as results.py writes it, from (name, repeats) pairs."""
    rec = path.with_suffix(".jsonl")
    rec.write_text("".join(json.dumps({"kind": "figure", "name": n, "repeats": r}) + "\n"
                           for n, r in [("reference.gzip_dc", gzip_mbs), *figures]))
    cli(rec, "finish", "--out", path)
    return path


def test_compare_two_results_files(tmp_path):
    old = results_file(tmp_path / "old.json", [
        ("import.synthetic_events_per_s", [1.0e6, 1.1e6, 1.2e6]),  # higher is better
        ("instrument.cpp_span_ns", [60, 62, 64]),                 # lower is better
        ("store.bytes_per_value", [1.5]),                         # one repeat
        ("report.30m_s", [0.30, 0.40, 0.50]),
        ("rules.1x30_s", [0.10, 0.11, 0.12]),
    ], [200, 210, 220])
    new = results_file(tmp_path / "new.json", [
        ("import.synthetic_events_per_s", [2.0e6, 2.2e6, 2.4e6]),  # 2x, no overlap: faster
        ("instrument.cpp_span_ns", [70, 72, 74]),                  # 72/62, no overlap: slower
        ("store.bytes_per_value", [1.2]),                          # better, noise unknown
        ("report.30m_s", [0.35, 0.45, 0.55]),                      # overlaps: within noise
    ], [100, 105, 110])
    p = run([COMPARE, old, new, "--json"])
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)}
    r = rows["import.synthetic_events_per_s"]
    assert (r["old"], r["new"], r["ratio"], r["verdict"]) == (1.1e6, 2.2e6, 2.0, "faster")
    assert r["per_ref"] == 4.0  # 2x while the machine's gzip -dc got 0.5x
    assert r["old_spread"] == pytest.approx(0.2e6 / 1.1e6)
    r = rows["instrument.cpp_span_ns"]
    assert (r["ratio"], r["verdict"], r["per_ref"]) == (pytest.approx(72 / 62), "slower", None)
    r = rows["store.bytes_per_value"]
    assert (r["ratio"], r["verdict"]) == (pytest.approx(0.8), "better? (noise unknown: 1 repeat)")
    assert rows["report.30m_s"]["verdict"] == "within noise"
    assert rows["reference.gzip_dc"]["ratio"] == 0.5
    assert rows["rules.1x30_s"]["verdict"] == "not measured in NEW (missing)"
    assert rows["collect.node_us"]["verdict"] == "not measured in OLD (missing) and NEW (missing)"

    text = run([COMPARE, old, new]).stdout.splitlines()
    assert ("reference gzip_dc: NEW/OLD = 0.50x (the machines' own speed; throughputs scale "
            "with it)") in text
    row = next(ln for ln in text if ln.startswith("import.synthetic_events_per_s "))
    assert row.split() == ["import.synthetic_events_per_s", "events/s", "1,100,000", "18.2", "%",
                           "2,200,000", "18.2", "%", "2.000x", "4.000x", "faster"]
    n_rows = len(json.loads(p.stdout))
    assert (f"3 beyond the noise (1 faster, 2 slower, 0 better, 0 worse), 1 within noise, "
            f"1 noise unknown, {n_rows - 5} not measured in both") in text
    row = next(ln for ln in text if ln.startswith("instrument.cpp_span_ns "))
    assert row.split() == ["instrument.cpp_span_ns", "ns/span", "62", "6.5", "%", "72", "5.6",
                           "%", "1.161x", "-", "slower"]


def test_compare_refuses_what_is_not_a_results_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"figures": 3}')
    p = run([COMPARE, bad, bad])
    assert p.returncode == 2 and "not a results file of bench/run_all.sh" in p.stderr


def test_run_all_summary_reports_a_failed_section_and_the_log_is_whole(tmp_path):
    sections = tmp_path / "sections"
    sections.mkdir()
    (sections / "import.sh").write_text(
        "echo importing\necho 'boom: trace missing' >&2\nexit 3\n")
    (sections / "store.sh").write_text(
        "set -e\necho storing to $1\n"
        "python3 bench/lib/results.py add --name store.read_cpp --repeats 31,29,35\n"
        "python3 bench/lib/results.py add --name store.bytes_per_value --value 2.5\n"
        "echo 'store: to stderr' >&2\n")
    out = tmp_path / "out"
    env = dict(os.environ, BENCH_SKIP_SETUP="1", BENCH_SKIP_BUILD="1", BENCH_REFERENCE="0",
               BENCH_SECTIONS_DIR=str(sections), BENCH_OUT=str(out), BENCH_QUICK="1")
    log = tmp_path / "bench.log"
    # as a user runs it: `bash bench/run_all.sh > log 2>&1`
    with open(log, "w") as f:
        p = subprocess.run(["bash", str(ROOT / "bench" / "run_all.sh")], stdout=f,
                           stderr=subprocess.STDOUT, env=env, timeout=120)
    assert p.returncode == 1  # a section failed
    text = log.read_text()
    for expected in ("trainprof benchmarks:", "QUICK mode", "== import", "importing",
                     "boom: trace missing", "section import FAILED (exit 3)", "== store",
                     f"storing to {out}", "store: to stderr", "== summary (quick mode)",
                     "FAILED sections: import", f"results: {out}/results.json"):
        assert expected in text, expected
    assert text.index("== import") < text.index("== store") < text.index("== summary")
    data = json.loads((out / "results.json").read_text())
    assert data["mode"] == "quick"
    assert data["sections"]["import"]["status"] == "failed"
    assert data["sections"]["import"]["reason"] == "exit 3: boom: trace missing"
    assert data["sections"]["store"]["status"] == "ok"
    assert data["machine"]["cores"] == os.cpu_count()
    assert len(data["machine"]["load_before"]["loadavg"]) == 3
    assert len(data["machine"]["load_after"]["loadavg"]) == 3
    figs = {f["name"]: f for f in data["figures"]}
    assert (figs["store.read_cpp"]["value"], figs["store.read_cpp"]["status"]) == (31, "met")
    assert figs["store.bytes_per_value"]["status"] == "NOT met"
    assert figs["import.synthetic_events_per_s"]["status"] == "failed"
    summary = text[text.index("== summary"):]
    assert "import.real_events_per_s" in summary
    assert "failed (section import failed: exit 3: boom: trace missing)" in summary
    assert "machine: " in summary and "load average (1/5/15 min): before" in summary


def test_run_all_skips_the_sdist_section_in_quick_mode_and_takes_commas(tmp_path):
    # The real sections directory, only sdist selected (commas, an unknown name ignored): in
    # quick mode it records its figures as skipped (quick mode) and exits 77 = skipped.
    out = tmp_path / "out"
    env = dict(os.environ, BENCH_SKIP_SETUP="1", BENCH_SKIP_BUILD="1", BENCH_REFERENCE="0",
               BENCH_OUT=str(out), BENCH_QUICK="1", BENCH_SECTIONS="nonesuch,sdist")
    env.pop("BENCH_SECTIONS_DIR", None)
    p = subprocess.run(["bash", str(ROOT / "bench" / "run_all.sh")], capture_output=True,
                       text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr  # a skipped section is not a failure
    assert "section sdist skipped" in p.stdout
    data = json.loads((out / "results.json").read_text())
    assert data["sections"]["sdist"]["status"] == "skipped"
    assert "quick mode" in data["sections"]["sdist"]["reason"]
    assert data["sections"]["hta"] == {"status": "skipped", "reason": "not in BENCH_SECTIONS"}
    figs = {f["name"]: f for f in data["figures"]}
    for name in ("sdist.sdist_s", "sdist.wheel_s", "sdist.build_s"):
        assert (figs[name]["status"], figs[name]["reason"]) == ("skipped", "quick mode")
    summary = p.stdout[p.stdout.index("== summary"):]
    row = next(line for line in summary.splitlines() if line.startswith("sdist.build_s"))
    assert row.endswith("skipped (quick mode)") and " <= 480 " in row


def test_hta_ratio_reports_sums_of_repeats_and_hta_as_the_peer(tmp_path, monkeypatch):
    # Two trace sets, two trainprof repeats and one HTA repeat each; the sums and ratios are
    # known: trainprof passes 0.1 + 0.3 = 0.4 and 0.2 + 0.4 = 0.6 (median 0.5); HTA 1.5 + 2.5
    # = 4.0 -> ratio 4.0 / 0.5 = 8x; per trace the best ratios 1.5 / 0.1 = 15x, 2.5 / 0.3 = 8.3x.
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import hta_ratio

    rec = tmp_path / "results.jsonl"
    monkeypatch.setenv("BENCH_RESULTS", str(rec))
    rows = [{"trace": "a", "ratio": 15.0, "met": True, "figures_match": True},
            {"trace": "b", "ratio": 2.5 / 0.3, "met": False, "figures_match": False}]
    hta_ratio.report(rows, [[0.1, 0.2], [0.3, 0.4]], [[1.5], [2.5]], 2, 1, "HTA 0.5.0")
    cli(rec, "finish")
    figs = {f["name"]: f for f in json.loads((tmp_path / "results.json").read_text())["figures"]}
    f = figs["hta.all_traces_s"]
    assert f["repeats"] == pytest.approx([0.4, 0.6])
    assert (f["peer_repeats"], f["peer_detail"]) == ([4.0], "HTA 0.5.0")
    assert f["ratio"] == pytest.approx(8.0)
    assert f["status"] == "NOT met"  # ratio >= 10
    assert figs["hta.worst_trace_ratio"]["value"] == pytest.approx(2.5 / 0.3)
    assert figs["hta.traces_met_pct"]["value"] == 50
    assert (figs["hta.figures_match_pct"]["value"], figs["hta.figures_match_pct"]["status"]) \
        == (50, "NOT met")

    # a trace trainprof failed on: no timing figure hides it
    rec.unlink()
    rows.append({"trace": "c", "met": False, "figures_match": False, "error": "exit 1"})
    hta_ratio.report(rows, [[0.1, 0.2], [0.3, 0.4]], [[1.5], [2.5]], 2, 1, "HTA 0.5.0")
    cli(rec, "finish")
    figs = {f["name"]: f for f in json.loads((tmp_path / "results.json").read_text())["figures"]}
    assert figs["hta.all_traces_s"]["status"] == "skipped"
    assert figs["hta.all_traces_s"]["reason"] == "trainprof failed on 1 of 3 trace sets"
    assert figs["hta.figures_match_pct"]["value"] == pytest.approx(100 / 3)
