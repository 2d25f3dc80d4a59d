"""`trainprof tune`: finds the settings that make a training job fastest per dollar, by short
profiled trials (docs/tune.md).

    trainprof tune [--try NAME=V1,V2 | --env VAR=V1,V2 | --space FILE] [--budget 20m]
                   [--instance-type T] [--json] -- python train.py --workers {NAME} ...

Each trial is `trainprof record --out STATE/trials/NNN -- CMD` with the trial's values
templated into CMD (`{NAME}`), set as environment variables of the job (`--env`), or, for
trainprof's own knobs (DataLoader workers, pin_memory, prefetch, torch threads), applied by the
automatic PyTorch instrumentation without a code change (`_tune_knobs`). The trial's training
steps are read from its live run directory: the first --warmup-steps are left out, then once
--steps more are measured (or --trial-seconds have passed) the trial is stopped with SIGTERM.
Throughput is samples per second from the steps' wall time and the DataLoader's batch size.
Optuna proposes the settings (baseline first, then one knob changed at a time, then its TPE
sampler) and a median pruner stops trials that fall behind; a trial that crashes, runs out of
memory or hangs is recorded with its status and the search goes on. The study lives in
STATE/study.journal (Optuna's journal storage): a re-run with the same command continues where it stopped.

The native `trainprof tune` hands its arguments over to `python -m trainprof.tune` unchanged
(src/cli/tune_command.cc), with $TRAINPROF_BIN naming the executable that runs the trials.
Exit status: 0 done, 1 failure (e.g. the baseline itself failed), 2 usage, 130 interrupted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import re
import signal
import statistics
import sys
import time

from trainprof import _tune_knobs as K
from trainprof import _tune_report as TS
from trainprof import _tune_results as TR
from trainprof._tune_spec import (
    MAX_GRID, _DONE, Spec, UsageError, build_spec, parse_duration,
)
from trainprof._tune_trials import Interrupted, TrialRunner, trainprof_executable


# ---------------------------------------------------------------------------------------------
# The search


def pruning_checkpoint(steps: int) -> int:
    """Measured steps between two reports to the pruner; it may prune from the second on."""
    return max(1, steps // 4)


def _key(settings: dict[str, str], canon: dict[str, dict[str, str]]) -> tuple:
    """Settings with each own knob's value that equals what the job does anyway (seen in the
    baseline) written as DEFAULT, so that they are not run twice."""
    return tuple(sorted((k, canon.get(k, {}).get(v, v)) for k, v in settings.items()))


class Search:
    def __init__(self, spec: Spec):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.optuna = optuna
        self.spec = spec
        o = spec.options
        spec.state.mkdir(parents=True, exist_ok=True)
        self._check_state()
        # Optuna's journal file: resumable like its SQLite storage, without the ~2 s that
        # creating the SQLite schema costs each start (overhead counts against the budget).
        from optuna.storages.journal import JournalFileBackend

        self.storage = optuna.storages.JournalStorage(
            JournalFileBackend(str((spec.state / "study.journal").resolve())))
        storage = self.storage
        self.study = optuna.create_study(
            study_name="tune", storage=storage, direction="maximize", load_if_exists=True,
            sampler=optuna.samplers.TPESampler(seed=o.seed, n_startup_trials=4),
            pruner=optuna.pruners.MedianPruner(n_startup_trials=2,
                                               n_warmup_steps=pruning_checkpoint(o.steps),
                                               n_min_trials=2))
        self.dists = {k.name: optuna.distributions.CategoricalDistribution(k.values)
                      for k in spec.knobs}
        self.baseline_settings = {k.name: k.baseline for k in spec.knobs}
        self.grid_size = math.prod(len(k.values) for k in spec.knobs)
        self._recover()

    def _check_state(self) -> None:
        path = self.spec.state / "spec.json"
        doc = {"fingerprint": self.spec.fingerprint(), "command": self.spec.command,
               "knobs": {k.name: {"kind": k.kind, "env": k.env, "values": k.values}
                         for k in self.spec.knobs}}
        if path.exists():
            try:
                old = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise UsageError(f"state {path}: unreadable ({exc})") from None
            if old.get("fingerprint") != doc["fingerprint"]:
                raise UsageError(
                    f"the state directory {self.spec.state} holds a study of another command or "
                    f"search space ({' '.join(old.get('command', []))}); give another --state or "
                    f"remove it")
            return
        path.write_text(json.dumps(doc, indent=1) + "\n")

    def _recover(self) -> None:
        """Trials left RUNNING by a killed tune (or WAITING in the queue) are closed as
        interrupted; their settings run again."""
        TS = self.optuna.trial.TrialState
        for t in self.study.get_trials(deepcopy=False, states=(TS.RUNNING,)):
            self.storage.set_trial_user_attr(t._trial_id, "status", "interrupted")
            self.storage.set_trial_state_values(t._trial_id, TS.FAIL)

    def results(self) -> list[dict]:
        """Every trial that ran (not the duplicates told from known results), in order."""
        out = []
        for t in self.study.get_trials(deepcopy=False):
            r = t.user_attrs.get("result")
            if r is not None:
                out.append(r)
        return out

    def canon(self) -> dict[str, dict[str, str]]:
        base = next((r for r in self.results() if r["status"] == "ok" and r.get("baseline")), None)
        return TS.canonical_values(self.spec.knobs, base)

    def _known(self) -> tuple[dict[tuple, dict], dict[tuple[str, str], dict]]:
        """The settings already run (by canonical key) and the knob values that crashed when
        changed alone from the baseline (combinations with them are skipped)."""
        canon = self.canon()
        known, crashed = {}, {}
        base = _key(self.baseline_settings, canon)
        for r in self.results():
            if r["status"] not in _DONE:
                continue
            key = _key(r["raw_settings"], canon)
            known.setdefault(key, r)
            diff = [kv for kv, b in zip(key, base) if kv != b]
            if r["status"] in ("failed", "oom", "timeout") and len(diff) == 1:
                crashed.setdefault(diff[0], r)
        return known, crashed

    def crashed_values(self) -> dict[tuple[str, str], dict]:
        return self._known()[1]

    def _lookup(self, settings: dict[str, str], known, crashed, canon) -> dict | None:
        key = _key(settings, canon)
        hit = known.get(key)
        if hit is None:
            hit = next((r for kv, r in crashed.items() if kv in key), None)
        return hit

    def candidates(self):
        """Baseline, then each knob changed alone, then the grid in order (used after the
        sampler has run out of new proposals)."""
        yield dict(self.baseline_settings)
        for k in self.spec.knobs:
            for v in k.values[1:]:
                yield dict(self.baseline_settings, **{k.name: v})
        if self.grid_size <= MAX_GRID:
            for combo in itertools.product(*(k.values for k in self.spec.knobs)):
                yield {k.name: v for k, v in zip(self.spec.knobs, combo)}

    def next_trial(self):
        """(optuna trial, settings) for the next setting to run, or None when every setting
        has been tried. First the baseline and each knob changed alone, then the sampler's
        proposals; a proposal already run (or with a value that crashed) is told the known
        outcome instead of being run again."""
        known, crashed = self._known()
        canon = self.canon()
        n_ofat = sum(len(k.values) - 1 for k in self.spec.knobs)
        pending = None
        for i, cand in enumerate(self.candidates()):
            if i > n_ofat:
                break
            if self._lookup(cand, known, crashed, canon) is None:
                pending = cand
                break
        if pending is None:
            left = next((c for c in self.candidates()
                         if self._lookup(c, known, crashed, canon) is None), None)
            if left is None and self.grid_size <= MAX_GRID:
                return None
            for _ in range(10):
                trial = self.study.ask(self.dists)
                settings = {k.name: str(trial.params[k.name]) for k in self.spec.knobs}
                hit = self._lookup(settings, known, crashed, canon)
                if hit is None:
                    return trial, settings
                self._tell_known(trial, hit)
            pending = left  # the sampler keeps proposing known settings: the grid's next
            if pending is None:  # a grid too large to list: random settings
                rng = random.Random(len(known))
                for _ in range(100):
                    cand = {k.name: rng.choice(k.values) for k in self.spec.knobs}
                    if self._lookup(cand, known, crashed, canon) is None:
                        pending = cand
                        break
                else:
                    return None
        self.study.enqueue_trial(pending, skip_if_exists=False)
        trial = self.study.ask(self.dists)
        return trial, {k.name: str(trial.params[k.name]) for k in self.spec.knobs}

    def _tell_known(self, trial, known: dict) -> None:
        TS = self.optuna.trial.TrialState
        trial.set_user_attr("duplicate_of", known["trial"])
        value = known.get("objective")
        if known["status"] == "ok" and value is not None:
            self.study.tell(trial, value)
        elif known["status"] == "pruned":
            self.study.tell(trial, state=TS.PRUNED)
        else:
            self.study.tell(trial, state=TS.FAIL)

    def finish(self, trial, result: dict) -> None:
        TS = self.optuna.trial.TrialState
        trial.set_user_attr("result", result)
        trial.set_user_attr("status", result["status"])
        if result["status"] == "ok" and result.get("objective") is not None:
            self.study.tell(trial, result["objective"])
        elif result["status"] == "pruned":
            self.study.tell(trial, state=TS.PRUNED)
        else:
            self.study.tell(trial, state=TS.FAIL)


def run_search(spec: Spec, out) -> int:
    o = spec.options
    t_start = time.monotonic()
    deadline = t_start + o.budget_s
    exe = trainprof_executable()
    price = TR.price_for(exe, o.instance_type, o.price_usd_per_hour)
    o.projection_types = []
    o.catalog = ({}, None)
    if o.instance_types:
        o.catalog = TR.catalog_rows(exe)
        for t in (x.strip() for x in o.instance_types.split(",")):
            if t not in o.catalog[0]:
                raise UsageError(f"--instance-types: {t!r} is not in the instance catalog (see "
                                 f"`trainprof instances`)")
            if t not in o.projection_types:
                o.projection_types.append(t)
    search = Search(spec)
    reader = TR.RunReader()
    try:
        return _search_loop(spec, o, t_start, deadline, exe, price, search,
                            TrialRunner(spec, exe, reader), out)
    finally:
        reader.close()


def _search_loop(spec, o, t_start, deadline, exe, price, search, runner, out) -> int:
    trial_walls = [r["wall_s"] for r in search.results() if r["status"] in ("ok", "pruned")]
    checkpoint = pruning_checkpoint(o.steps)
    setup_s = None  # from the start to the first trial (Optuna, the study, the price)
    in_trials_s = 0.0
    ran = 0
    note_cb = (lambda s: None) if o.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    stop_reason = ""
    while True:
        if Interrupted.flag:
            stop_reason = "interrupted"
            break
        done = sum(1 for r in search.results() if r["status"] in _DONE)
        if o.max_trials and done >= o.max_trials:
            stop_reason = f"--max-trials {o.max_trials} reached"
            break
        expected = statistics.median(trial_walls) if trial_walls else 0.0
        if time.monotonic() + expected > deadline:
            stop_reason = "budget spent"
            break
        nxt = search.next_trial()
        if nxt is None:
            stop_reason = "every setting tried"
            break
        trial, settings = nxt
        number = len(search.results())  # trials that ran, numbered without gaps
        is_baseline = settings == search.baseline_settings
        note_cb(f"trainprof tune: trial {number}: {TR.describe(spec.knobs, settings) or 'baseline'}")

        def report(m, prune=True, _trial=trial, _done=[0]):
            # reported at whole checkpoints, so that every trial has values at the same steps
            # for the pruner to compare
            rate = TR.objective_of(m, o.objective, price)
            step = min(m.steps, o.steps) // checkpoint * checkpoint
            if rate is None or step <= _done[0]:
                return False
            for s in range(_done[0] + checkpoint, step + 1, checkpoint):
                _trial.report(rate, s)
            _done[0] = step
            return prune and not is_baseline and _trial.should_prune()

        if setup_s is None:
            setup_s = time.monotonic() - t_start
        result = runner.run(number, settings, report, deadline)
        in_trials_s += result["wall_s"]
        result["baseline"] = is_baseline
        TR.price_result(result, price, o.objective, o.epoch_samples)
        search.finish(trial, result)
        ran += 1
        if result["status"] in ("ok", "pruned"):
            trial_walls.append(result["wall_s"])
        note_cb("trainprof tune:   " + TR.one_line(result))
        if is_baseline and result["status"] not in ("ok", "interrupted", "stopped"):
            stop_reason = "the baseline failed"
            break
    if runner.reader.restarts:
        spec.notes.append(f"the run reader process failed {runner.reader.restarts} time(s) and "
                          f"was restarted (a poll of a trial was lost each time)")
    elapsed = time.monotonic() - t_start
    summary = TS.summarize(spec, search.results(), price, elapsed_s=elapsed,
                           trials_s=in_trials_s, ran=ran, stop_reason=stop_reason,
                           setup_s=elapsed if setup_s is None else setup_s)
    summary["projections"] = TR.projections(summary["best"], o.projection_types, o.instance_type,
                                            o.catalog[0], o.catalog[1], o.epoch_samples)
    TS.write_outputs(spec.state, summary)
    if o.json:
        out.write(json.dumps(summary, indent=1) + "\n")
    else:
        out.write(TS.render_text(summary))
    out.flush()
    if Interrupted.flag:
        return 130
    base = summary.get("baseline")
    if base is None or base["status"] != "ok":
        print("error: the baseline trial did not run to completion"
              + (f": {base['error']}" if base and base.get("error") else "")
              + (f" (log: {base['log']})" if base else ""), file=sys.stderr)
        return 1
    return 0


# ---------------------------------------------------------------------------------------------
# Command line


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="trainprof tune",
        description="Finds the settings that make a training job fastest per dollar, by short "
                    "profiled trials under `trainprof record` (docs/tune.md).",
        usage="trainprof tune [OPTIONS] -- CMD [ARGS...]  ({NAME} in ARGS is a knob)")
    s = p.add_argument_group("what to try")
    s.add_argument("--try", dest="try_", action="append", metavar="NAME=V1,V2",
                   help="a knob and its values: {NAME} in the command, or one of trainprof's own "
                        f"knobs ({', '.join(K.OWN_KNOBS)}); the first value is the baseline's "
                        "(own knobs: the job's own setting)")
    s.add_argument("--env", action="append", metavar="VAR=V1,V2",
                   help="an environment variable of the job as a knob")
    s.add_argument("--space", metavar="FILE",
                   help='knobs in JSON: {"NAME": [values] | {"values": [...], "env": "VAR", '
                        '"changes_math": true}}')
    s.add_argument("--no-auto-knobs", dest="auto_knobs", action="store_false",
                   help="do not add trainprof's own knobs (num_workers, torch_threads, "
                        "channels_last, autocast, compile; pin_memory with a GPU) that the "
                        "command line does not name")
    s.add_argument("--changes-math", action="append", metavar="NAME",
                   help="flag a knob as changing the training (batch size, precision... are "
                        "recognised by name)")
    b = p.add_argument_group("trials")
    b.add_argument("--budget", default="20m", help="wall-clock budget of this run (default 20m)")
    b.add_argument("--max-trials", type=int, default=0, help="at most N finished trials")
    b.add_argument("--warmup-steps", type=int, default=5,
                   help="training steps left out at the start of each trial (default 5)")
    b.add_argument("--steps", type=int, default=30, help="measured steps per trial (default 30)")
    b.add_argument("--trial-seconds", type=float, default=60.0,
                   help="stop measuring a trial after this many seconds (default 60)")
    b.add_argument("--trial-timeout", type=float, default=300.0,
                   help="a trial with no new training step for this long is stopped as hung "
                        "(default 300 s)")
    b.add_argument("--max-memory-gib", type=float, default=None,
                   help="memory ceiling of each trial (address space, RLIMIT_AS): a setting "
                        "that needs more fails as out of memory")
    b.add_argument("--no-gpu", action="store_true", help="record trials without GPU metrics")
    b.add_argument("--record-arg", action="append", metavar="ARG",
                   help="an extra option for `trainprof record` (repeatable), e.g. "
                        "--record-arg=--interval=1s")
    b.add_argument("--state", default="trainprof-tune",
                   help="state directory (default ./trainprof-tune); a re-run continues")
    b.add_argument("--seed", type=int, default=0)
    m = p.add_argument_group("measure and price")
    m.add_argument("--objective", default="samples_per_usd",
                   choices=("samples_per_usd", "samples_per_second", "step_time"),
                   help="what ranks the trials (default samples per dollar; throughput when "
                        "the price is unknown)")
    m.add_argument("--samples-per-step", type=int, default=None,
                   help="samples per training step (default: the DataLoader's batch size)")
    m.add_argument("--epoch-samples", type=int, default=None,
                   help="samples in one epoch: time and $ per epoch in the results")
    m.add_argument("--instance-type", default=None, help="price from the instance catalog")
    m.add_argument("--instance-types", default=None, metavar="T1,T2",
                   help="other instance types to project the best setting onto with the cost "
                        "advisor's scaling model (labelled as projections, not measured)")
    m.add_argument("--price-usd-per-hour", type=float, default=None,
                   help="price of this machine per hour")
    m.add_argument("--min-effect", type=float, default=0.10,
                   help="a knob whose values change throughput by less than this share has no "
                        "effect (default 0.10)")
    m.add_argument("--loss-regex", default=TR.DEFAULT_LOSS_REGEX,
                   help="regular expression with one group: the loss in the job's output")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    return p


def _check_options(o: argparse.Namespace) -> None:
    o.budget_s = parse_duration(o.budget)
    for name in ("warmup_steps", "max_trials"):
        if getattr(o, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 0")
    for name in ("steps", "samples_per_step", "epoch_samples"):
        v = getattr(o, name)
        if v is not None and v < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1")
    for name in ("trial_seconds", "trial_timeout", "max_memory_gib", "price_usd_per_hour"):
        v = getattr(o, name)
        if v is not None and not v > 0:
            raise UsageError(f"--{name.replace('_', '-')} must be > 0")
    if not 0 <= o.min_effect < 1:
        raise UsageError("--min-effect must be in [0, 1)")
    try:
        if re.compile(o.loss_regex).groups != 1:
            raise UsageError("--loss-regex needs exactly one group (the loss value)")
    except re.error as exc:
        raise UsageError(f"--loss-regex: {exc}") from None
    if o.instance_type and o.price_usd_per_hour:
        raise UsageError("give --instance-type or --price-usd-per-hour, not both")


def main(argv: list[str] | None = None) -> int:
    p = parser()
    try:
        o = p.parse_args(argv)
        _check_options(o)
        spec = build_spec(o)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    previous = {s: signal.signal(s, lambda *_: setattr(Interrupted, "flag", True))
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return run_search(spec, sys.stdout)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except TR.TuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


if __name__ == "__main__":
    sys.exit(main())

