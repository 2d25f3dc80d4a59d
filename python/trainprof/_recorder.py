"""The explicit instrumentation API (trainprof.start/stop/step/span/mark/annotate) and the
state the automatic PyTorch instrumentation shares with it.

Hot path: a span takes two time.perf_counter_ns() readings (CLOCK_MONOTONIC, the recorder's
clock) and appends one tuple to a deque; a daemon thread hands the deque to the C++ recorder
every 0.25 s (and a full deque is handed over at once), and the C++ flusher writes the process
store. Nothing here raises into training: misuse warns once, internal errors are swallowed after
one warning.
"""

from __future__ import annotations

import atexit
import collections
import functools
import json
import os
import sys
import threading
import time
import warnings

from trainprof import _dist

_perf = time.perf_counter_ns
# The kernel thread id of each event. threading.get_native_id() is a gettid system call (a
# sixth of a span's cost on a VM); a thread-local keeps it per thread (and a forked child's
# threads start without it, so it is never stale after fork).
_local = threading.local()


def _tid() -> int:
    try:
        return _local.tid
    except AttributeError:
        tid = _local.tid = threading.get_native_id()
        return tid


# The forking thread is the child's only thread, with a new kernel thread id.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _local.__dict__.pop("tid", None))


MAX_BUFFERED = 1_000_000  # events waiting for the drain thread; more are dropped and counted
DRAIN_AT = 8192  # a deque this long is handed over by the thread that filled it
DRAIN_INTERVAL_S = 0.25

_buf: collections.deque = collections.deque()
_warned: set[str] = set()


class _State:
    """Process-wide recorder state (steps are a process-level notion: spans from any thread carry
    the current step). Mutated by the training thread; read by others without locks."""

    active = False
    run_dir: str | None = None
    step: int | None = None  # the open step's number, or None
    mode: str = ""
    explicit_steps = False  # the user used trainprof.step(): automatic step boundaries stop
    next_step: dict = {}  # mode -> next step number
    dropped = 0
    drain_thread: threading.Thread | None = None
    stop_event: threading.Event | None = None
    step_hooks: list = []  # callables (event, step, mode, start, end) for detail profiling
    pid = 0


S = _State()


def warn_once(key: str, message: str) -> None:
    if key in _warned:
        return
    _warned.add(key)
    try:
        warnings.warn(f"trainprof: {message}", RuntimeWarning, stacklevel=3)
    except Exception:  # noqa: BLE001 - warnings turned into errors must not reach training
        pass


def _core():
    from trainprof import _core as core

    return core


def _push(item: tuple) -> None:
    buf = _buf
    if len(buf) >= DRAIN_AT:
        if len(buf) >= MAX_BUFFERED:
            S.dropped += 1
            return
        buf.append(item)
        drain()
        return
    buf.append(item)


def drain() -> None:
    """Hands buffered events to the C++ recorder (any thread; deque pops are atomic)."""
    buf = _buf
    n = len(buf)
    if n == 0 and S.dropped == 0:
        return
    pop = buf.popleft
    items = []
    try:  # another thread may be draining too: it takes its share
        for _ in range(n):
            items.append(pop())
    except IndexError:
        pass
    try:
        core = _core()
        if S.active:
            core.recorder_submit(items)
        if S.dropped:
            core.recorder_add_counter("dropped_events", S.dropped)
            S.dropped = 0
    except Exception as exc:  # noqa: BLE001
        warn_once("drain", f"could not hand events to the recorder: {exc}")


def _drain_loop(stop: threading.Event) -> None:
    while not stop.wait(DRAIN_INTERVAL_S):
        drain()


def _start_drain_thread() -> None:
    S.stop_event = threading.Event()
    t = threading.Thread(target=_drain_loop, args=(S.stop_event,), name="trainprof-drain", daemon=True)
    t.start()
    S.drain_thread = t


CURRENT = object()  # default for step/mode: the current step's


def record_span(name, category, start, end, step=CURRENT, mode=CURRENT, args=None) -> None:
    """Records a finished span; start/end are perf_counter_ns readings; step=None: no step."""
    if not S.active:
        return
    _push((0, name, category, S.mode if mode is CURRENT else mode, S.step if step is CURRENT else step,
           start, end - start, _tid(), args))


