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

import math
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
    owns_run = False  # this process created run.json (trainprof.start without `record`)
    sampling = False  # system metrics sampled in this process
    exit_code = None  # what sys.exit() was called with


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


MAX_METRIC_POINTS = 100_000  # per name and process; more are dropped (one warning)
_metric_points: dict = {}


def log_metric(name: str, value, step: int | None = None) -> None:
    """A value the training reports, e.g. ``log_metric("loss", 0.42)``: stored in the run
    (annotation ``metric.NAME``, with its time and the optional step number) for `trainprof
    tune`'s loss curves and for ``Run.logged_metric(NAME)``. Cheap; nothing when not recording."""
    if not S.active:
        return
    if not isinstance(name, str) or not name or len(name) > 128:
        warn_once("log_metric_name", f"log_metric: {name!r} is not a metric name "
                                     f"(a non-empty string of at most 128 characters)")
        return
    try:
        v = float(value)  # also a 0-d tensor or NumPy scalar
    except (TypeError, ValueError):
        warn_once("log_metric_value", f"log_metric({name!r}, {value!r}): not a number")
        return
    n = _metric_points.get(name, 0)
    if n >= MAX_METRIC_POINTS:
        if n == MAX_METRIC_POINTS:
            warn_once("log_metric_many", f"log_metric({name!r}): more than {MAX_METRIC_POINTS} "
                                         f"values; the rest are not stored")
            _metric_points[name] = n + 1
        return
    _metric_points[name] = n + 1
    try:
        record_metric(name, v, step)
    except Exception as exc:  # noqa: BLE001
        warn_once("log_metric", f"log_metric({name!r}) failed: {exc}")


def record_metric(name: str, v: float, step: int | None = None, ts: int | None = None,
                  mode: str | None = None) -> None:
    """Stores one value of a framework metric, for log_metric and the automatic instrumentation
    (train_loss, grad_norm): the annotation ``metric.NAME`` = {"value", "step"} that
    ``Run.logged_metric(NAME)`` reads, and an instant NAME of category "metric" with args
    {"value"} (stamped with pid, rank, step and mode like every event) that the rules read live.
    nan/inf are stored as the strings "nan", "inf", "-inf". `ts`: a perf_counter_ns reading;
    step and mode default to the current step's."""
    text = repr(v) if math.isfinite(v) else '"' + str(v) + '"'
    doc = '{"value":' + text + ("" if step is None else ',"step":%d' % int(step)) + "}"
    _rec.annotate("metric." + name, doc)
    record_instant(name, "metric", ts, CURRENT if step is None else int(step),
                   CURRENT if mode is None else mode, '{"value":' + text + "}")


# ---------------------------------------------------------------------------------------------
# Lifecycle


def _default_out(name: str = "run") -> str:
    return os.path.join("trainprof-runs",
                        time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + (name or "run"))


