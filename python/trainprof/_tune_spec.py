"""What `trainprof tune` searches (docs/tune.md): its knobs (--try templated into the command,
--env variables, trainprof's own knobs, a --space file, --auto), their values and the limits on
them, gathered into a Spec. The driver is trainprof.tune."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from trainprof import _tune_knobs as K
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

