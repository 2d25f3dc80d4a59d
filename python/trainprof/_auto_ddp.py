"""DistributedDataParallel's gradient all-reduces as collectives (zero-code PyTorch capture).

DDP's reducer (C++) all-reduces gradient buckets itself, past ``torch.distributed``'s Python
functions, so the wrappers in ``_auto`` never see them. Here every DDP model over a gloo process
group gets a communication hook (``register_comm_hook``) when it is built: the hook launches the
bucket's all-reduce exactly as DDP's own default path does (scale by 1/world size, then sum;
same values, same order) and notes when it was launched and when it completed.

What is recorded is the time the training waits for them: from the launch of the iteration's
last bucket (the backward's gradients are all computed then) to the completion of the last
all-reduce, cut into one ``all_reduce`` span per bucket (category ``collective``, args
``ddp_bucket``, ``bytes``, ``hook``), never overlapping one another. Communication that
overlaps the backward's compute is not waiting and is not counted. This is what the explicit
``dist.all_reduce`` spans measure too (the blocking call's time), and what StragglerRank
subtracts from a rank's step to find its own time.

The user's own hook wins: one registered after the model is built runs inside the same timing
(``register_comm_hook`` replaces our default; a second registration fails as it would without
trainprof); ``_register_builtin_comm_hook`` maps ALLREDUCE to the same default and FP16_COMPRESS
to PyTorch's Python equivalent. Models this cannot apply to are left alone: other backends
(NCCL's futures complete when the work is queued, not done), DDP's mixed precision, optimizer in
backward or any hook DDP registered itself, the Python reducer (compiled autograd), sparse
gradients. Any failure of ours leaves the model with DDP's own path and warns once.

``TRAINPROF_DDP_COLLECTIVES=0`` turns this off (DDP's own path, nothing recorded).

Limit: under ``model.join(divide_by_initial_world_size=False)`` with uneven inputs DDP divides
by the ranks still active; our default divides by the world size.
"""

from __future__ import annotations

import os
import threading
import weakref

from trainprof import _recorder as R
from trainprof._recorder import S, _perf, warn_once


class _Flag:
    in_hook = 0  # >0 while our hook runs (the collective wrappers then record nothing)


F = _Flag()


_timers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # DDP model -> its _Timer


class _Timer:
    """One DDP model's hook state: the hook it runs (ours or the user's) and the buckets of the
    iteration in flight. Completions arrive on gloo's threads."""

    __slots__ = ("hook", "state", "hook_name", "user", "lock", "launched", "done", "last_launch",
                 "__weakref__")

    def __init__(self, hook, state, hook_name):
        self.hook = hook
        self.state = state
        self.hook_name = hook_name
        self.user = False  # the user replaced our default
        self.lock = threading.Lock()
        self.launched = 0
        self.done: list = []  # (launch_ns, end_ns, bucket index, bytes)
        self.last_launch = None  # launch of the iteration's last bucket


def _launch_default(process_group, bucket):
    """DDP's own path without a hook: gradients scaled by 1/world size (a multiply, as the
    reducer does while copying them into the bucket), then summed by one all-reduce. The
    all-reduce's own future (its value: [the bucket])."""
    import torch.distributed as dist

    tensor = bucket.buffer()
    tensor.mul_(1.0 / process_group.size())
    all_reduce = getattr(dist.all_reduce, "__wrapped__", dist.all_reduce)
    return all_reduce(tensor, group=process_group, async_op=True).get_future()


def _default_allreduce(process_group, bucket):
    """The default as a hook (what the timed hook runs unless the user gave one)."""
    return _launch_default(process_group, bucket).then(lambda fut: fut.value()[0])


def _emit(t: _Timer) -> None:
    """Called with the lock held once every bucket launched this iteration completed and the
    last one was among them: the waiting time after the last launch, one span per bucket."""
    cursor = t.last_launch
    for launch, end, index, nbytes in sorted(t.done, key=lambda d: d[1]):
        start = max(cursor, launch)
        if end > start:
            R.record_span("all_reduce", "collective", start, end,
                          args='{"ddp_bucket":%d,"bytes":%d,"hook":"%s"}' % (index, nbytes,
                                                                            t.hook_name))
            cursor = end
    t.done = []
    t.launched = 0
    t.last_launch = None


def _completed(t: _Timer, launch: int, index: int, nbytes: int, fut, first: bool):
    end = _perf()
    try:
        with t.lock:
            t.done.append((launch, end, index, nbytes))
            if t.last_launch is not None and len(t.done) >= t.launched:
                _emit(t)
    except Exception as exc:  # noqa: BLE001
        warn_once("ddp_time", f"DDP all-reduce timing failed: {exc}")
    # the hook's result (an error of its own is raised here, as before); the default's
    # all-reduce future holds [bucket]: one callback does both
    return fut.value()[0] if first else fut.value()


