"""Automatic PyTorch instrumentation: steps, mode, data wait, forward, backward, optimizer,
DataLoader configuration, collectives (DDP's own: _auto_ddp), CUDA step time; installed when
torch is imported.

Step model: a training step is one optimizer step. It opens at the first training activity after
the previous step closed (waiting for a batch, a forward in training mode, a backward) and closes
when ``Optimizer.step`` returns, so gradient accumulation's micro-batches (each a forward and a
backward) land inside one step; the step span's args count them. A forward outside a training
step in eval mode (``module.eval()``, ``torch.no_grad()`` or ``torch.inference_mode()``) is one
eval step, spanning its batch wait and its forward. When the user marks steps with
``trainprof.step()``, those are the steps and only the parts are recorded automatically.

Compiled models: every wrapper returns straight to PyTorch when ``torch.compiler.is_compiling()``
so dynamo traces through it without a graph break; the outermost module call (outside the
compiled region) is what gets timed.
"""

from __future__ import annotations

import sys
import weakref

from trainprof import _recorder as R
from trainprof._recorder import S, _perf, warn_once

_installed = False


class _A:
    """State of the automatic instrumentation (the training thread mutates it)."""

    depth = 0  # >0 inside a timed outermost module call
    step_open = False  # an automatic training step is open
    step_start = 0
    micro_batches = 0
    pending_wait: tuple | None = None  # (start, end) of a batch wait not yet given a step
    in_optimizer = 0
    opt_start = 0
    opt_nested_ns = 0  # forward/backward time inside optimizer.step (closures, e.g. Lightning)
    cuda_start = None
    cuda_pending: list = []
    loaders_seen = 0
    graphs = 0  # graphs torch.compile (dynamo) had compiled at the end of the previous step
    threads_noted = False  # torch's thread counts annotated (at the first training step)
    health_every = 10  # training health sampled every this many training steps (0: off)
    health_step = None  # the sampled step whose losses are in health_losses
    health_losses: list = []  # detached losses passed to backward in that step
    health_grad_norm = None  # the gradient norm of that step (a device tensor)
    health_scaled = None  # (tensor GradScaler.scale returned, its scale) on a sampled step
    health_pending: list = []  # (step, ts, loss, grad_norm, cuda event or None) not yet read


A = _A()


def _auto_steps() -> bool:
    return not S.explicit_steps


def _open_train_step(start: int) -> None:
    if not _auto_steps() or A.step_open:
        return
    if S.step is not None:  # an eval step is not open across calls; anything else: leave it
        return
    if A.in_optimizer:  # a closure inside optimizer.step (e.g. Lightning): the step began there
        start = min(start, A.opt_start)
    A.step_open = True
    A.step_start = start
    A.micro_batches = 0
    if not A.threads_noted:
        _note_torch_threads()
    R.begin_step("train")
    _cuda_step_begin()


def _note_torch_threads() -> None:
    """Once, when training starts: the threads torch runs operators on (set by then), which
    `trainprof analyze` compares with the cores."""
    A.threads_noted = True
    try:
        torch = sys.modules["torch"]
        R.annotate(**{"torch.num_threads": torch.get_num_threads(),
                      "torch.num_interop_threads": torch.get_num_interop_threads()})
    except Exception as exc:  # noqa: BLE001
        warn_once("torch_threads", f"could not read torch's thread counts: {exc}")


def _close_train_step(end: int) -> None:
    if not A.step_open:
        return
    A.step_open = False
    _note_compiles(A.step_start, end)
    R.end_step(A.step_start, end, '{"micro_batches":%d}' % A.micro_batches)
    _cuda_step_end(A.step_start)


