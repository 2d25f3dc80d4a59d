"""trainprof's own tuning knobs: settings of a PyTorch job that `trainprof tune` changes without
touching its code. Each is an environment variable that `tune` sets for a trial; inside the
recorded job the automatic PyTorch instrumentation (`_auto.install`) calls `apply(torch)`,
which sets torch's thread counts, rewrites the arguments of every `DataLoader(...)` the job
creates, and wraps `nn.Module.__call__` so that the model (the outermost module with parameters
that the job calls) gets channels_last, autocast or compile on its first forward and notes
what it is (annotation ``torch.model``, with ``TRAINPROF_TUNE_OBSERVE=1``, which tune sets in
every trial). Nothing here runs unless a ``TRAINPROF_TUNE_*`` variable is set.

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
    kind: str  # "int", "bool" or "choice"
    what: str  # what it sets, in the job's terms
    in_code: str  # how to make the setting permanent in the code ({v}: the value)
    choices: tuple = ()  # a "choice" knob's values
    changes_math: bool = False  # changes what is trained (precision, batch size)


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
        OwnKnob("channels_last", "TRAINPROF_TUNE_CHANNELS_LAST", "bool",
                "model.to(memory_format=torch.channels_last) for a model with 2-D convolutions, "
                "and its 4-D inputs likewise",
                "model.to(memory_format=torch.channels_last); x = x.to(memory_format="
                "torch.channels_last)"),
        OwnKnob("autocast", "TRAINPROF_TUNE_AUTOCAST", "choice",
                "the model's forward under torch.autocast(device, dtype) (off, bf16, fp16)",
                "with torch.autocast(device_type, dtype=torch.{dtype}): out = model(x)",
                choices=("off", "bf16", "fp16"), changes_math=True),
        OwnKnob("compile", "TRAINPROF_TUNE_COMPILE", "choice",
                "torch.compile(model, mode=...) on the model's first forward (off, default, "
                "reduce-overhead, max-autotune, max-autotune-no-cudagraphs)",
                "model.compile(mode=\"{v}\")",
                choices=("off", "default", "reduce-overhead", "max-autotune",
                         "max-autotune-no-cudagraphs")),
        OwnKnob("batch_size", "TRAINPROF_TUNE_BATCH_SIZE", "int",
                "DataLoader(batch_size=N) of every DataLoader that batches by batch_size",
                "DataLoader(..., batch_size={v})", changes_math=True),
    )
}
# Set by `tune` in every trial (the baseline too): the job notes what its model is
# (annotation "torch.model"), which tells whether the model knobs can apply.
OBSERVE_ENV = "TRAINPROF_TUNE_OBSERVE"
MODEL_KNOBS = ("channels_last", "autocast", "compile")

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
    if knob.kind == "choice":
        if t in knob.choices:
            return t
        raise ValueError(f"{knob.name}: {text!r} is not one of {', '.join(knob.choices)}")
    try:
        v = int(t)
    except ValueError:
        raise ValueError(f"{knob.name}: {text!r} is not an integer") from None
    if v < 0 or v > (1 << 20 if knob.name == "batch_size" else 4096) or (
            knob.name in ("torch_threads", "interop_threads", "prefetch_factor", "batch_size")
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
        try:
            out[knob.name] = parse_value(knob, text)
        except ValueError as exc:  # this knob is left as the job has it; the others apply
            _warn(f"ignored: {exc}")
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
    observe = os.environ.get(OBSERVE_ENV) == "1"
    if not settings and not observe:
        return
    model = {k: settings[k] for k in MODEL_KNOBS if k in settings}
    if model or observe:
        _patch_model_call(torch, model)
    if "torch_threads" in settings:
        torch.set_num_threads(settings["torch_threads"])
    if "interop_threads" in settings:
        try:
            torch.set_num_interop_threads(settings["interop_threads"])
        except RuntimeError as exc:  # the inter-op pool has started already
            _warn(f"interop_threads not applied: {exc}")
    loader_keys = {"num_workers", "pin_memory", "prefetch_factor", "persistent_workers",
                   "batch_size"}
    if loader_keys & settings.keys():
        _patch_dataloader_init(torch, {k: v for k, v in settings.items() if k in loader_keys})


def loader_arguments(arguments: dict, settings: dict) -> dict:
    """The DataLoader's keyword arguments with the settings applied, kept consistent the way
    DataLoader checks them (prefetch_factor and persistent_workers need workers)."""
    out = dict(arguments)
    if "batch_size" in settings and (out.get("batch_sampler") is not None
                                     or out.get("batch_size") is None):
        settings = {k: v for k, v in settings.items() if k != "batch_size"}  # not batched by it
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


# ---------------------------------------------------------------------------------------------
# The model: channels_last, autocast, compile


class _Calls:
    local = None  # threading.local: .depth, the module calls open in this thread (the model
    # is the outermost module called)
    seen = None  # weakref.WeakSet of the models prepared


def _model_facts(torch, module) -> dict:
    conv2d = any(isinstance(m, torch.nn.Conv2d) for m in module.modules())
    param = next(module.parameters(), None)
    return {"type": type(module).__name__, "conv2d": conv2d,
            "device": param.device.type if param is not None else "cpu"}


def _prepare_model(torch, module, settings: dict) -> dict:
    """On the model's first forward: applies channels_last and compile to it (each failure a
    one-time warning, the model left as it was); returns what the model now is."""
    facts = _model_facts(torch, module)
    if settings.get("channels_last") and facts["conv2d"]:
        try:
            module.to(memory_format=torch.channels_last)
        except Exception as exc:  # noqa: BLE001
            _warn_once("channels_last", f"channels_last not applied: {exc}")
    mode = settings.get("compile")
    if mode and mode != "off":
        try:
            module.compile(mode=None if mode == "default" else mode)
        except Exception as exc:  # noqa: BLE001
            _warn_once("compile", f"compile not applied: {exc}")
    conv = next((m for m in module.modules() if isinstance(m, torch.nn.Conv2d)), None)
    facts["channels_last"] = bool(
        conv is not None and conv.weight.dim() == 4
        and conv.weight.is_contiguous(memory_format=torch.channels_last)
        and not conv.weight.is_contiguous())
    facts["compile"] = (settings.get("compile") or "off") if getattr(
        module, "_compiled_call_impl", None) is not None else "off"
    facts["autocast"] = settings.get("autocast") or "off"
    return facts


_warned: set = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        _warn(message)


def _patch_model_call(torch, settings: dict) -> None:
    """Wraps nn.Module.__call__: the outermost module called with parameters is the model."""
    import weakref

    Module = torch.nn.Module
    orig = Module.__call__
    if getattr(orig, "_trainprof_tune", False):
        return
    import threading

    _Calls.seen = weakref.WeakSet()
    _Calls.local = threading.local()
    tls = _Calls.local
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (
        lambda: False)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(settings.get("autocast") or "")
    channels_last = bool(settings.get("channels_last"))
    models: dict = {}  # id -> (facts) of the models seen

    def __call__(self, *args, **kwargs):
        if is_compiling() or getattr(tls, "depth", 0):
            return orig(self, *args, **kwargs)
        facts = models.get(id(self)) if self in _Calls.seen else None
        if facts is None:
            if next(self.parameters(), None) is None:  # not a model: a parameterless layer
                return orig(self, *args, **kwargs)
            try:
                facts = _prepare_model(torch, self, settings)
            except Exception as exc:  # noqa: BLE001
                _warn_once("model", f"model settings not applied: {exc}")
                facts = {"type": type(self).__name__, "conv2d": False, "device": "cpu",
                         "channels_last": False, "compile": "off", "autocast": "off"}
            _Calls.seen.add(self)
            models[id(self)] = facts
            try:
                from trainprof import _recorder as R

                R.annotate(**{"torch.model": facts})
            except Exception:  # noqa: BLE001
                pass
        if channels_last and facts.get("channels_last"):
            try:
                args = tuple(a.contiguous(memory_format=torch.channels_last)
                             if isinstance(a, torch.Tensor) and a.dim() == 4 else a for a in args)
            except Exception as exc:  # noqa: BLE001
                _warn_once("channels_last_input", f"channels_last inputs not applied: {exc}")
        tls.depth = 1
        try:
            if dtype is not None and facts.get("autocast") != "off":
                try:
                    ctx = torch.autocast(facts.get("device", "cpu"), dtype=dtype)
                except Exception as exc:  # noqa: BLE001
                    _warn_once("autocast", f"autocast not applied: {exc}")
                    facts["autocast"] = "off"
                    return orig(self, *args, **kwargs)
                with ctx:
                    return orig(self, *args, **kwargs)
            return orig(self, *args, **kwargs)
        finally:
            tls.depth = 0

    __call__._trainprof_tune = True  # type: ignore[attr-defined]
    __call__._trainprof_orig = orig  # type: ignore[attr-defined]
    Module.__call__ = __call__
