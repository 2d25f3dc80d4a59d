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
import hashlib
import itertools
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from trainprof import _tune_knobs as K
from trainprof import _tune_report as TS
from trainprof import _tune_results as TR

MAX_KNOBS = 32
MAX_VALUES = 64
MAX_SPACE_FILE_BYTES = 1 << 20
MAX_GRID = 100_000
DEFAULT = "default"  # an own knob left as the job has it
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# Knob names that change what is trained, not just how fast (flagged in the results).
_MATH = re.compile(r"batch|precision|dtype|amp|autocast|fp16|bf16|half|(^|_)lr($|_)|learning_rate|"
                   r"accum|seq_len|max_len|loss_scale|quantiz", re.I)
_DONE = ("ok", "pruned", "failed", "oom", "timeout", "no_steps")  # not retried by a re-run


UsageError = TR.UsageError


@dataclass
class Knob:
    name: str
    values: list[str]  # as text; an own knob's first choice is DEFAULT (the job's own setting)
    kind: str  # "arg" ({name} in the command), "env" (environment variable), "own"
    env: str = ""
    changes_math: bool = False

    @property
    def baseline(self) -> str:
        return self.values[0]


@dataclass
class Spec:
    command: list[str]
    knobs: list[Knob]
    state: Path
    options: argparse.Namespace
    notes: list[str] = field(default_factory=list)

    def fingerprint(self) -> str:
        doc = {"command": self.command,
               "knobs": [[k.name, k.kind, k.env, k.values] for k in self.knobs]}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# The search space


def parse_duration(text: str) -> float:
    """Seconds from '90', '90s', '20m', '1h', '1h30m'."""
    t = str(text).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    m = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?", t)
    if not t or m is None or not any(m.groups()):
        raise UsageError(f"--budget/duration {text!r}: expected e.g. 90s, 20m, 1h30m")
    h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mi * 60 + s


def _split_assignment(text: str, option: str) -> tuple[str, list[str]]:
    if "=" not in text:
        raise UsageError(f"{option} {text!r}: expected NAME=V1,V2,...")
    name, _, values = text.partition("=")
    name = name.strip()
    vals = [v.strip() for v in values.split(",")]
    if not _NAME.match(name):
        raise UsageError(f"{option} {text!r}: {name!r} is not a knob name (letters, digits, _)")
    if not values.strip() or any(v == "" for v in vals):
        raise UsageError(f"{option} {text!r}: empty value in the list")
    return name, vals


def _dedupe(values: list[str]) -> list[str]:
    seen, out = set(), []
    for v in values:
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


def _own_knob(name: str, values: list[str]) -> Knob:
    own = K.OWN_KNOBS[name]
    checked = []
    for v in values:
        if v == DEFAULT:
            continue
        try:
            checked.append(K.env_value(K.parse_value(own, v)))
        except ValueError as exc:
            raise UsageError(f"--try {name}: {exc}") from None
    return Knob(name, _dedupe([DEFAULT, *checked]), "own", env=own.env,
                changes_math=own.changes_math)


def _knob_from_entry(name: str, entry, command: list[str], option: str) -> Knob:
    """One knob from --try/--env or an entry of --space."""
    env = ""
    changes_math = None
    if isinstance(entry, dict):
        unknown = set(entry) - {"values", "env", "changes_math"}
        if unknown:
            raise UsageError(f"{option}: knob {name!r}: unknown keys {sorted(unknown)}")
        values = entry.get("values")
        env = entry.get("env") or ""
        if env is True:
            env = name
        changes_math = entry.get("changes_math")
    else:
        values = entry
    if not isinstance(values, list) or not values:
        raise UsageError(f"{option}: knob {name!r} needs a non-empty list of values")
    if len(values) > MAX_VALUES:
        raise UsageError(f"{option}: knob {name!r} has {len(values)} values (at most {MAX_VALUES})")
    texts = []
    for v in values:
        if isinstance(v, bool):
            texts.append("true" if v else "false")
        elif isinstance(v, (int, float, str)) and str(v) != "":
            texts.append(str(v))
        else:
            raise UsageError(f"{option}: knob {name!r}: value {v!r} is not a number or string")
    texts = _dedupe(texts)
    placeholder = "{" + name + "}"
    if env:
        if not isinstance(env, str) or not _ENV_NAME.match(env):
            raise UsageError(f"{option}: knob {name!r}: {env!r} is not an environment variable name")
        knob = Knob(name, texts, "env", env=env)
    elif any(placeholder in a for a in command):
        knob = Knob(name, texts, "arg")
    elif name in K.OWN_KNOBS:
        knob = _own_knob(name, texts)
    else:
        raise UsageError(
            f"{option}: knob {name!r}: the command has no {placeholder} to replace and it is not "
            f"one of trainprof's own knobs ({', '.join(K.OWN_KNOBS)}); use --env {name}=... for an "
            f"environment variable of the job")
    knob.changes_math = bool(changes_math) if changes_math is not None else bool(
        _MATH.search(name) or knob.changes_math)
    return knob