def _note_compiles(start: int, end: int) -> None:
    """torch.compile: when dynamo compiled new graphs during this step (its counter of unique
    graphs grew), a span over the step, category "compile": named "compile" for the first graphs,
    "recompile" after (a new shape, a guard that failed), with the new and total graph counts.
    Only when dynamo is already loaded (never imported here); one dict lookup a step."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return
    try:
        n = int(utils.counters["stats"]["unique_graphs"])
    except Exception:  # noqa: BLE001 - another torch's counters: no compile events
        return
    if n > A.graphs:
        name = "compile" if A.graphs == 0 else "recompile"
        R.record_span(name, "compile", start, end,
                      args='{"new_graphs":%d,"graphs":%d}' % (n - A.graphs, n))
    A.graphs = n


def _flush_pending_wait(step=R.CURRENT, mode=R.CURRENT) -> None:
    w = A.pending_wait
    if w is None:
        return
    A.pending_wait = None
    R.record_span("data_wait", "data_wait", w[0], w[1], step=step, mode=mode)


# ---------------------------------------------------------------------------------------------
# Forward: the outermost nn.Module call.


def _training_mode(module, torch) -> bool:
    return bool(module.training) and torch.is_grad_enabled() and not torch.is_inference_mode_enabled()


def _on_forward(module, torch, t0: int, t1: int) -> None:
    if A.in_optimizer:
        A.opt_nested_ns += t1 - t0
    if S.explicit_steps or S.step is not None and not A.step_open:
        # inside a user step (or between them): a part of it
        _flush_pending_wait()
        R.record_span("forward", "forward", t0, t1)
        return
    training = _training_mode(module, torch)
    if training or A.step_open:
        start = A.pending_wait[0] if A.pending_wait else t0
        _open_train_step(min(start, t0))
        _flush_pending_wait()
        R.record_span("forward", "forward", t0, t1)
        return
    # eval: one eval step = its batch wait + this forward
    start = A.pending_wait[0] if A.pending_wait else t0
    n = R.begin_step("eval")
    _flush_pending_wait(step=n, mode="eval")
    R.record_span("forward", "forward", t0, t1, step=n, mode="eval")
    R.end_step(start, t1)


def _patch_module_call(torch) -> None:
    Module = torch.nn.Module
    orig = Module.__call__
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)

    def __call__(self, *args, **kwargs):
        if A.depth or not S.active or is_compiling():
            return orig(self, *args, **kwargs)
        A.depth = 1
        t0 = _perf()
        try:
            return orig(self, *args, **kwargs)
        finally:
            t1 = _perf()
            A.depth = 0
            try:
                _on_forward(self, torch, t0, t1)
            except Exception as exc:  # noqa: BLE001
                warn_once("forward", f"forward instrumentation failed: {exc}")

    __call__._trainprof_orig = orig  # type: ignore[attr-defined]
    Module.__call__ = __call__


# ---------------------------------------------------------------------------------------------
# Backward


def _patch_backward(torch) -> None:
    autograd = torch.autograd
    orig = autograd.backward
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)

    def backward(*args, **kwargs):
        if not S.active or A.depth or is_compiling():
            return orig(*args, **kwargs)
        t0 = _perf()
        try:
            return orig(*args, **kwargs)
        finally:
            t1 = _perf()
            try:
                if A.in_optimizer:
                    A.opt_nested_ns += t1 - t0
                if not S.explicit_steps and S.step is None:
                    _open_train_step(t0)
                A.micro_batches += 1
                _flush_pending_wait()
                R.record_span("backward", "backward", t0, t1)
                if A.health_every:
                    _note_loss(args[0] if args else kwargs.get("tensors"), torch)
            except Exception as exc:  # noqa: BLE001
                warn_once("backward", f"backward instrumentation failed: {exc}")

    autograd.backward = backward


# ---------------------------------------------------------------------------------------------
# Optimizer: global step hooks (torch >= 2.0).


def _opt_enter(optimizer=None) -> None:
    if A.in_optimizer == 0:
        A.opt_start = _perf()
        A.opt_nested_ns = 0
        # Inside opt.step()'s time, as a user's timer around it sees it (sampled steps only).
        if A.health_every and optimizer is not None:
            try:
                _note_grad_norm(optimizer)
            except Exception as exc:  # noqa: BLE001
                warn_once("grad_norm", f"the gradient norm is not recorded: {exc}")
    A.in_optimizer += 1


def _opt_exit(optimizer) -> None:
    if A.in_optimizer == 0:
        return
    A.in_optimizer -= 1
    if A.in_optimizer:
        return
    t1 = _perf()
    try:
        if not S.explicit_steps and S.step is None:
            _open_train_step(A.opt_start)
        # Time spent in forward/backward run by a closure inside step() is theirs, not the
        # optimizer's: the span keeps its start and is shortened by that time.
        exclusive = max(0, t1 - A.opt_start - A.opt_nested_ns)
        R.record_span("optimizer.step", "optimizer", A.opt_start, A.opt_start + exclusive,
                      args=_optimizer_args(optimizer))
        health = _take_health(t1) if A.health_every else None
        _close_train_step(t1)
        if health is not None or A.health_pending:
            _health_resolve(health, block=False)
    except Exception as exc:  # noqa: BLE001
        warn_once("optimizer", f"optimizer instrumentation failed: {exc}")


_OPTIMIZER_ARGS: dict = {}  # optimizer class -> its span args (one json.dumps per class)


def _optimizer_args(optimizer) -> str:
    cls = type(optimizer)
    args = _OPTIMIZER_ARGS.get(cls)
    if args is None:
        import json

        args = _OPTIMIZER_ARGS[cls] = json.dumps({"optimizer": cls.__name__})
    return args


def _install_optimizer_hooks(torch) -> None:
    """Times Optimizer.step from outside torch's own step wrapper (so its hook and profiler
    bookkeeping count as optimizer time, as a user's timer around opt.step() sees it); falls
    back to the global step hooks where that wrapper does not exist."""
    import functools
    import importlib

    opt = importlib.import_module("torch.optim.optimizer")
    Optimizer = opt.Optimizer
    orig_phs = getattr(Optimizer, "profile_hook_step", None)
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)
    if orig_phs is not None:

        def profile_hook_step(func):
            wrapped = orig_phs(func)

            @functools.wraps(wrapped)
            def step(*args, **kwargs):
                if not S.active or is_compiling():
                    return wrapped(*args, **kwargs)
                _opt_enter(args[0] if args else None)
                try:
                    return wrapped(*args, **kwargs)
                finally:
                    _opt_exit(args[0] if args else None)

            return step

        Optimizer.profile_hook_step = staticmethod(profile_hook_step)
        return

    def pre(optimizer, args, kwargs):
        if S.active:
            _opt_enter(optimizer)

    def post(optimizer, args, kwargs):
        if S.active:
            _opt_exit(optimizer)

    opt.register_optimizer_step_pre_hook(pre)
    opt.register_optimizer_step_post_hook(post)


# ---------------------------------------------------------------------------------------------
# Training health: the loss passed to backward and the total gradient norm before the optimizer
# step, on every `health_every`-th training step (step number % health_every == 0). Nothing is
# read from the device on the other steps; on a sampled step the values are computed on the
# device (a mean of the step's micro-batch losses, the 2-norm of all gradients as
# torch.nn.utils.clip_grad_norm_ computes it) and read once they are ready: on CPU at once, on
# CUDA when an event recorded after them has completed (polled at later steps, never waited
# for, except at exit). Stored as framework metrics train_loss and grad_norm (R.record_metric:
# annotation metric.NAME and an instant of category "metric" with the sampled step's number).

_MAX_LOSSES_PER_STEP = 64  # micro-batch losses kept for one sampled step
_MAX_HEALTH_PENDING = 64  # sampled steps whose values the device has not finished yet


def _health_step():
    """The current training step's number when it is sampled, else None."""
    n = S.step
    if n is None or S.mode != "train" or n % A.health_every:
        return None
    return n


