"""Scale of analysis, short form (issue 20; the long form, 512 ranks, is bench/scale_bench.py,
section `scale` of bench/run_all.sh): a generated 64-rank run on 8 nodes with one planted
straggler (bench/lib/scale_run.py, known compute and collective times written through the store
writer). `rules`, `report` and `analyze` must name the planted rank on its node, with its own
time as generated, within the 512-rank bounds scaled down by 8 (60 s -> 7.5 s together,
4 GB -> 512 MB per command)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from conftest import REPO

sys.path.insert(0, str(REPO / "bench" / "lib"))
sys.path.insert(0, str(REPO / "bench"))
import scale_bench  # noqa: E402
import scale_run  # noqa: E402

RANKS, STEPS = 64, 100
SCALE = RANKS / 512


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    root = tmp_path_factory.mktemp("scale")
    run = root / "run"
    truth = scale_run.write(str(run), ranks=RANKS, steps=STEPS)
    return truth, scale_bench.analyse(run, root), root


def test_the_planted_straggler_is_named_by_rules_report_and_analyze(measured):
    truth, res, root = measured
    named = scale_bench.named_stragglers(res, root)
    assert scale_bench.check(truth, named) == []
    comp = scale_run.compute_ms(RANKS, STEPS, truth["straggler"])
    s = truth["straggler"]
    opt = scale_run.OPTIMIZER_MS
    # analyze: own time = mean step - its collective = the generated mean compute + optimizer
    (st,) = json.loads(res["analyze"]["stdout"])["stragglers"]
    assert st["value_us"] == pytest.approx((comp[:, s].mean() + opt) * 1000, abs=1.0)
    assert st["median_us"] == pytest.approx((np.median(comp.mean(axis=0)) + opt) * 1000, abs=1.0)
    # the rule: median own time per step = compute + the gap before the step (none before the
    # first step)
    own = comp[:, s] + opt + scale_run.GAP_MS
    own[0] -= scale_run.GAP_MS
    rules = {r["name"]: r for r in json.loads(res["rules"]["stdout"])["rules"]}
    (f,) = rules["StragglerRank"]["findings"]
    ev = f["evidence"]
    # Named over the steps its evidence lists (the whole window, or the last early_min_steps
    # when a check of the open window decided): a contiguous run of the generated own times,
    # whose median is the reported one.
    seen = np.array(ev["own_ms"])
    n = len(seen)
    assert n == min(ev["steps_in_window"], 120) and n >= 5  # the list keeps the last 120
    starts = [k for k in range(len(own) - n + 1) if np.allclose(own[k:k + n], seen, atol=0.002)]
    assert starts, (seen[:5], own[:5])
    if n == ev["steps_in_window"]:
        assert ev["rank_median_own_ms"] == pytest.approx(np.median(seen), abs=0.002)
    assert ev["ranks_compared"] == RANKS
    # the others wait for it: their median collective is about the straggler's extra time
    assert ev["others_max_median_collective_ms"] >= scale_run.STRAGGLER_EXTRA_MS


def test_time_and_memory_within_the_512_rank_bounds_scaled(measured):
    _, res, _ = measured
    wall = sum(m["wall_s"] for m in res.values())
    rss_mb = max(m["max_rss_kb"] for m in res.values()) / 1024
    print({k: (round(m["wall_s"], 2), round(m["cpu_s"], 2), m["max_rss_kb"] // 1024)
           for k, m in res.items()})
    assert wall <= 60 * SCALE, res
    assert rss_mb <= 4096 * SCALE, res
