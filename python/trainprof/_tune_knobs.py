"""trainprof's own tuning knobs: settings of a PyTorch job that `trainprof tune` changes without
touching its code. Each is an environment variable that `tune` sets for a trial; inside the
recorded job the automatic PyTorch instrumentation (`_auto.install`) calls `apply(torch)`,
which sets torch's thread counts and rewrites the arguments of every `DataLoader(...)` the job
creates. Nothing here runs unless a ``TRAINPROF_TUNE_*`` variable is set.

This module is imported by the startup hook of recorded jobs: keep it free of heavy imports.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class OwnKnob:
    name: str  # the knob's name in `tune` (--try NAME=...)
    env: str  # the variable the job reads
    kind: str  # "int" or "bool"
    what: str  # what it sets, in the job's terms
    in_code: str  # how to make the setting permanent in the code ({v}: the value)


OWN_KNOBS = {
    k.name: k
    for k in (
        OwnKnob("num_workers", "TRAINPROF_TUNE_NUM_WORKERS", "int",
                "DataLoader(num_workers=N) of every DataLoader", "DataLoader(..., num_workers={v})"),
        OwnKnob("pin_memory", "TRAINPROF_TUNE_PIN_MEMORY", "bool",
                "DataLoader(pin_memory=...)", "DataLoader(..., pin_memory={v})"),
        OwnKnob("prefetch_factor", "TRAINPROF_TUNE_PREFETCH_FACTOR", "int",
                "DataLoader(prefetch_factor=N) (with num_workers > 0)",
                "DataLoader(..., prefetch_factor={v})"),
        OwnKnob("persistent_workers", "TRAINPROF_TUNE_PERSISTENT_WORKERS", "bool",
                "DataLoader(persistent_workers=...) (with num_workers > 0)",
                "DataLoader(..., persistent_workers={v})"),
        OwnKnob("torch_threads", "TRAINPROF_TUNE_TORCH_THREADS", "int",
                "torch.set_num_threads(N): intra-op threads", "torch.set_num_threads({v})"),
        OwnKnob("interop_threads", "TRAINPROF_TUNE_INTEROP_THREADS", "int",
                "torch.set_num_interop_threads(N): inter-op threads",
                "torch.set_num_interop_threads({v})"),
    )
}

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def parse_value(knob: OwnKnob, text: str):
    """The knob's value from its text; ValueError naming the knob when it is not valid."""
    t = str(text).strip().lower()
    if knob.kind == "bool":
        if t in _TRUE:
            return True
        if t in _FALSE:
            return False
        raise ValueError(f"{knob.name}: {text!r} is not a boolean (true/false)")
    try:
        v = int(t)
    except ValueError:
        raise ValueError(f"{knob.name}: {text!r} is not an integer") from None
    if v < 0 or v > 4096 or (knob.name in ("torch_threads", "interop_threads", "prefetch_factor")
                               and v < 1):
        raise ValueError(f"{knob.name}: {v} is out of range")
    return v


def env_value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _from_env() -> dict:
    out = {}
    for knob in OWN_KNOBS.values():
        text = os.environ.get(knob.env)
        if text is None or text == "":
            continue
        out[knob.name] = parse_value(knob, text)
    return out


def _warn(message: str) -> None:
    print(f"trainprof: tune: {message}", file=sys.stderr, flush=True)


def apply(torch) -> None:
    """In the recorded job, once torch is imported: applies the TRAINPROF_TUNE_* settings."""
    try:
        settings = _from_env()
    except ValueError as exc:
        _warn(f"ignored: {exc}")
        return
    if not settings:
        return
    if "torch_threads" in settings:
        torch.set_num_threads(settings["torch_threads"])
    if "interop_threads" in settings:
        try:
            torch.set_num_interop_threads(settings["interop_threads"])
        except RuntimeError as exc:  # the inter-op pool has started already
            _warn(f"interop_threads not applied: {exc}")
    loader_keys = {"num_workers", "pin_memory", "prefetch_factor", "persistent_workers"}
    if loader_keys & settings.keys():
        _patch_dataloader_init(torch, {k: v for k, v in settings.items() if k in loader_keys})


def loader_arguments(arguments: dict, settings: dict) -> dict:
    """The DataLoader's keyword arguments with the settings applied, kept consistent the way
    DataLoader checks them (prefetch_factor and persistent_workers need workers)."""
    out = dict(arguments)
    out.update(settings)
    workers = out.get("num_workers", 0) or 0
    if workers == 0:
        out["prefetch_factor"] = None
        out["persistent_workers"] = False
    return out


def _patch_dataloader_init(torch, settings: dict) -> None:
    import inspect

    DataLoader = torch.utils.data.DataLoader
    orig = DataLoader.__init__
    if getattr(orig, "_trainprof_tune", False):
        return
    sig = inspect.signature(orig)
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values()):
        _warn(f"DataLoader settings not applied: unexpected signature {sig} on torch "
              f"{torch.__version__}")
        return

    def __init__(self, *args, **kwargs):
        try:
            bound = sig.bind(self, *args, **kwargs)
        except TypeError:  # let DataLoader report the caller's mistake itself
            return orig(self, *args, **kwargs)
        bound.apply_defaults()
        params = loader_arguments(dict(bound.arguments), settings)
        positional = [params.pop(p.name) for p in sig.parameters.values()
                      if p.kind is p.POSITIONAL_ONLY]  # self first
        return orig(*positional, **params) if positional else orig(**params)

    __init__._trainprof_tune = True  # type: ignore[attr-defined]
    __init__.__wrapped__ = orig  # type: ignore[attr-defined]
    DataLoader.__init__ = __init__