def _timed_hook(t: _Timer, bucket):
    if not S.active:
        return t.hook(t.state, bucket)
    launch = _perf()
    default = t.hook is _default_allreduce
    if default:  # its own callback is folded into ours: one Python callback per bucket
        fut = _launch_default(t.state, bucket)
    else:
        F.in_hook += 1
        try:
            fut = t.hook(t.state, bucket)
        finally:
            F.in_hook -= 1
    try:
        index = bucket.index()
        buf = bucket.buffer()
        nbytes = buf.numel() * buf.element_size()
        with t.lock:
            if t.last_launch is not None:  # an iteration that never completed (its backward
                t.done, t.launched, t.last_launch = [], 0, None  # failed): start afresh
            t.launched += 1
            if bucket.is_last():
                t.last_launch = _perf()
        return fut.then(lambda f: _completed(t, launch, index, nbytes, f, default))
    except Exception as exc:  # noqa: BLE001
        warn_once("ddp_time", f"DDP all-reduce timing failed: {exc}")
        return fut.then(lambda f: f.value()[0]) if default else fut


def _has_sparse(module, torch) -> bool:
    nn = torch.nn
    return any(isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and getattr(m, "sparse", False)
               for m in module.modules())


def _applies(ddp, torch) -> str | None:
    """Why our hook cannot go on this model, or None."""
    import torch.distributed as dist

    if getattr(ddp, "reducer", None) is None:
        return "no reducer"
    if getattr(ddp, "_use_python_reducer", False):
        return "the Python reducer"
    if getattr(ddp, "mixed_precision", None) is not None:
        return "DDP mixed precision"
    if getattr(ddp, "_delay_all_reduce_all_params", False):
        return "all-reduce delayed"
    if getattr(ddp, "_comm_hooks", None):
        return "a hook DDP registered"
    if dist.get_backend(ddp.process_group) != "gloo":
        return "not gloo"
    if _has_sparse(ddp.module, torch):
        return "sparse gradients"
    return None


def patch_ddp(torch) -> None:
    try:
        import torch.distributed as dist
    except Exception:  # noqa: BLE001
        return
    if not dist.is_available():
        return
    DDP = torch.nn.parallel.DistributedDataParallel
    if getattr(DDP.__init__, "_trainprof", False):
        return
    orig_init = DDP.__init__
    orig_register = DDP.register_comm_hook
    orig_builtin = getattr(DDP, "_register_builtin_comm_hook", None)

    off = os.environ.get("TRAINPROF_DDP_COLLECTIVES", "1") == "0"

    def __init__(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        if not S.active or off:
            return
        try:
            if _applies(self, torch) is not None:
                return
            timer = _Timer(_default_allreduce, self.process_group, "default")
            # Straight to the reducer: not in DDP's own list of hooks (pickled with the model;
            # ours holds a lock and the process group) nor in its logs.
            dist._register_comm_hook(self.reducer, timer, _timed_hook)
            _timers[self] = timer
        except Exception as exc:  # noqa: BLE001
            warn_once("ddp_hook", f"DDP's gradient all-reduces are not recorded: {exc}")

    def register_comm_hook(self, state, hook):
        t = _timers.get(self)
        if t is None or t.user:
            return orig_register(self, state, hook)
        # What DDP does, but the reducer already runs our hook: the user's goes inside it.
        self._check_comm_hook(hook)  # DDP's checks of the user's hook, DDP's errors
        self.logger._set_comm_hook_name(hook.__qualname__)
        self._comm_hooks.append((hook, state))
        t.hook, t.state, t.user = hook, state, True
        t.hook_name = _name(hook)
        return None

    def _register_builtin_comm_hook(self, comm_hook_type):
        t = _timers.get(self)
        if t is None or t.user:
            return orig_builtin(self, comm_hook_type)
        if comm_hook_type == dist.BuiltinCommHookType.ALLREDUCE:
            hook = _default_allreduce
        elif comm_hook_type == dist.BuiltinCommHookType.FP16_COMPRESS:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            hook = default_hooks.fp16_compress_hook
        else:
            return orig_builtin(self, comm_hook_type)
        self.logger._set_comm_hook_name(str(comm_hook_type))
        t.hook, t.state, t.user = hook, self.process_group, True
        t.hook_name = str(comm_hook_type).rsplit(".", 1)[-1].lower()
        return None

    __init__._trainprof = True  # type: ignore[attr-defined]
    __init__.__wrapped__ = orig_init  # type: ignore[attr-defined]
    DDP.__init__ = __init__
    DDP.register_comm_hook = register_comm_hook
    if orig_builtin is not None:
        DDP._register_builtin_comm_hook = _register_builtin_comm_hook


def _name(hook) -> str:
    name = getattr(hook, "__qualname__", None) or type(hook).__name__
    # JSON-safe and bounded (it goes into every span's args)
    return "".join(c for c in str(name) if c.isalnum() or c in "._<>-")[:64]