def record_instant(name, category, ts=None, step=CURRENT, mode=CURRENT, args=None) -> None:
    if not S.active:
        return
    _push((1, name, category, S.mode if mode is CURRENT else mode, S.step if step is CURRENT else step,
           _perf() if ts is None else ts, 0, _tid(), args))


def _json_args(kwargs) -> str | None:
    if not kwargs:
        return None
    try:
        return json.dumps(kwargs, default=str)
    except Exception:  # noqa: BLE001
        return json.dumps({k: str(v) for k, v in kwargs.items()})


# ---------------------------------------------------------------------------------------------
# Steps (shared by the explicit API and the automatic instrumentation)


def begin_step(mode: str, number: int | None = None) -> int:
    n = S.next_step.get(mode, 0) if number is None else int(number)
    S.next_step[mode] = n + 1
    S.step = n
    S.mode = mode
    for hook in S.step_hooks:
        try:
            hook("begin", n, mode, None, None)
        except Exception as exc:  # noqa: BLE001
            warn_once("step_hook", f"step hook failed: {exc}")
    return n


def end_step(start: int, end: int, args: str | None = None) -> None:
    n, mode = S.step, S.mode
    if n is None:
        return
    record_span("step", "step", start, end, step=n, mode=mode, args=args)
    S.step = None
    S.mode = ""
    for hook in S.step_hooks:
        try:
            hook("end", n, mode, start, end)
        except Exception as exc:  # noqa: BLE001
            warn_once("step_hook", f"step hook failed: {exc}")


class step:
    """``with trainprof.step(mode="train"):`` one training (or eval/predict) step; numbered
    per mode from 0 unless ``step=`` is given. A step inside a step warns once and is ignored."""

    __slots__ = ("_mode", "_number", "_t0", "_nested")

    def __init__(self, mode: str = "train", step: int | None = None):
        self._mode = mode
        self._number = step
        self._t0 = None
        self._nested = False

    def __enter__(self):
        S.explicit_steps = True
        if S.step is not None:
            warn_once("nested_step", "a step was started inside another step; the inner one is ignored")
            self._nested = True
            return self
        begin_step(self._mode, self._number)
        self._t0 = _perf()
        return self

    def __exit__(self, *exc):
        if self._nested:
            return False
        if self._t0 is None:
            warn_once("step_exit", "a step was ended that was not started")
            return False
        end_step(self._t0, _perf())
        self._t0 = None
        return False


class span:
    """``with trainprof.span("name"):`` or ``@trainprof.span("name")``: a timed region carrying
    the current step and mode. Ending a span twice warns once."""

    __slots__ = ("name", "category", "args", "_t0")

    def __init__(self, name: str, category: str = "user", **args):
        self.name = name
        self.category = category
        self.args = _json_args(args) if args else None
        self._t0 = None

    def __enter__(self):
        self._t0 = _perf()
        return self

    def __exit__(self, exc_type, exc, tb):
        t1 = _perf()
        t0 = self._t0
        if t0 is None:
            warn_once("span_twice", f"span {self.name!r} ended twice (or never started); ignored")
            return False
        self._t0 = None
        if S.active:
            try:
                tid = _local.tid
            except AttributeError:
                tid = _tid()
            item = (0, self.name, self.category, S.mode, S.step, t0, t1 - t0, tid, self.args)
            buf = _buf
            if len(buf) < DRAIN_AT:  # the common case, without a call
                buf.append(item)
            else:
                _push(item)
        return False

    def __call__(self, func):
        name, category, args = self.name, self.category, self.args

        @functools.wraps(func)
        def wrapper(*a, **kw):
            t0 = _perf()
            try:
                return func(*a, **kw)
            finally:
                if S.active:
                    t1 = _perf()
                    _push((0, name, category, S.mode, S.step, t0, t1 - t0, _tid(), args))

        return wrapper


def mark(name: str, **args) -> None:
    """A user mark: an instant with category "mark" (e.g. "download_start")."""
    record_instant(name, "mark", args=_json_args(args))


def annotate(**kv) -> None:
    """Key/value facts about this process (strings as is, other values as JSON)."""
    if not S.active:
        return
    core = _core()
    for key, value in kv.items():
        try:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            core.recorder_annotate(str(key), text)
        except Exception as exc:  # noqa: BLE001
            warn_once("annotate", f"annotate({key}=...) failed: {exc}")