def _note_loss(loss, torch) -> None:
    n = _health_step()
    scaled, A.health_scaled = A.health_scaled, None
    if n is None or not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        return
    if A.health_step != n:
        A.health_step = n
        A.health_losses = []
        A.health_grad_norm = None
    if len(A.health_losses) < _MAX_LOSSES_PER_STEP:
        value = loss.detach()
        if scaled is not None and scaled[0] is loss:  # scaler.scale(loss).backward(): unscaled
            value = value.float() / scaled[1].to(value.device)
        A.health_losses.append(value)


def _patch_grad_scaler(torch) -> None:
    """GradScaler.scale(loss) multiplies the loss by the scale before backward: on a sampled
    step the scaled tensor and its scale are noted (no sync) so that train_loss is the loss."""
    try:
        from torch.amp.grad_scaler import GradScaler
    except Exception:  # noqa: BLE001 - an older torch: scaled losses stay scaled
        return
    orig = GradScaler.scale
    if getattr(orig, "_trainprof", False):
        return

    def scale(self, outputs):
        out = orig(self, outputs)
        try:
            if A.health_every and S.active and _health_step() is not None and \
                    isinstance(out, torch.Tensor) and out is not outputs and \
                    getattr(self, "_scale", None) is not None:
                A.health_scaled = (out, self._scale.detach())
        except Exception as exc:  # noqa: BLE001
            warn_once("grad_scaler", f"the scaled loss is not unscaled: {exc}")
        return out

    scale._trainprof = True  # type: ignore[attr-defined]
    scale.__wrapped__ = orig  # type: ignore[attr-defined]
    GradScaler.scale = scale


