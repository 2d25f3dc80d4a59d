"""A long recording at accelerated speed, short form (issue 20, "Load"; the long form, 24 simulated
hours, is bench/soak_bench.py, section `soak` of bench/run_all.sh): tests/soak/soak_recorder
drives the recorder's parts (collectors with 8 generated GPUs through the NVML replay library,
sampling loop, store writer flushed every simulated second, live rules every 5 simulated seconds,
a dashboard query every 15) through 6 simulated minutes of 100 ms ticks as fast as they go. The
writer seals chunks every 512 values here (4096 in a recording) so that the steady state comes
within the run. After a warm-up quarter: memory flat (the last quarter's mean RSS within 8 MiB
of the second quarter's), live rules and reader no slower at the end (ratio of medians within
3: a looser bound than the bench's 1.5, the windows here hold few samples on a shared machine),
and what was stored equals what was generated (one value per GPU per tick, GPU 0's values)."""

from __future__ import annotations

import sys

import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "bench" / "lib"))
sys.path.insert(0, str(REPO / "bench"))
import soak_bench  # noqa: E402

RECORDER = REPO / "build" / "py" / "tests" / "soak" / "soak_recorder"
REPLAY = REPO / "build" / "py" / "tests" / "nvml_replay" / "libnvml_replay.so"
HOURS = 0.1


def test_six_simulated_minutes_memory_flat_rules_and_reader_as_fast_at_the_end(tmp_path):
    if not RECORDER.exists() or not REPLAY.exists():
        pytest.fail(f"{RECORDER} or {REPLAY} is not built (the test build makes both)")
    run = tmp_path / "run"
    replay = tmp_path / "gpus.json"
    generated = soak_bench.write_replay(replay)
    doc = soak_bench.record(run, HOURS, RECORDER, REPLAY, replay, live_every_s=5,
                            query_every_s=15, query_window_s=60, rss_every_s=10, seal_values=512)
    assert doc["ticks"] == 3600 and doc["gpus"] == soak_bench.GPUS
    assert doc["dropped_values"] == 0 and doc["write_errors"] == 0 and doc["collector_errors"] == 0
    j = soak_bench.judge(doc)
    rd = soak_bench.read_hours(run, doc, generated)
    print(j, {k: v for k, v in rd.items() if k != "problems"})
    assert rd["problems"] == []
    assert rd["rows_first"] > 0 and abs(rd["rows_last"] - rd["rows_first"]) <= 0.02 * rd["rows_first"]
    assert j["rss_growth_mib"] <= 8, j
    assert j["poll_ratio"] <= 3 and j["query_ratio"] <= 3, j
    assert rd["read_ratio"] <= 3, rd