# ---------------------------------------------------------------------------------------------
# Lifecycle


def _default_out() -> str:
    return os.path.join("trainprof-runs", time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-run")


def start(out: str | None = None, node: str | None = None, name: str = "", auto: bool = True,
          flush_interval_s: float = 0.5) -> str | None:
    """Starts recording this process into the run directory ``out`` (default $TRAINPROF_RUN_DIR,
    else trainprof-runs/<time>-run). With ``auto`` the PyTorch instrumentation is installed
    (now, or when torch is imported). Returns the run directory, or None when disabled
    (TRAINPROF_DISABLE=1) or on failure (warned, never raised)."""
    if os.environ.get("TRAINPROF_DISABLE") == "1":
        return None
    if S.active:
        return S.run_dir
    out = out or os.environ.get("TRAINPROF_RUN_DIR") or _default_out()
    ident = _dist.identity()
    try:
        core = _core()
        err = core.recorder_start(
            os.path.abspath(out), node or ident["node"] or "", ident["rank"], ident["local_rank"],
            ident["world_size"], int(flush_interval_s * 1e9),
            os.environ.get("TRAINPROF_RECORDER") != "record", name)
    except Exception as exc:  # noqa: BLE001
        err = str(exc)
    if err:
        warn_once("start", f"recording is off: {err}")
        return None
    S.active = True
    S.run_dir = os.path.abspath(out)
    S.pid = os.getpid()
    _start_drain_thread()
    _install_process_hooks()
    try:
        core.recorder_set_meta("process.argv", json.dumps(sys.argv))
    except Exception:  # noqa: BLE001
        pass
    if auto:
        from trainprof import _auto

        _auto.install_when_imported()
    return S.run_dir


def stop() -> None:
    """Flushes everything and closes this process's store. Idempotent."""
    if not S.active:
        return
    if S.stop_event is not None:
        S.stop_event.set()
    drain()
    S.active = False
    try:
        err = _core().recorder_stop()
    except Exception as exc:  # noqa: BLE001
        err = str(exc)
    if err:
        warn_once("stop", f"closing the run store failed: {err}")


def flush() -> None:
    """Makes everything recorded so far durable (normally done every flush interval)."""
    drain()
    if S.active:
        err = _core().recorder_flush()
        if err:
            warn_once("flush", f"flush failed: {err}")


_process_hooks_installed = False


def _after_fork_child() -> None:
    # The parent's buffered events are the parent's; the drain thread does not exist here.
    _buf.clear()
    S.dropped = 0
    S.pid = os.getpid()
    if S.active:
        _start_drain_thread()


def _excepthook(prev):
    def hook(exc_type, exc, tb):
        try:
            if S.active:
                _core().recorder_set_meta("process.exit", f"exception: {exc_type.__name__}: {exc}")
                stop()
        except Exception:  # noqa: BLE001
            pass
        prev(exc_type, exc, tb)

    return hook


def _at_exit() -> None:
    if S.active and S.pid == os.getpid():
        try:
            _core().recorder_set_meta("process.exit", "normal")
        except Exception:  # noqa: BLE001
            pass
    stop()


def _register_mp_finalizer(_obj=None) -> None:
    import multiprocessing.util as mp_util

    mp_util.Finalize(None, _at_exit, exitpriority=-100)


def _flush_at_multiprocessing_exit() -> None:
    """multiprocessing children (DataLoader workers) end with os._exit: atexit never runs there,
    only multiprocessing's finalizers. Each child process registers one that flushes and closes
    its store, so a worker's last events are kept."""
    try:
        import multiprocessing.util as mp_util

        # Runs in every multiprocessing child (fork: inherited; spawn/forkserver: the startup
        # hook registers it again) after the child cleared its inherited finalizers.
        mp_util.register_after_fork(S, _register_mp_finalizer)
    except Exception as exc:  # noqa: BLE001
        warn_once("mp_finalizer", f"DataLoader workers may lose their last events: {exc}")


def _install_process_hooks() -> None:
    global _process_hooks_installed
    if _process_hooks_installed:
        return
    _process_hooks_installed = True
    os.register_at_fork(after_in_child=_after_fork_child)
    atexit.register(_at_exit)
    _flush_at_multiprocessing_exit()
    sys.excepthook = _excepthook(sys.excepthook)
