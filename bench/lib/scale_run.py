"""A generated many-rank run with known truth, written through the store writer
(trainprof.RunWriter, one node store per node of the run directory, as `record` / `agent` on
each node would write them). Used by tests/python/test_scale_analysis.py (short form) and
bench/scale_bench.py (512 ranks).

Synchronous data parallelism, planted: every rank computes COMPUTE_MS per step (plus a
deterministic jitter of at most JITTER_MS), the straggler rank STRAGGLER_EXTRA_MS more; then all
ranks all-reduce, and the all-reduce ends for everyone ALLREDUCE_MS after the slowest rank's
compute (the others wait in it); the optimizer step takes OPTIMIZER_MS after it. A GAP_MS host
gap separates steps. So every rank's step lasts
as long, and only the straggler's own time (step - collective) is longer: the
straggler rank is the one the StragglerRank rule and `analyze` must name, with own time its
compute + OPTIMIZER_MS (+ the gap before the step for the rule) against about COMPUTE_MS +
OPTIMIZER_MS for the median.
Each node also has a CPU-utilisation and a memory series sampled every 500 ms."""

from __future__ import annotations

import numpy as np

import trainprof

T0 = 1_764_576_000_000_000_000  # 2025-12-01T08:00:00Z
MS = 1_000_000
COMPUTE_MS = 60.0
JITTER_MS = 2.0
STRAGGLER_EXTRA_MS = 30.0
ALLREDUCE_MS = 5.0
OPTIMIZER_MS = 2.0
GAP_MS = 1.0
SAMPLE_MS = 500


def compute_ms(ranks: int, steps: int, straggler: int) -> np.ndarray:
    """compute[step, rank] in ms: the planted truth."""
    rng = np.random.default_rng(20)
    c = COMPUTE_MS + rng.uniform(0, JITTER_MS, size=(steps, ranks))
    c[:, straggler] += STRAGGLER_EXTRA_MS
    return c


def write(out: str, ranks: int = 512, steps: int = 100, ranks_per_node: int = 8,
          straggler: int | None = None) -> dict:
    """Writes the run into out (must not exist); returns the truth."""
    if ranks % ranks_per_node:
        raise ValueError("ranks must be a multiple of ranks_per_node")
    if straggler is None:
        straggler = ranks * 5 // 8 + 3  # not the first rank of a node, not node 0
    comp = compute_ms(ranks, steps, straggler)
    reduced_ms = comp.max(axis=1) + ALLREDUCE_MS  # when the all-reduce ends, per step
    cycle_ms = reduced_ms + OPTIMIZER_MS  # the step, for every rank
    starts = T0 + np.concatenate([[0.0], np.cumsum(cycle_ms + GAP_MS)[:-1]]) * MS
    starts = starts.astype(np.int64)
    end_ns = int(starts[-1] + cycle_ms[-1] * MS) + MS
    nodes = ranks // ranks_per_node
    for n in range(nodes):
        node = f"node-{n:03d}"
        w = trainprof.RunWriter(out, node=node, name="scale", command=["python", "train.py"],
                                start_ns=T0, source="generated")
        for local in range(ranks_per_node):
            rank = n * ranks_per_node + local
            pid = 1000 + local
            for s in range(steps):
                t = int(starts[s])
                dur = int(cycle_ms[s] * MS)
                w.append_event("step", "step", t, dur, mode="train", step=s, pid=pid, tid=pid,
                               rank=rank)
                c_start = t + int(comp[s, rank] * MS)
                c_end = t + int(reduced_ms[s] * MS)
                w.append_event("all_reduce", "collective", c_start, c_end - c_start, mode="train",
                               step=s, pid=pid, tid=pid, rank=rank)
        ts = T0 + np.arange(0, (end_ns - T0) // (SAMPLE_MS * MS), dtype=np.int64) * SAMPLE_MS * MS
        w.append_metric("cpu_utilization_ratio", "total", ts, np.full(len(ts), 0.9))
        w.append_metric("memory_used_bytes", "total", ts, np.full(len(ts), 64e9))
        w.close(end_ns=end_ns, exit_status=0)
    median_own = float(np.median(np.median(comp, axis=0)))
    return {"ranks": ranks, "steps": steps, "nodes": nodes, "straggler": straggler,
            "straggler_node": f"node-{straggler // ranks_per_node:03d}",
            "straggler_own_ms": float(np.median(comp[:, straggler])), "median_own_ms": median_own,
            "end_ns": end_ns}
