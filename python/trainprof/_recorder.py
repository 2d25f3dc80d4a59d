"""The explicit instrumentation API (trainprof.start/stop/step/span/mark/annotate) and the
state the automatic PyTorch instrumentation shares with it.

Hot path: spans and the automatic instrumentation's records go straight into the C++
recorder through trainprof._rec (a C-API extension: no Python frame for `with span(...)`, no
Python-side buffer, no drain thread). Each thread appends to its own buffer there; the
recorder's flusher writes the process store. Nothing here raises into training: misuse warns
once, internal errors are swallowed after one warning.

This module is imported at the start of every Python process of a recorded job: it imports
only what it needs (no NumPy, no pandas).
"""

from __future__ import annotations

import os
import sys
import time
import warnings

from trainprof import _dist
from trainprof import _rec

_perf = time.perf_counter_ns  # CLOCK_MONOTONIC: the recorder's clock, without its offset
_warned: set[str] = set()


class _State:
    """Process-wide recorder state (steps are a process-level notion: spans from any thread carry
    the current step). Mutated by the training thread; read by others without locks. The current
    step and mode are mirrored into _rec (set_step), where spans and records read them."""

    active = False
    run_dir: str | None = None
    step: int | None = None  # the open step's number, or None
    mode: str = ""
    explicit_steps = False  # the user used trainprof.step(): automatic step boundaries stop
    next_step: dict = {}  # mode -> next step number
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


CURRENT = _rec.CURRENT  # default for step/mode: the current step's

# record_span(name, category, start, end, step=CURRENT, mode=CURRENT, args=None): a finished
# span; start/end are perf_counter_ns readings; step=None: no step. A no-op while not recording.
record_span = _rec.record_span
# record_instant(name, category, ts=None, step=CURRENT, mode=CURRENT, args=None)
record_instant = _rec.record_instant


def _json_strings(items) -> str:
    """A JSON array of strings; json itself (6 ms to import) only for strings that need escapes."""
    parts = []
    for item in items:
        text = str(item)
        if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
            parts.append('"' + text + '"')
        else:
            import json

            parts.append(json.dumps(text))
    return "[" + ",".join(parts) + "]"


def _json_args(kwargs) -> str | None:
    if not kwargs:
        return None
    import json

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
    _rec.set_step(n, mode)
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
    record_span("step", "step", start, end, n, mode, args)
    S.step = None
    S.mode = ""
    _rec.set_step(None, "")
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


# ``with trainprof.span("name"):`` or ``@trainprof.span("name")``: a timed region carrying the
# current step and mode; span(name, category="user", **args). Ending a span twice warns once.
# The type is in C (trainprof._rec.Span); decorating goes through _decorate below.
span = _rec.Span


def _decorate(s, func):
    import functools

    name, category, args = s.name, s.category, s.args

    @functools.wraps(func)
    def wrapper(*a, **kw):
        t0 = _perf()
        try:
            return func(*a, **kw)
        finally:
            record_span(name, category, t0, _perf(), CURRENT, CURRENT, args)

    return wrapper


def mark(name: str, **args) -> None:
    """A user mark: an instant with category "mark" (e.g. "download_start")."""
    record_instant(name, "mark", args=_json_args(args))