def _note_grad_norm(optimizer) -> None:
    """The total 2-norm of the gradients the optimizer is about to apply (on the device)."""
    n = _health_step()
    if n is None:
        return
    torch = sys.modules["torch"]
    groups: dict = {}
    for group in getattr(optimizer, "param_groups", ()):
        for p in group.get("params", ()):
            g = getattr(p, "grad", None)
            if g is not None and not g.is_sparse:
                groups.setdefault((g.device, g.dtype), []).append(g.detach())
    if not groups:
        return
    with torch.no_grad():
        norms = []
        foreach_norm = getattr(torch, "_foreach_norm", None)
        for (device, _dtype), grads in groups.items():
            if foreach_norm is not None and device.type in ("cuda", "cpu"):
                norms.extend(foreach_norm(grads, 2.0))
            else:
                norms.extend(torch.linalg.vector_norm(g, 2.0) for g in grads)
        first = norms[0].device
        total = torch.linalg.vector_norm(torch.stack([x.to(first) for x in norms]), 2.0)
    if A.health_step != n:
        A.health_step = n
        A.health_losses = []
    A.health_grad_norm = total


def _take_health(ts: int):
    """At the end of a sampled step: (step, ts, loss, grad norm, event) to read, or None."""
    n = A.health_step
    if n is None or n != S.step:
        return None
    losses, grad_norm = A.health_losses, A.health_grad_norm
    A.health_step, A.health_losses, A.health_grad_norm = None, [], None
    if not losses and grad_norm is None:
        return None
    torch = sys.modules["torch"]
    loss = None
    if losses:
        with torch.no_grad():
            loss = losses[0].float() if len(losses) == 1 else \
                torch.stack([x.float().to(losses[0].device) for x in losses]).mean()
    event = None
    devices = [t.device for t in (loss, grad_norm) if t is not None]
    if any(d.type == "cuda" for d in devices):
        event = torch.cuda.Event()
        event.record()
    return (n, ts, loss, grad_norm, event)


def _health_resolve(new, block: bool) -> None:
    """Stores the values of the sampled steps whose device work has finished (all when block)."""
    if new is not None:
        A.health_pending.append(new)
    keep = []
    for item in A.health_pending:
        n, ts, loss, grad_norm, event = item
        if event is not None and not block and not event.query():
            keep.append(item)
            continue
        if event is not None and block:
            event.synchronize()
        for name, value in (("train_loss", loss), ("grad_norm", grad_norm)):
            if value is not None:
                R.record_metric(name, float(value.item()), step=n, ts=ts, mode="train")
    if len(keep) > _MAX_HEALTH_PENDING:
        warn_once("health_pending", "training-health values were dropped: the device is "
                                    f"more than {_MAX_HEALTH_PENDING} sampled steps behind")
        keep = keep[-_MAX_HEALTH_PENDING:]
    A.health_pending = keep


def _health_every_from_env() -> int:
    import os

    text = os.environ.get("TRAINPROF_HEALTH_EVERY", "").strip()
    if not text:
        return 10
    try:
        every = int(text)
        if every < 0:
            raise ValueError(text)
        return every
    except ValueError:
        warn_once("health_every", f"TRAINPROF_HEALTH_EVERY={text!r} is not a step count "
                                  "(0 = off); sampling every 10 steps")
        return 10


# ---------------------------------------------------------------------------------------------
# DataLoader: time waiting for each batch, and the loader's configuration.


def _loader_config(loader) -> dict:
    cfg = {}
    for key in ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "batch_size",
                "drop_last"):
        value = getattr(loader, key, None)
        cfg[key] = value if isinstance(value, (int, float, bool, str, type(None))) else str(value)
    cfg["dataset"] = type(getattr(loader, "dataset", None)).__name__
    cfg["sampler"] = type(getattr(loader, "sampler", None)).__name__
    return cfg