def load_space_file(path: str) -> dict:
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise UsageError(f"--space {path}: {exc.strerror}") from None
    if size > MAX_SPACE_FILE_BYTES:
        raise UsageError(f"--space {path}: {size} bytes, more than {MAX_SPACE_FILE_BYTES}")
    try:
        doc = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--space {path}: not valid JSON: {exc}") from None
    if isinstance(doc, dict) and "knobs" in doc:
        doc = doc["knobs"]
    if not isinstance(doc, dict):
        raise UsageError(f"--space {path}: expected an object {{\"NAME\": [values...], ...}}")
    return doc


def auto_values(cores: int, gpu: bool) -> dict[str, list[str]]:
    """trainprof's own proposals for a job with `cores` CPUs."""
    workers = sorted({w for w in (1, 2, 4, cores, 2 * cores) if 1 <= w <= 16})
    threads = sorted({t for t in (1, cores // 2, cores) if t >= 1})
    out = {"num_workers": [str(w) for w in workers], "torch_threads": [str(t) for t in threads]}
    if gpu:
        out["pin_memory"] = ["true"]
    # the model's knobs: run only where the baseline shows they apply (a model; 2-D convolutions
    # for channels_last), see _tune_results.canonical_values
    out["channels_last"] = ["true"]
    out["autocast"] = ["bf16", "fp16"] if gpu else ["bf16"]
    out["compile"] = ["default"]
    return out


def build_spec(opts: argparse.Namespace) -> Spec:
    command = list(opts.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("no command to tune: trainprof tune [OPTIONS] -- CMD ARGS...")
    knobs: list[Knob] = []
    names: set[str] = set()

    def add(knob: Knob) -> None:
        if knob.name in names:
            raise UsageError(f"knob {knob.name!r} is given twice")
        names.add(knob.name)
        knobs.append(knob)

    if opts.space:
        for name, entry in load_space_file(opts.space).items():
            if not isinstance(name, str) or not _NAME.match(name):
                raise UsageError(f"--space {opts.space}: {name!r} is not a knob name")
            add(_knob_from_entry(name, entry, command, f"--space {opts.space}"))
    for text in opts.try_ or []:
        name, values = _split_assignment(text, "--try")
        add(_knob_from_entry(name, values, command, "--try"))
    for text in opts.env or []:
        name, values = _split_assignment(text, "--env")
        add(_knob_from_entry(name, {"values": values, "env": name}, command, "--env"))
    notes = []
    if opts.auto_knobs:
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        added = []
        for name, values in auto_values(cores or 1, not opts.no_gpu and _has_gpu()).items():
            if name not in names:
                add(_own_knob(name, values))
                added.append(f"{name} in {{{', '.join(values)}}}")
        if added:
            notes.append("trainprof's own knobs (applied without a code change): " + "; ".join(added))
    for name in opts.changes_math or []:
        match = [k for k in knobs if k.name == name]
        if not match:
            raise UsageError(f"--changes-math {name}: no such knob")
        match[0].changes_math = True
    if not knobs:
        raise UsageError("nothing to tune: give --try NAME=V1,V2, --env VAR=V1,V2 or --space FILE "
                         "(or leave trainprof's own knobs on)")
    if len(knobs) > MAX_KNOBS:
        raise UsageError(f"{len(knobs)} knobs: at most {MAX_KNOBS}")
    for a in command:
        for ph in re.findall(r"\{([A-Za-z_][A-Za-z0-9_.-]*)\}", a):
            if ph not in names:
                notes.append(f"the command's {{{ph}}} is not a knob and is passed as it is")
    state = Path(opts.state)
    return Spec(command, knobs, state, opts, notes)


def _has_gpu() -> bool:
    return any(Path(p).exists() for p in ("/dev/nvidia0", "/dev/nvidiactl"))


# ---------------------------------------------------------------------------------------------
# One trial


def trainprof_executable() -> str:
    exe = os.environ.get("TRAINPROF_BIN")
    if exe:
        return exe
    from trainprof.cli import native_executable

    native = native_executable()
    if native.exists():
        return str(native)
    found = shutil.which("trainprof")
    if found is None:
        raise UsageError("the trainprof executable was not found (set $TRAINPROF_BIN)")
    return found


def templated(command: list[str], knobs: list[Knob], settings: dict[str, str]) -> list[str]:
    out = []
    for a in command:
        for k in knobs:
            if k.kind == "arg":
                a = a.replace("{" + k.name + "}", settings[k.name])
        out.append(a)
    return out


def trial_environment(knobs: list[Knob], settings: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TRAINPROF_TUNE_")
           and k not in ("TRAINPROF_RUN_DIR", "TRAINPROF_SOCKET", "TRAINPROF_NODE",
                         "TRAINPROF_RUN_ID")}
    env[K.OBSERVE_ENV] = "1"  # the job notes its model (whether the model knobs apply)
    for k in knobs:
        v = settings[k.name]
        if k.kind == "env":
            env[k.env] = v
        elif k.kind == "own" and v != DEFAULT:
            env[k.env] = v
    return env


def env_assignments(knobs: list[Knob], settings: dict[str, str]) -> list[str]:
    return [f"{k.env}={settings[k.name]}" for k in knobs
            if k.kind == "env" or (k.kind == "own" and settings[k.name] != DEFAULT)]


class Interrupted:
    """Set by SIGINT/SIGTERM: the running trial is stopped, results printed, exit 130."""

    flag = False


def _stop(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """SIGTERM to `record` (it relays to the job and stores the end of the run), then, if it
    does not end, SIGKILL to the trial's whole process group."""
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _memory_limit(gib: float | None):
    if not gib:
        return None
    limit = int(gib * (1 << 30))

    def preexec():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return preexec


class TrialRunner:
    """Runs one trial under `record` and measures it from the live run directory (the main
    thread polls; nothing else runs meanwhile)."""

    POLL_S = 0.3

    def __init__(self, spec: Spec, exe: str, reader: TR.RunReader):
        self.spec = spec
        self.exe = exe
        self.o = spec.options
        self.reader = reader

    def record_command(self, run_dir: Path, number: int, settings: dict[str, str]) -> list[str]:
        cmd = [self.exe, "record", "--out", str(run_dir), "--name", f"tune-{number:03d}",
               "--tag", f"tune.trial={number}"]
        if self.o.no_gpu:
            cmd.append("--no-gpu")
        if self.o.instance_type:
            cmd += ["--instance-type", self.o.instance_type]
        for a in self.o.record_arg or []:
            cmd.append(a)
        return cmd + ["--", *templated(self.spec.command, self.spec.knobs, settings)]

    def run(self, number: int, settings: dict[str, str], report, deadline: float) -> dict:
        """Runs the trial; `report(measure, prune)` tells the pruner and returns True to
        prune it."""
        run_dir = self.spec.state / "trials" / f"{number:03d}"
        log_path = self.spec.state / "trials" / f"{number:03d}.log"
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        if run_dir.exists():  # left by an interrupted attempt with this number
            shutil.rmtree(run_dir)
        cmd = self.record_command(run_dir, number, settings)
        t0 = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    env=trial_environment(self.spec.knobs, settings),
                                    preexec_fn=_memory_limit(self.o.max_memory_gib))
        status = None
        last_count, last_progress = -1, t0
        first_step_s = None
        measure = None
        try:
            while True:
                time.sleep(self.POLL_S)
                exited = proc.poll() is not None
                measure = self.reader.live(run_dir, self.o.warmup_steps) or measure
                now = time.monotonic()
                if measure is not None:
                    if measure.total_steps != last_count:
                        last_count, last_progress = measure.total_steps, now
                        if first_step_s is None and measure.total_steps > 0:
                            first_step_s = now - t0
                    if measure.steps >= self.o.steps or (
                            measure.steps >= 1 and measure.seconds >= self.o.trial_seconds):
                        report(measure, False)
                        status = "ok"
                        break
                    if measure.steps >= 1 and not exited and report(measure):
                        status = "pruned"
                        break
                if exited:
                    break
                if Interrupted.flag:
                    status = "interrupted"
                    break
                if now >= deadline:
                    status = "stopped"
                    break
                if now - last_progress > self.o.trial_timeout:
                    status = "timeout"
                    break
        finally:
            stop_t = time.monotonic()
            _stop(proc)
        wall_s = time.monotonic() - t0
        exit_status = proc.returncode
        if exit_status is not None and exit_status < 0:
            exit_status = 128 - exit_status
        final, obs = self.reader.final(run_dir, self.o.warmup_steps, self.o.samples_per_step)
        if final is not None and final.steps >= 1:
            measure = final
        log_text = _tail(log_path)
        if status is None:  # the job ended by itself
            if exit_status == 0:
                status = "ok" if measure is not None and measure.steps >= 1 else "no_steps"
            else:
                status = "oom" if TR.looks_oom(log_text, exit_status) else "failed"
        result = TR.trial_result(number, settings, status, measure, run_dir, log_path,
                                 exit_status, log_text, self.spec, wall_s,
                                 startup_s=first_step_s, stop_s=time.monotonic() - stop_t,
                                 env=env_assignments(self.spec.knobs, settings),
                                 command=templated(self.spec.command, self.spec.knobs, settings),
                                 obs=obs)
        return result


def _tail(path: Path, limit: int = 1 << 20) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


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