def _script_name() -> str:
    """The default run name: the script's (train.py -> "train"), else "python"."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    base = os.path.splitext(os.path.basename(argv0))[0]
    return base or "python"


def start(out: str | None = None, node: str | None = None, name: str = "",
          flush_interval_s: float = 0.5, system_metrics: bool = True,
          system_interval_s: float = 0.5, gpus: bool = True) -> str | None:
    """Starts recording this process into the run directory ``out`` (default $TRAINPROF_RUN_DIR,
    else trainprof-runs/<time>-<script>). With ``auto`` (trainprof.start) the PyTorch
    instrumentation is installed (now, or when torch is imported). Returns the run directory, or None when disabled
    (TRAINPROF_DISABLE=1) or on failure (warned, never raised).

    Started without `trainprof record` (a notebook, a Lightning / Hugging Face / Keras callback),
    the run is made complete by this process: its name defaults to the script's, run.json gets
    the command line, and its end time and exit status when the process ends (normally, by an
    uncaught exception, sys.exit(N) or SIGTERM); with ``system_metrics`` the node's system and
    GPU metrics (``gpus``) are sampled every ``system_interval_s`` on a thread of this process
    (by the local rank 0 process of a distributed job), or a warning says why they are off."""
    if os.environ.get("TRAINPROF_DISABLE") == "1":
        return None
    if S.active:
        return S.run_dir
    under_record = os.environ.get("TRAINPROF_RECORDER") == "record"
    name = name or ("" if under_record else _script_name())
    out = out or os.environ.get("TRAINPROF_RUN_DIR") or _default_out(name)
    ident = _dist.identity()
    created = not under_record and not os.path.exists(os.path.join(out, "run.json"))
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
    if created:
        S.owns_run = True
        hold_sigterm()
        _update_run_json(command=[sys.executable, *sys.argv])
        if system_metrics and ident["local_rank"] in (None, 0):  # one sampler per node
            _start_system_sampling(node or ident["node"] or "", system_interval_s, gpus)
        elif not system_metrics:
            annotate(**{"system_metrics": "off (trainprof.start(system_metrics=False))"})
    return S.run_dir


def _update_run_json(**fields) -> None:
    """Rewrites this run's run.json with `fields` (only a run this process created): read, update,
    write a private temporary file beside it (created exclusively), rename over."""
    import json
    import tempfile

    path = os.path.join(S.run_dir or "", "run.json")
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
        for key, value in fields.items():
            if key == "command" and meta.get("command"):
                continue  # keep what the run was started with
            meta[key] = value
        fd, tmp = tempfile.mkstemp(prefix=".run.json.", dir=S.run_dir)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(meta, f, indent=2, sort_keys=True)
                f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception as exc:  # noqa: BLE001
        warn_once("run_json", f"could not update run.json: {exc}")


def _start_system_sampling(node: str, interval_s: float, gpus: bool) -> None:
    try:
        from trainprof import _core
        import json

        with open(os.path.join(S.run_dir, "run.json"), encoding="utf-8") as f:
            start_ns = int(json.load(f).get("start_ns") or time.time_ns())
        err = _core.start_system_sampling(S.run_dir, node, int(interval_s * 1e9), gpus,
                                          os.getpid(), start_ns)
    except Exception as exc:  # noqa: BLE001
        err = str(exc)
    if err:
        warn_once("system_sampling", f"system metrics are off: {err}")
        annotate(**{"system_metrics": f"off: {err}"})
        return
    S.sampling = True


def _close_run(exit_status: int) -> None:
    """At this process's end, for a run it created: stop sampling, then close run.json with the
    end time and exit status."""
    if not S.owns_run or S.pid != os.getpid():
        return
    S.owns_run = False
    end_ns = time.time_ns()
    if S.sampling:
        S.sampling = False
        try:
            from trainprof import _core

            _core.stop_system_sampling(end_ns)
        except Exception as exc:  # noqa: BLE001
            warn_once("system_sampling_stop", f"stopping system sampling failed: {exc}")
    _update_run_json(end_ns=end_ns, exit_status=int(exit_status))


def _exit_code(code) -> int:
    """The status sys.exit(code) gives the process."""
    if code is None:
        return 0
    if isinstance(code, bool):
        return int(code)
    if isinstance(code, int):
        return code & 0xFF
    return 1  # a message: printed, status 1


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


# SIGTERM: by default it kills the process at once, with nothing stored of what is open (a
# detail range, the run's end). While someone holds it (an open detail range, a run this
# process created) and the job has no handler of its own, trainprof's handler closes what is
# open, stops the recorder, then restores the default action and re-raises the signal: the job
# still dies of SIGTERM (status 143 under a shell). A job's own handler is left alone (it
# decides how the job ends; atexit closes the rest).
_sigterm_holders = 0


def _on_sigterm(signum, frame) -> None:
    import signal

    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _run_before_stop("SIGTERM")
        set_exit_cause("signal: SIGTERM")
        stop()
        _close_run(128 + signum)
    except Exception:  # noqa: BLE001
        pass
    os.kill(os.getpid(), signal.SIGTERM)


def hold_sigterm() -> None:
    global _sigterm_holders
    _sigterm_holders += 1
    if _sigterm_holders > 1:
        return
    import signal
    import threading

    try:
        if (threading.current_thread() is threading.main_thread() and
                signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
            signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):
        pass


def release_sigterm() -> None:
    global _sigterm_holders
    _sigterm_holders = max(0, _sigterm_holders - 1)
    if _sigterm_holders:
        return
    import signal

    try:
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except (ValueError, OSError):
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
            _close_run(1)
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
    _close_run(_exit_code(S.exit_code))


def _watch_sys_exit() -> None:
    """Remembers the code sys.exit() is called with, for run.json's exit status (atexit cannot
    see it). sys.exit itself is unchanged: it still raises SystemExit(code)."""
    original = sys.exit

    def exit(code=None):  # noqa: A001
        S.exit_code = code
        original(code)

    exit.__doc__ = original.__doc__
    sys.exit = exit


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
    It leaves sys.meta_path when it has nothing left to watch. A lookup without an import
    (importlib.util.find_spec("tensorflow"), as libraries probing for a framework do) leaves
    the callbacks waiting for the real import."""

    def __init__(self):
        self.callbacks: dict = {}

    def _take(self, fullname):
        callbacks = self.callbacks.pop(fullname, None)
        if not self.callbacks and self in sys.meta_path:
            sys.meta_path.remove(self)
        return callbacks or ()

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.callbacks:
            return None
        spec = None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or isinstance(loader, type) or not hasattr(loader, "exec_module"):
            self._take(fullname)
            return spec  # a built-in or frozen module: nothing of ours to wrap
        orig_exec = loader.exec_module

        def exec_module(module):
            orig_exec(module)
            for callback in self._take(fullname):
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
    _watch_sys_exit()
    _flush_at_multiprocessing_exit()
    sys.excepthook = _excepthook(sys.excepthook)