def _patch_dataloader(torch) -> None:
    dl = torch.utils.data.dataloader
    BaseIter = dl._BaseDataLoaderIter
    orig_next = BaseIter.__next__
    orig_init = BaseIter.__init__
    seen = weakref.WeakSet()

    def __init__(self, loader, *args, **kwargs):
        orig_init(self, loader, *args, **kwargs)
        try:
            if S.active and loader not in seen:
                seen.add(loader)
                index = A.loaders_seen
                A.loaders_seen += 1
                config = _loader_config(loader)
                R.annotate(**{f"dataloader.{index}": config})
                # what the Dataloader rule reads (its evidence shows the loader's settings)
                import json

                R.record_instant("dataloader_init", "dataloader", step=None, mode="",
                                 args=json.dumps(dict(config, loader=index)))
        except Exception as exc:  # noqa: BLE001
            warn_once("loader_config", f"could not read the DataLoader configuration: {exc}")

    def __next__(self):
        if not S.active:
            return orig_next(self)
        t0 = _perf()
        try:
            return orig_next(self)
        except StopIteration:
            # the end of an epoch: shutting down is not a batch wait of any step
            R.record_span("data_wait", "data_wait", t0, _perf(), step=None, mode="")
            t0 = None
            raise
        finally:
            t1 = _perf()
            try:
                if t0 is None:
                    pass
                elif S.explicit_steps or (S.step is not None):
                    # inside a (user or automatic) step: gradient accumulation's next micro-batch
                    _flush_pending_wait()
                    R.record_span("data_wait", "data_wait", t0, t1)
                elif A.pending_wait is not None:
                    # two fetches without a forward in between: keep both, the first without a step
                    _flush_pending_wait(step=None, mode="")
                    A.pending_wait = (t0, t1)
                else:
                    A.pending_wait = (t0, t1)
            except Exception as exc:  # noqa: BLE001
                warn_once("data_wait", f"data-wait instrumentation failed: {exc}")

    BaseIter.__init__ = __init__
    BaseIter.__next__ = __next__
    _patch_fetchers(torch)


def _patch_fetchers(torch) -> None:
    """One "dataloader" span per batch a loader process produces: in each worker process for
    num_workers > 0 (forked workers inherit the patch, spawned ones install it at import), in
    the training process for num_workers=0. The Dataloader rule counts the distinct processes
    that load data in parallel from these."""
    import importlib

    fetch = importlib.import_module("torch.utils.data._utils.fetch")
    for cls in (getattr(fetch, "_MapDatasetFetcher", None),
                getattr(fetch, "_IterableDatasetFetcher", None)):
        if cls is None or getattr(cls.fetch, "_trainprof", False):
            continue
        cls.fetch = _wrap_fetch(cls.fetch)


def _wrap_fetch(orig):
    def fetch(self, possibly_batched_index):
        if not S.active:
            return orig(self, possibly_batched_index)
        t0 = _perf()
        try:
            return orig(self, possibly_batched_index)
        finally:
            try:
                R.record_span("fetch", "dataloader", t0, _perf(), step=None, mode="")
            except Exception as exc:  # noqa: BLE001
                warn_once("fetch", f"data-loader instrumentation failed: {exc}")

    fetch._trainprof = True  # type: ignore[attr-defined]
    fetch.__wrapped__ = orig  # type: ignore[attr-defined]
    return fetch


# ---------------------------------------------------------------------------------------------
# Collectives (host-side time of the call) and the rank once the process group exists.

_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                "reduce_scatter_tensor", "broadcast", "barrier", "all_to_all", "all_to_all_single",
                "reduce", "gather", "scatter", "all_gather_object", "broadcast_object_list",
                # what FSDP2 (fully_shard) calls in recent PyTorch (2.10+)
                "all_gather_single", "reduce_scatter_single")


