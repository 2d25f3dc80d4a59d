"""Example custom rules for trainprof (see docs/rules.md, "Custom rules in Python").

    trainprof rules RUN --custom examples/custom_rule.py
    trainprof rules RUN --custom examples/custom_rule.py --rule SlowSteps.max_step_ms=200 --json
    trainprof record --custom-rule examples/custom_rule.py -- python train.py

A file may define several rules: every subclass of trainprof.rules.Rule in it is run.
LongDataWaits implements update() instead of evaluate(): `record` evaluates it while the job
runs (its findings are stored and acted on as they come), and offline it gets the whole run
as one batch.
"""

from __future__ import annotations

import numpy as np

from trainprof.rules import Rule


class SlowSteps(Rule):
    """Steps slower than a budget: one finding per node with the slow steps as evidence."""

    description = "Training steps slower than max_step_ms"
    parameters = {"max_step_ms": 500.0, "min_slow_steps": 1}

    def evaluate(self, run):
        steps = run.steps()
        self.datapoints = len(steps)
        if not len(steps):
            return
        node = steps.column("node")
        number = steps.column("step")  # float, NaN where a step has no number
        start = steps.column("start_ns")
        duration = steps.column("duration_ns")
        limit_ns = float(self.params["max_step_ms"]) * 1e6
        for n in sorted(set(node)):
            mine = node == n
            slow = mine & (duration > limit_ns)
            self.violations = (self.violations or 0) + int(slow.sum())
            if slow.sum() < int(self.params["min_slow_steps"]):
                continue
            first, last = int(start[slow].min()), int((start[slow] + duration[slow]).max())
            yield self.finding(
                f"{int(slow.sum())} of {int(mine.sum())} steps on {n} took longer than "
                f"{self.params['max_step_ms']:g} ms (slowest {duration[slow].max() / 1e6:.0f} ms)",
                severity="warning",
                node=n,
                start_ns=first,
                end_ns=last,
                recommendation="Look at what the slow steps wait for (trainprof analyze RUN "
                               "--detail-steps around them).",
                evidence={
                    "max_step_ms": self.params["max_step_ms"],
                    "slow_steps": [int(s) for s in number[slow] if not np.isnan(s)][:20],
                    "slowest_step_ms": float(duration[slow].max() / 1e6),
                    "median_step_ms": float(np.median(duration[mine]) / 1e6),
                },
            )


class BusyCpuWhileWaiting(Rule):
    """The CPUs are busy while training waits for data: preprocessing is the bottleneck."""

    description = "High CPU utilisation while steps spend a large share waiting for data"
    parameters = {"cpu_threshold": 0.9, "wait_share": 0.3}

    def evaluate(self, run):
        cpu = run.system_metrics(metrics="cpu_utilization_ratio", devices="total")
        steps = run.steps()
        self.datapoints = len(cpu) + len(steps)
        if not len(cpu) or not len(steps):
            return None
        wait = steps.column("data_wait_ns")  # NaN where not measured: missing is not zero
        measured = ~np.isnan(wait)
        if not measured.any():
            return None
        share = float(np.nansum(wait) / steps.column("duration_ns")[measured].sum())
        busy = float(np.mean(cpu.column("value")))
        if share < self.params["wait_share"] or busy < self.params["cpu_threshold"]:
            return None
        self.violations = 1
        ts = cpu.column("timestamp_ns")
        return [self.finding(
            f"steps wait {share:.0%} of their time for data while the CPUs are {busy:.0%} busy",
            severity="critical" if share > 0.6 else "warning",
            node=str(cpu.column("node")[0]),
            start_ns=int(ts.min()),
            end_ns=int(ts.max()),
            recommendation="Move preprocessing off the training path: more DataLoader workers "
                           "only help if cores are free; otherwise cache preprocessed data or "
                           "use a larger instance.",
            evidence={"data_wait_share": share, "mean_cpu_utilization": busy,
                      "measured_steps": int(measured.sum())},
        )]


class LongDataWaits(Rule):
    """Incremental: counts the waits for the next batch longer than max_wait_ms, per process,
    and fires once for a process when it has had min_waits of them."""

    description = "Waits for the next batch longer than max_wait_ms, as they happen"
    parameters = {"max_wait_ms": 20.0, "min_waits": 10}

    def __init__(self, **overrides):
        super().__init__(**overrides)
        self.waits = {}  # (node, pid) -> [count, first start_ns, longest ns]

    def update(self, run, new):
        events = new.events
        if not len(events):
            return
        waiting = events.column("category") == "data_wait"
        self.datapoints += int(waiting.sum())
        limit_ns = float(self.params["max_wait_ms"]) * 1e6
        node = events.column("node")[waiting]
        pid = events.column("pid")[waiting]
        start = events.column("start_ns")[waiting]
        duration = events.column("duration_ns")[waiting]
        for i in np.argsort(start, kind="stable"):
            if duration[i] <= limit_ns:
                continue
            key = (str(node[i]), int(pid[i]) if not np.isnan(pid[i]) else -1)
            count, first, longest = self.waits.get(key, (0, int(start[i]), 0))
            count, longest = count + 1, max(longest, int(duration[i]))
            self.waits[key] = (count, first, longest)
            if count == int(self.params["min_waits"]):
                self.violations = (self.violations or 0) + 1
                yield self.finding(
                    f"process {key[1]} on {key[0]} waited more than "
                    f"{self.params['max_wait_ms']:g} ms for a batch {count} times",
                    node=key[0], start_ns=first, end_ns=int(start[i] + duration[i]),
                    recommendation="Give the DataLoader more workers (num_workers), "
                                   "pin_memory=True, or cache what __getitem__ computes.",
                    evidence={"long_waits": count, "longest_wait_ms": longest / 1e6,
                              "pid": key[1]})
