"""Custom rules in Python: the base class and what a rule returns.

A custom rule is a subclass of :class:`Rule` in a Python file. It reads the run through the same
reader as everything else (:class:`trainprof.Run`: ``system_metrics()``, ``events()``,
``steps()``, ``findings()``...) and returns :class:`Finding` objects, the type the built-in
rules' findings have when read back from a run::

    from trainprof.rules import Rule

    class SlowSteps(Rule):
        description = "Training steps slower than a limit"
        parameters = {"max_step_ms": 500.0}

        def evaluate(self, run):
            steps = run.steps().to_pandas()
            self.datapoints = len(steps)
            slow = steps[steps["duration_ns"] > self.params["max_step_ms"] * 1e6]
            for row in slow.itertuples():
                yield self.finding(
                    f"step {row.step} took {row.duration_ns / 1e6:.0f} ms",
                    node=row.node, start_ns=row.start_ns,
                    end_ns=row.start_ns + row.duration_ns,
                    recommendation="look at what this step waits for",
                    evidence={"step": int(row.step), "duration_ns": int(row.duration_ns)})

Run it on a stored run with ``trainprof rules RUN --custom my_rule.py`` (parameters:
``--rule SlowSteps.max_step_ms=200``), or on a recorded job with
``trainprof record --custom-rule my_rule.py -- python train.py``. ``python -m
trainprof.rules_runner`` is the runner both use.

A rule that ``evaluate``\ s the whole run is evaluated once, when the job ends. To be evaluated
while the job runs, a rule implements :meth:`Rule.update` instead: it is called every few
seconds with what the run gained since the previous call (:class:`NewData`) and keeps its own
state between calls; its findings are stored and acted on (``--rules-config`` actions: stop
the job, a command, a webhook) as they come. Offline, ``update`` is called once with the
whole run, so the same rule gives the same findings live and offline when its logic does not
depend on how the data is batched::

    class HotCpu(Rule):
        parameters = {"max_ratio": 0.95, "for_samples": 20}

        def __init__(self, **overrides):
            super().__init__(**overrides)
            self.run_length = {}          # (node, device) -> consecutive hot samples

        def update(self, run, new):
            m = new.system_metrics.to_pandas()
            m = m[m["metric"] == "cpu_utilization_ratio"]
            self.datapoints += len(m)
            for row in m.itertuples():
                key = (row.node, row.device)
                n = self.run_length[key] = self.run_length.get(key, 0) + 1 \
                    if row.value > self.params["max_ratio"] else 0
                if n == self.params["for_samples"]:
                    yield self.finding(f"{row.device} above {self.params['max_ratio']:.0%}",
                                       node=row.node, device=row.device,
                                       start_ns=row.timestamp_ns, evidence={"samples": n})
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Iterable

from trainprof._reader import EventTable, Finding, MetricTable, Run

SEVERITIES = ("info", "warning", "critical")

__all__ = ["Finding", "NewData", "Rule", "RuleError", "SEVERITIES"]


@dataclass(frozen=True)
class NewData:
    """What a run gained since the previous :meth:`Rule.update` call.

    system_metrics  samples written since then (each sample is in exactly one batch)
    events          events written since then (steps are events of category "step"; a
                    step's parts -- data_wait, forward, backward, optimizer -- may come in
                    the batch before or after the step's own span)
    final           True for the last call: the job has ended and this is the rest
    """

    system_metrics: MetricTable
    events: EventTable
    final: bool = False


class RuleError(ValueError):
    """A rule is defined or used wrongly (unknown parameter, bad finding)."""


class Rule:
    """Base class of custom rules.

    Class attributes a subclass sets:
      name         the rule's name in results and stored findings (default: the class name)
      description  one line shown with the results
      parameters   the parameters and their defaults; ``--rule NAME.param=value`` overrides them

    A subclass implements :meth:`evaluate`. It may set ``self.datapoints`` (how many values it
    looked at) and ``self.violations`` (default: the number of findings), and ``self.details``
    (a JSON-serialisable summary dict), like the built-in rules report them.
    """

    name: str = ""
    description: str = ""
    parameters: dict[str, Any] = {}

    def __init__(self, **overrides: Any):
        unknown = sorted(set(overrides) - set(self.parameters))
        if unknown:
            known = ", ".join(sorted(self.parameters)) or "none"
            raise RuleError(f"rule {self.rule_name()}: unknown parameter(s) {', '.join(unknown)}"
                            f" (parameters: {known})")
        self.params: dict[str, Any] = {**self.parameters, **overrides}
        self.datapoints: int = 0
        self.violations: int | None = None
        self.details: dict[str, Any] = {}

    @classmethod
    def rule_name(cls) -> str:
        return cls.name or cls.__name__

    def evaluate(self, run: Run) -> Iterable[Finding] | None:
        """Looks at the run and returns (or yields) findings; None or nothing: no finding.

        A rule that implements :meth:`update` need not implement this: the whole run is then
        given to ``update`` as one final batch."""
        if self.is_incremental():
            return self.update(run, NewData(run.system_metrics(), run.events(), final=True))
        raise NotImplementedError(f"{type(self).__name__} implements neither evaluate nor "
                                  "update")

    def update(self, run: Run, new: NewData) -> Iterable[Finding] | None:
        """Live evaluation: looks at what the run gained (`new`) and returns (or yields) the
        findings it makes final now -- each once; keep what later calls need in `self`."""
        raise NotImplementedError(f"{type(self).__name__}.update is not implemented")

    @classmethod
    def is_incremental(cls) -> bool:
        """Whether the rule implements update() (and so is evaluated while the job runs)."""
        return cls.update is not Rule.update

    def finding(self, message: str, *, severity: str = "warning", node: str = "",
                device: str = "", start_ns: int = 0, end_ns: int | None = None,
                recommendation: str = "", evidence: dict | None = None) -> Finding:
        """A finding of this rule. `evidence` holds the values that made it fire."""
        return Finding(rule=self.rule_name(), severity=severity, node=str(node), device=str(device),
                       start_ns=int(start_ns), end_ns=int(start_ns if end_ns is None else end_ns),
                       message=message, recommendation=recommendation,
                       evidence=dict(evidence or {}))


def check_finding(rule: Rule, f: Any) -> Finding:
    """Validates what a rule returned; raises RuleError naming what is wrong."""
    who = f"rule {rule.rule_name()}"
    if not isinstance(f, Finding):
        raise RuleError(f"{who} returned {type(f).__name__!s}, not a trainprof.rules.Finding "
                        "(use self.finding(...))")
    if f.rule != rule.rule_name():
        raise RuleError(f"{who} returned a finding of rule {f.rule!r}")
    if f.severity not in SEVERITIES:
        raise RuleError(f"{who}: severity {f.severity!r} is not one of {', '.join(SEVERITIES)}")
    for field in ("start_ns", "end_ns"):
        if not isinstance(getattr(f, field), int):
            raise RuleError(f"{who}: {field} must be an integer (ns since the epoch)")
    if f.end_ns < f.start_ns:
        raise RuleError(f"{who}: end_ns {f.end_ns} is before start_ns {f.start_ns}")
    if not f.message:
        raise RuleError(f"{who}: a finding needs a message")
    if not isinstance(f.evidence, dict):
        raise RuleError(f"{who}: evidence must be a dict")
    try:
        json.dumps(f.evidence, allow_nan=False, default=_plain)
    except (TypeError, ValueError) as e:
        raise RuleError(f"{who}: evidence is not JSON-serialisable: {e}") from None
    return f


def _plain(x: Any) -> Any:
    """NumPy scalars and arrays in evidence become plain numbers and lists."""
    if hasattr(x, "tolist"):
        return x.tolist()
    raise TypeError(f"{type(x).__name__} is not JSON-serialisable")


def finding_to_json(f: Finding) -> dict:
    """A finding as in the built-in rules' JSON entries (without "rule")."""
    evidence = json.loads(json.dumps(f.evidence, allow_nan=False, default=_plain))
    return {"severity": f.severity, "node": f.node, "device": f.device, "start_ns": f.start_ns,
            "end_ns": f.end_ns, "message": f.message, "recommendation": f.recommendation,
            "evidence": evidence}


def run_rule(rule: Rule, run: Run) -> dict:
    """Evaluates one rule; returns its entry in the shape of `trainprof rules --json`'s entries.
    Exceptions from the rule propagate (the runner reports them)."""
    returned = rule.evaluate(run)
    return rule_entry(rule, [check_finding(rule, f) for f in (returned or [])])


def rule_entry(rule: Rule, findings: list[Finding]) -> dict:
    """The rule's entry for `findings` (checked) and its counters."""
    violations = len(findings) if rule.violations is None else int(rule.violations)
    for field, value in (("datapoints", rule.datapoints), ("violations", violations)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise RuleError(f"rule {rule.rule_name()}: {field} must be a non-negative integer")
    params = json.loads(json.dumps(rule.params, default=_plain))
    details = json.loads(json.dumps(rule.details, default=_plain))
    return {
        "name": rule.rule_name(),
        "triggered": bool(findings) or violations > 0,
        "violations": violations,
        "datapoints": int(rule.datapoints),
        "parameters": params,
        "findings": [finding_to_json(f) for f in findings],
        "details": details,
    }


def parse_value(text: str) -> Any:
    """A --rule value: a JSON number (or true/false/null), else the text itself."""
    try:
        v = json.loads(text)
    except ValueError:
        return text
    if isinstance(v, float) and not math.isfinite(v):
        return text
    return v if isinstance(v, (int, float, bool)) or v is None else text
