"""Scaling efficiency in the report (issue 19: "a scaling-efficiency figure across runs of
different world sizes, shown in the report and by `analyze`").

Three runs of one job, generated through the store writer with known step times: 1 device at
100 ms a step, 2 at 110 ms, 4 at 125 ms. The expected figures are computed here from the
generated timestamps (numpy), then compared with report.json, with the table of report.html
(parsed), and with `analyze --scaling`."""

from __future__ import annotations

import json
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

import trainprof
from conftest import trainprof_command

T0 = 1_764_576_000_000_000_000
MS = 1_000_000
STEPS = 40
WARMUP = 5
PLAN = {"one": (1, 100.0), "two": (2, 110.0), "four": (4, 125.0)}  # devices, ms per step


def _write(path, devices: int, period_ms: float) -> dict:
    """Writes the run; returns each device's training-step start times (ns)."""
    starts = {}
    w = trainprof.RunWriter(str(path), node="node-0", name=path.name, command=["train.py"],
                            start_ns=T0, source="generated")
    for rank in range(devices):
        pid = 2000 + rank
        # A different phase per rank: the figures must not depend on the ranks being aligned.
        t = T0 + rank * 7 * MS + (np.arange(STEPS) * period_ms * MS).astype(np.int64)
        for s, start in enumerate(t):
            w.append_event("step", "step", int(start), int(period_ms * 0.9 * MS), mode="train",
                           step=s, pid=pid, tid=pid, rank=rank)
        starts[rank] = t
    w.close(end_ns=int(T0 + (STEPS + 1) * period_ms * MS), exit_status=0)
    return starts


def _expected(all_starts: dict) -> dict:
    """Per run: devices, aggregate and per-device steps/s, speedup, ideal, efficiency."""
    rates = {}
    for run, starts in all_starts.items():
        per_device = []
        for t in starts.values():
            counted = np.sort(t)[WARMUP:]
            per_device.append((len(counted) - 1) / ((counted[-1] - counted[0]) / 1e9))
        rates[run] = (len(starts), float(np.sum(per_device)), float(np.median(per_device)))
    base = min(rates, key=lambda r: rates[r][0])
    out = {}
    for run, (devices, total, median) in rates.items():
        out[run] = {"devices": devices, "steps_per_s": total, "steps_per_s_per_device": median,
                    "speedup": total / rates[base][1], "ideal_speedup": devices / rates[base][0],
                    "efficiency": median / rates[base][2], "baseline": run == base}
    return out


class _Tables(HTMLParser):
    """The rows of the tables inside <section id="scaling">."""

    def __init__(self):
        super().__init__()
        self.depth = 0
        self.rows: list[list[str]] = []
        self.cell = None

    def handle_starttag(self, tag, attrs):
        if tag == "section" and ("id", "scaling") in attrs:
            self.depth = 1
        elif tag == "section" and self.depth:
            self.depth += 1
        elif self.depth and tag == "tr":
            self.rows.append([])
        elif self.depth and tag in ("td", "th"):
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "section" and self.depth:
            self.depth -= 1
        elif self.depth and tag in ("td", "th") and self.cell is not None:
            self.rows[-1].append(self.cell.strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("scaling")
    starts = {name: _write(root / name, *plan) for name, plan in PLAN.items()}
    return root, _expected(starts)


def test_report_shows_the_scaling_efficiency_computed_from_the_step_times(runs, tmp_path):
    root, expected = runs
    html, js = tmp_path / "r.html", tmp_path / "r.json"
    r = subprocess.run([*trainprof_command(), "report", str(root / "two"), "--out", str(html),
                        "--json", str(js), "--scaling", str(root / "four"), str(root / "one"),
                        "--warmup-steps", str(WARMUP)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    section = json.loads(js.read_text())["scaling"]
    assert section["available"] and section["warmup_steps"] == WARMUP
    got = {row["name"]: row for row in section["runs"]}
    assert set(got) == set(PLAN)
    assert [row["devices"] for row in section["runs"]] == [1, 2, 4]  # by devices
    for name, want in expected.items():
        for key, value in want.items():
            assert got[name][key] == pytest.approx(value, rel=1e-9), (name, key)
        assert got[name]["this_run"] == (name == "two")
    # The known truth, independently of the timestamps: 100 / 110 and 100 / 125.
    assert got["two"]["efficiency"] == pytest.approx(100 / 110, rel=1e-6)
    assert got["four"]["efficiency"] == pytest.approx(0.8, rel=1e-6)

    parser = _Tables()
    parser.feed(html.read_text())
    header, *rows = parser.rows
    assert header == ["Run", "Devices", "Steps/s", "Steps/s per device", "Speedup", "Ideal",
                      "Efficiency"]
    assert len(rows) == 3
    shown = {row[0].split(" (")[0]: row for row in rows}
    for name, want in expected.items():
        row = shown[name]
        assert int(row[1]) == want["devices"]
        assert float(row[2]) == pytest.approx(want["steps_per_s"], abs=5e-4)
        assert float(row[3]) == pytest.approx(want["steps_per_s_per_device"], abs=5e-4)
        assert float(row[4].rstrip("×")) == pytest.approx(want["speedup"], abs=5e-3)
        assert float(row[6].rstrip(" %")) == pytest.approx(100 * want["efficiency"], abs=0.05)
    assert "(this run)" in shown["two"][0] and "(baseline)" in shown["one"][0]
    assert 'href="#scaling"' in html.read_text()

    # The same figures as `analyze --scaling`.
    a = subprocess.run([*trainprof_command(), "analyze", str(root / "two"), "--scaling",
                        str(root / "four"), str(root / "one"), "--warmup-steps", str(WARMUP),
                        "--json"], capture_output=True, text=True, timeout=120)
    assert a.returncode == 0, a.stderr
    for row in json.loads(a.stdout)["scaling"]["runs"]:
        mine = got[row["name"]]
        for key in ("devices", "steps_per_s", "steps_per_s_per_device", "speedup", "efficiency"):
            assert row[key] == pytest.approx(mine[key], rel=1e-12), key


def test_from_python_and_absent_unless_asked(runs, tmp_path):
    root, expected = runs
    out = trainprof.report(root / "four", tmp_path / "a.html", json_path=tmp_path / "a.json",
                           scaling=[root / "one"])
    section = json.loads((tmp_path / "a.json").read_text())["scaling"]
    assert [r["name"] for r in section["runs"]] == ["one", "four"]
    assert section["runs"][1]["efficiency"] == pytest.approx(expected["four"]["efficiency"] /
                                                             expected["one"]["efficiency"])
    assert out["html"] == str(tmp_path / "a.html")

    trainprof.report(root / "four", tmp_path / "b.html", json_path=tmp_path / "b.json")
    assert json.loads((tmp_path / "b.json").read_text())["scaling"] == {
        "available": False, "note": "", "warmup_steps": 0, "runs": []}
    page = (tmp_path / "b.html").read_text()
    assert 'id="scaling"' not in page and 'href="#scaling"' not in page


def test_a_run_without_training_steps_is_an_error_naming_it(runs, tmp_path):
    root, _ = runs
    empty = tmp_path / "empty"
    w = trainprof.RunWriter(str(empty), node="n", name="empty", command=["x"], start_ns=T0,
                            source="generated")
    w.close(end_ns=T0 + 10**9, exit_status=0)
    r = subprocess.run([*trainprof_command(), "report", str(root / "one"), "--out",
                        str(tmp_path / "x.html"), "--scaling", str(empty)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert str(empty) in r.stderr and "training steps" in r.stderr, r.stderr