def annotate(**kv) -> None:
    """Key/value facts about this process (strings as is, other values as JSON)."""
    if not S.active:
        return
    import json

    for key, value in kv.items():
        try:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            _rec.annotate(str(key), text)
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
        err = _rec.start(
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
    _install_process_hooks()
    try:
        _rec.set_meta("process.argv", _json_strings(sys.argv))
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
    S.active = False
    try:
        err = _rec.stop()
    except Exception as exc:  # noqa: BLE001
        err = str(exc)
    if err:
        warn_once("stop", f"closing the run store failed: {err}")


def flush() -> None:
    """Makes everything recorded so far durable (normally done every flush interval)."""
    if S.active:
        err = _rec.flush()
        if err:
            warn_once("flush", f"flush failed: {err}")


_process_hooks_installed = False


def _after_fork_child() -> None:
    # The recorder forgets the parent's buffered events itself (its own fork handler).
    S.pid = os.getpid()


# Called with the reason ("exception", "exit") before the recorder stops at the process's end,
# so that what is still open (a detail profiler) is stored: callables(reason).
before_stop: list = []


def _run_before_stop(reason: str) -> None:
    for fn in list(before_stop):
        try:
            fn(reason)
        except Exception:  # noqa: BLE001
            pass


def set_exit_cause(text: str) -> None:
    """Records how this process ended (process.exit), e.g. "signal: SIGTERM"."""
    if S.active and S.pid == os.getpid():
        _rec.set_meta("process.exit", text)


def _excepthook(prev):
    def hook(exc_type, exc, tb):
        try:
            if S.active:
                _run_before_stop("exception")
                _rec.set_meta("process.exit", f"exception: {exc_type.__name__}: {exc}")
                stop()
        except Exception:  # noqa: BLE001
            pass
        prev(exc_type, exc, tb)

    return hook


def _at_exit() -> None:
    if S.active and S.pid == os.getpid():
        _run_before_stop("exit")
        try:
            _rec.set_meta("process.exit", "normal")
        except Exception:  # noqa: BLE001
            pass
    stop()


def _register_mp_finalizer(_obj=None) -> None:
    import multiprocessing.util as mp_util

    mp_util.Finalize(None, _at_exit, exitpriority=-100)


def _flush_at_multiprocessing_exit() -> None:
    """multiprocessing children (DataLoader workers) end with os._exit: atexit never runs there,
    only multiprocessing's finalizers. Each child process registers one that flushes and closes
    its store, so a worker's last events are kept. Registered once multiprocessing.util is
    imported (importing it here would cost every process ~10 ms at startup)."""

    def register(mp_util) -> None:
        try:
            # Runs in every multiprocessing child (fork: inherited; spawn/forkserver: the
            # startup hook registers it again) after the child cleared its inherited finalizers.
            mp_util.register_after_fork(S, _register_mp_finalizer)
        except Exception as exc:  # noqa: BLE001
            warn_once("mp_finalizer", f"DataLoader workers may lose their last events: {exc}")

    when_imported("multiprocessing.util", register)


class _ImportWatcher:
    """A meta path finder that finds nothing itself: it runs callbacks right after the modules
    it watches finish executing (their first import), e.g. to instrument torch once imported.
    It leaves sys.meta_path when it has nothing left to watch."""

    def __init__(self):
        self.callbacks: dict = {}

    def find_spec(self, fullname, path, target=None):
        callbacks = self.callbacks.pop(fullname, None)
        if callbacks is None:
            return None
        if not self.callbacks and self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or isinstance(loader, type) or not hasattr(loader, "exec_module"):
            return spec  # a built-in or frozen module: nothing of ours to wrap
        orig_exec = loader.exec_module

        def exec_module(module):
            orig_exec(module)
            for callback in callbacks:
                try:
                    callback(module)
                except Exception as exc:  # noqa: BLE001
                    warn_once(f"import_hook_{fullname}", f"after importing {fullname}: {exc}")

        loader.exec_module = exec_module
        return spec


_watcher = _ImportWatcher()


def when_imported(name: str, callback) -> None:
    """callback(module) now if `name` is imported already, else right after its import."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    _watcher.callbacks.setdefault(name, []).append(callback)
    if _watcher not in sys.meta_path:
        sys.meta_path.insert(0, _watcher)


def _install_process_hooks() -> None:
    global _process_hooks_installed
    if _process_hooks_installed:
        return
    _process_hooks_installed = True
    import atexit

    os.register_at_fork(after_in_child=_after_fork_child)
    atexit.register(_at_exit)
    _flush_at_multiprocessing_exit()
    sys.excepthook = _excepthook(sys.excepthook)