def _patch_distributed(torch) -> None:
    try:
        import torch.distributed as dist
    except Exception:  # noqa: BLE001
        return
    if not dist.is_available():
        return
    is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or (lambda: False)
    from trainprof._auto_ddp import F as ddp_hook

    def wrap(name, orig):
        def collective(*args, **kwargs):
            # inside DDP's communication hook (a user's): the bucket's wait is timed there
            if not S.active or ddp_hook.in_hook or is_compiling():
                return orig(*args, **kwargs)
            t0 = _perf()
            try:
                return orig(*args, **kwargs)
            finally:
                R.record_span(name, "collective", t0, _perf())

        collective.__wrapped__ = orig
        collective.__name__ = name
        return collective

    for name in _COLLECTIVES:
        orig = getattr(dist, name, None)
        if orig is not None and not hasattr(orig, "_trainprof"):
            w = wrap(name, orig)
            w._trainprof = True
            setattr(dist, name, w)

    orig_init = dist.init_process_group

    def init_process_group(*args, **kwargs):
        out = orig_init(*args, **kwargs)
        try:
            if S.active:
                R._rec.set_rank(dist.get_rank(), R._dist.identity()["local_rank"],
                                dist.get_world_size())
        except Exception as exc:  # noqa: BLE001
            warn_once("rank", f"could not read the rank: {exc}")
        return out

    dist.init_process_group = init_process_group


# ---------------------------------------------------------------------------------------------
# CUDA: device-side step time from CUDA events, when CUDA is in use.


def _cuda_step_begin() -> None:
    torch = sys.modules.get("torch")
    A.cuda_start = None
    try:
        if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            A.cuda_start = ev
    except Exception as exc:  # noqa: BLE001
        warn_once("cuda", f"CUDA step timing is off: {exc}")


def _cuda_step_end(host_start: int) -> None:
    if A.cuda_start is None:
        return
    torch = sys.modules["torch"]
    try:
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        A.cuda_pending.append((S.next_step.get("train", 1) - 1, host_start, A.cuda_start, end))
        A.cuda_start = None
        _resolve_cuda(block=False)
    except Exception as exc:  # noqa: BLE001
        warn_once("cuda", f"CUDA step timing is off: {exc}")


def _resolve_cuda(block: bool) -> None:
    """Records a "gpu_step" span for every step whose end event has completed (never waits on
    the device unless block, at exit)."""
    keep = []
    for n, host_start, start, end in A.cuda_pending:
        if block:
            end.synchronize()
        if end.query():
            ms = start.elapsed_time(end)
            R.record_span("step", "gpu_step", host_start, host_start + int(ms * 1e6), step=n,
                          mode="train")
        else:
            keep.append((n, host_start, start, end))
    A.cuda_pending = keep[-1000:]


def finish() -> None:
    """At exit: close an open step's CUDA timings; store the sampled health values."""
    if A.cuda_pending:
        try:
            _resolve_cuda(block=True)
        except Exception:  # noqa: BLE001
            pass
    if A.health_pending:
        try:
            _health_resolve(None, block=True)
        except Exception:  # noqa: BLE001
            pass


# ---------------------------------------------------------------------------------------------
# Installation


def install(torch) -> None:
    global _installed
    if _installed:
        return
    _installed = True
    A.health_every = _health_every_from_env()
    from trainprof import _auto_ddp

    for part in (_patch_module_call, _patch_backward, _install_optimizer_hooks, _patch_dataloader,
                 _patch_distributed, _auto_ddp.patch_ddp, _patch_grad_scaler):
        try:
            part(torch)
        except Exception as exc:  # noqa: BLE001 - one part failing leaves the others working
            warn_once(part.__name__, f"{part.__name__} failed on torch {torch.__version__}: {exc}")
    import os

    if any(k.startswith("TRAINPROF_TUNE_") for k in os.environ):  # a `trainprof tune` trial
        try:
            from trainprof import _tune_knobs

            _tune_knobs.apply(torch)
        except Exception as exc:  # noqa: BLE001
            warn_once("tune", f"the tune settings were not applied: {exc}")
    try:
        from trainprof import _detail

        _detail.install_from_env()
    except Exception as exc:  # noqa: BLE001
        warn_once("detail", f"detailed profiling is off: {exc}")
    import atexit

    atexit.register(finish)


def install_when_imported() -> None:
    """PyTorch's instrumentation once torch is imported, TensorFlow's (_auto_tf) once
    tensorflow is; neither is imported here."""
    try:
        from trainprof import _auto_tf

        _auto_tf.install_when_imported()
    except Exception as exc:  # noqa: BLE001
        warn_once("tf_install", f"TensorFlow instrumentation is off: {exc}")
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "nn"):
        install(torch)
        return
    R.when_imported("torch", install)
