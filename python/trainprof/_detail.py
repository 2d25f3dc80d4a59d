"""Detailed profiling for chosen step ranges: the PyTorch profiler (Kineto) -- or, for
TensorFlow jobs, tf.profiler -- for TRAINPROF_DETAIL_STEPS="10-20" and cProfile for
TRAINPROF_PYTHON_PROFILE="10-12" (training steps, inclusive). Outside the ranges nothing runs
but a comparison per step.

Operator events come from the profiler's exported Chrome-trace JSON. This small reader maps its
events (ts/dur in microseconds on the profiler's clock) onto the recorder's clock through a
marker span recorded at a known time; it keeps the source categories (cpu_op, kernel,
gpu_memcpy, cuda_runtime, ...). The Kineto importer (src/importers/kineto) reads the same format
for trace files; when it lands this module should hand the JSON to it instead (dedup).
"""

from __future__ import annotations

import json
import os
import tempfile

from trainprof import _recorder as R
from trainprof._recorder import S, _perf, warn_once

MARKER = "trainprof::clock_sync"
MAX_FUNCTIONS = 500  # cProfile rows stored (by cumulative time)
MAX_CALLERS = 10  # caller edges stored per function (by cumulative time)


def parse_range(text: str | None) -> tuple[int, int] | None:
    """ "10-20" -> (10, 20); "7" -> (7, 7); bad text -> None (warned)."""
    if not text:
        return None
    try:
        if "-" in text:
            a, b = text.split("-", 1)
            lo, hi = int(a), int(b)
        else:
            lo = hi = int(text)
        if lo < 0 or hi < lo:
            raise ValueError
        return lo, hi
    except ValueError:
        warn_once("range:" + text, f"ignoring the step range {text!r} (expected e.g. 10-20)")
        return None


def parse_window(text: str | None) -> tuple[int, int] | None:
    """ "START_NS-END_NS" (epoch ns, what `record --detail-time` puts in the environment) ->
    (start, end); bad text -> None (warned)."""
    if not text:
        return None
    try:
        a, b = text.split("-", 1)
        lo, hi = int(a), int(b)
        if hi <= lo:
            raise ValueError
        return lo, hi
    except ValueError:
        warn_once("window:" + text, f"ignoring the time window {text!r} (expected START_NS-END_NS)")
        return None


class _Range:
    """Which training steps a detail range covers: steps lo..hi, or a time window (epoch ns):
    the steps from the first that begins once the window has opened to the one during which it
    closes (at least one step). Steps are decided at their boundaries, so a profiler never
    starts or stops inside a step."""

    def __init__(self, lo: int | None = None, hi: int | None = None, window=None):
        self.lo, self.hi, self.window = lo, hi, window
        self.requested = None if window is not None else f"{lo}-{hi}"

    def starts(self, event: str, n: int) -> bool:
        """Whether a profiler should start now (it is not running). A step is known to have
        begun only once its first activity ended, so a range starts when the step before it
        ends (or, for the first step, as soon as it can)."""
        if self.window is None:
            return (event == "end" and n == self.lo - 1) or (event == "begin" and n == self.lo)
        import time

        if time.time_ns() < self.window[0]:
            return False
        if event == "end":
            self.lo = n + 1
            return True
        if event == "begin" and n == 0:
            self.lo = n
            return True
        return False

    def ends(self, n: int) -> bool:
        """At the end of step n (>= lo, profiling): whether the range is complete."""
        if self.window is None:
            return n >= self.hi
        import time

        if time.time_ns() >= self.window[1]:
            self.hi = n
            return True
        return False


def _range_key(kind: str, lo, hi) -> str:
    """The annotation key of a stored range: detail.steps.<lo>-<hi> / detail.python.<lo>-<hi>,
    hi the last training step profiled ("none" when the job ended before one completed)."""
    return f"detail.{kind}.{lo}-{'none' if hi is None else hi}"


# Ranges whose profiler is running. However the job ends, each is closed and stored first: at
# exit (atexit, registered once torch or TensorFlow is imported, so it runs before their own
# exit handlers), on an uncaught exception (sys.excepthook, before the recorder stops) and on
# SIGTERM (the recorder's handler, held while a range is open: it stands in for the default
# action, then re-raises the signal so that the job still dies of it). A profiler left running
# into the interpreter's shutdown crashed the job (SIGSEGV) and lost the profile.
_open: list = []


def _opened(detail) -> None:
    _open.append(detail)
    R.hold_sigterm()


def _closed(detail) -> None:
    if detail in _open:
        _open.remove(detail)
        R.release_sigterm()


def close_open(ended_by: str) -> None:
    """Closes and stores every open range (`ended_by`: "exit", "exception", "SIGTERM")."""
    for detail in list(_open):
        try:
            detail.close(ended_by)
        except Exception as exc:  # noqa: BLE001 - the job's own ending must go on
            _closed(detail)
            warn_once("detail_close", f"closing a detail range at {ended_by} failed: {exc}")


class _Ranged:
    """A detail profiler's steps: its _Range's, known once it has started (time windows)."""

    range: _Range

    def _annotation(self) -> dict:
        """What the stored range's annotation says of it: how it ended, the window or the steps
        requested, and the on-demand request it served."""
        info = {"ended_by": getattr(self, "ended_by", "range")}
        if self.range.window is not None:
            info["window_ns"] = list(self.range.window)
        else:
            info["requested"] = self.range.requested
        if getattr(self, "request_id", None):
            info["request"], info["pid"] = self.request_id, os.getpid()
        return info

    @property
    def lo(self):
        return self.range.lo

    @property
    def hi(self):
        return self.range.hi


class TorchDetail(_Ranged):
    """Runs torch.profiler from the beginning of step lo to the end of step hi (or over the
    steps of a time window: `window` = (start_ns, end_ns), epoch)."""

    def __init__(self, lo: int | None = None, hi: int | None = None, window=None):
        self.range = _Range(lo, hi, window)
        self.prof = None
        self.marker_ns = None
        self.steps: list[tuple[int, int, int]] = []  # (step, start_mono, end_mono)
        self.done = False

    def hook(self, event: str, n: int, mode: str, start, end) -> None:
        if mode != "train" or self.done:
            return
        if self.prof is None:
            if self.range.starts(event, n):
                self._start()
                _opened(self)
        elif event == "end" and n >= self.range.lo:
            self.steps.append((n, start, end))
            if self.range.ends(n):
                self.close("range")

    def close(self, ended_by: str) -> None:
        """Stops the profiler and stores what it saw: at the end of the range, or early (the
        job ends, raises, is terminated) with the steps completed so far."""
        if self.prof is None:
            return
        _closed(self)
        self.ended_by = ended_by
        if ended_by != "range":
            self.range.hi = self.steps[-1][0] if self.steps else None
        self._stop()

    def _start(self) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile, record_function

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        self.prof = profile(activities=activities, record_shapes=False)
        self.prof.__enter__()
        with record_function(MARKER):
            self.marker_ns = _perf()

    def _stop(self) -> None:
        prof, self.prof = self.prof, None
        self.done = True
        prof.__exit__(None, None, None)
        fd, path = tempfile.mkstemp(prefix="trainprof-kineto-", suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path) as f:
                trace = json.load(f)
        finally:
            os.unlink(path)
        n = store_trace(trace, self.marker_ns, self.steps)
        R.annotate(**{_range_key("steps", self.lo, self.hi): {"events": n, **self._annotation()}})


class TfDetail(TorchDetail):
    """The same ranges with TensorFlow's profiler (tf.profiler.experimental), for Keras with the
    TensorFlow backend and other TensorFlow jobs. The profile (an XSpace) is converted to
    Chrome-trace JSON by TensorFlow's own profiler plugin ("trace_viewer@") and stored like the
    PyTorch profiler's: TensorFlow ops, eager/function execution and, on GPUs, kernels, keeping
    TensorFlow's categories, each event given the step whose time holds its start."""

    def _start(self) -> None:
        import tensorflow as tf

        self.logdir = tempfile.mkdtemp(prefix="trainprof-tfprof-")
        tf.profiler.experimental.start(self.logdir)
        self.prof = tf.profiler.experimental
        with tf.profiler.experimental.Trace(MARKER):
            self.marker_ns = _perf()

    def _stop(self) -> None:
        import glob
        import shutil

        from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as plugin

        prof, self.prof = self.prof, None
        self.done = True
        try:
            prof.stop()
            spaces = sorted(glob.glob(os.path.join(self.logdir, "**", "*.xplane.pb"),
                                      recursive=True))
            if not spaces:
                warn_once("tfprof", "the TensorFlow profiler wrote no profile; no operator events")
                return
            data, ok = plugin.xspace_to_tools_data(spaces[-1:], "trace_viewer@", {})
            if not ok or not data:
                warn_once("tfprof", "TensorFlow could not convert its profile to a trace")
                return
            trace = json.loads(data)
        finally:
            shutil.rmtree(self.logdir, ignore_errors=True)
        n = store_trace(trace, self.marker_ns, self.steps, category=_tf_categories(trace))
        R.annotate(**{_range_key("steps", self.lo, self.hi): {"events": n,
                                                               "profiler": "tf.profiler",
                                                               **self._annotation()}})


def _tf_categories(trace: dict):
    """TensorFlow's trace has no "cat": its processes are devices ("<host> /host:CPU",
    "/device:GPU:0"...). Host events become "tf_op", GPU streams "kernel", others "tf_device"."""
    names = {}
    for e in trace.get("traceEvents", []):
        if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "process_name":
            names[e.get("pid")] = str((e.get("args") or {}).get("name", ""))

    def category(e: dict) -> str:
        name = names.get(e.get("pid"), "")
        if "/device:GPU" in name:
            return "kernel"
        return "tf_op" if "/host" in name or not name else "tf_device"

    return category


def store_trace(trace: dict, marker_ns: int, steps: list, category=None) -> int:
    """Stores a Chrome-trace dict's complete events ('X'), each given the training step whose
    time range holds its start. Returns how many were stored. `category(event)` names the
    category of events without a "cat"."""
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    marker_us = next((e.get("ts") for e in events
                      if isinstance(e, dict) and e.get("name") == MARKER and e.get("ph") == "X"), None)
    if marker_us is None:
        warn_once("marker", "profiler trace has no clock marker; operator events not stored")
        return 0
    # Thousands of events at once, off the step's path: blocks are allocated for them when
    # this thread's pool of prepared blocks runs out, rather than the events being dropped.
    R._rec.set_bulk(True)
    try:
        stored, bad = _store_trace_events(events, marker_ns, marker_us, steps, category)
    finally:
        R._rec.set_bulk(False)
    if bad:
        R._rec.add_counter("parse_errors", bad)
    return stored


def _store_trace_events(events, marker_ns: int, marker_us, steps: list, category) -> tuple:
    stored = 0
    bad = 0
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X" or e.get("name") == MARKER:
            continue
        try:
            start = marker_ns + int((float(e["ts"]) - float(marker_us)) * 1000)
            dur = int(float(e.get("dur", 0)) * 1000)
        except (KeyError, TypeError, ValueError):
            bad += 1
            continue
        step = next((n for n, lo, hi in steps if lo <= start < hi), None)
        if step is None:
            continue  # before the first or after the last chosen step
        cat = str(e.get("cat") or (category(e) if category else "unknown"))
        args = e.get("args")
        R.record_span(str(e.get("name", "")), cat, start, start + dur, step=step, mode="train",
                      args=json.dumps(args) if args else None)
        stored += 1
    return stored, bad


class PythonDetail(_Ranged):
    """cProfile from the beginning of step lo to the end of step hi (or over the steps of a
    time window); stores per-function stats as instants (category "python_function") at the
    end of the range."""

    def __init__(self, lo: int | None = None, hi: int | None = None, window=None):
        self.range = _Range(lo, hi, window)
        self.prof = None
        self.done = False
        self.last_step = None  # the last training step completed inside the range

    def hook(self, event: str, n: int, mode: str, start, end) -> None:
        if mode != "train" or self.done:
            return
        if self.prof is None:
            if self.range.starts(event, n):
                import cProfile

                self.prof = cProfile.Profile()
                self.prof.enable()
                _opened(self)
        elif event == "end" and n >= self.range.lo:
            self.last_step = n
            if self.range.ends(n):
                self.close("range")

    def close(self, ended_by: str) -> None:
        if self.prof is None:
            return
        _closed(self)
        prof, self.prof = self.prof, None
        self.done = True
        prof.disable()
        if ended_by != "range":
            self.range.hi = self.last_step
        count = store_pstats(prof, self.lo, self.hi) if self.hi is not None else 0
        self.ended_by = ended_by
        info = {"functions": count, **self._annotation()}
        R.annotate(**{_range_key("python", self.lo, self.hi): info})


def called_by(callers: dict) -> list[dict]:
    """cProfile's callers of one function, {(file, line, func): (nc, cc, tt, ct)} -- calls
    first, unlike the function's own (cc, nc, ...) tuple, as pstats' print_callers reads it --
    with the time the function spent when called from there, as the MAX_CALLERS edges with
    the most cumulative time (then calls, then name), the shape the smdebug importer stores."""
    edges = []
    for (filename, line, func), v in callers.items():
        if isinstance(v, tuple) and len(v) >= 4:
            nc, cc, tt, ct = v[:4]
        else:  # the pure-Python `profile` module keeps a call count only
            cc = nc = int(v)
            tt = ct = 0.0
        edges.append({"function": func, "file": filename, "line": line, "calls": nc,
                      "primitive_calls": cc, "total_ns": int(tt * 1e9),
                      "cumulative_ns": int(ct * 1e9)})
    edges.sort(key=lambda e: (-e["cumulative_ns"], -e["calls"], e["file"], e["line"],
                              e["function"]))
    return edges[:MAX_CALLERS]


def store_pstats(prof, lo: int, hi: int) -> int:
    import pstats

    stats = pstats.Stats(prof).stats  # {(file, line, func): (cc, nc, tt, ct, callers)}
    rows = sorted(stats.items(), key=lambda kv: kv[1][3], reverse=True)[:MAX_FUNCTIONS]
    now = _perf()
    R._rec.set_bulk(True)  # 500 records at once: see store_trace
    try:
        _store_pstats_rows(rows, now, lo, hi)
    finally:
        R._rec.set_bulk(False)
    return len(rows)


def _store_pstats_rows(rows: list, now: int, lo: int, hi: int) -> None:
    for (filename, line, func), (cc, nc, tt, ct, callers) in rows:
        R.record_instant(f"{func} ({filename}:{line})", "python_function", ts=now, step=hi,
                         mode="train",
                         args=json.dumps({"function": func, "file": filename, "line": line,
                                          "calls": nc, "primitive_calls": cc,
                                          "total_ns": int(tt * 1e9), "cumulative_ns": int(ct * 1e9),
                                          "steps": f"{lo}-{hi}", "callers": len(callers),
                                          "called_by": called_by(callers)}))


REQUEST_FILE = "detail-request.json"
CHECK_EVERY_NS = 500_000_000
REQUEST_MAX_AGE_NS = 120 * 1_000_000_000


class RequestWatcher:
    """On-demand detail: `trainprof detail RUN --steps N` writes RUN/detail-request.json
    ({"id", "steps", "python", "created_ns"}). At the end of a training step, at most every
    0.5 s, each process looks at the file's mtime; a request it has not served (and not older
    than two minutes) makes it profile its next N training steps -- operators with the
    framework's profiler, or Python functions (cProfile) with "python" -- and annotate
    detail.request.<id> with the steps it chose, which `trainprof detail --wait` reads back."""

    def __init__(self, framework: str):
        self.framework = framework
        self.next_check_ns = 0
        self.mtime_ns = None
        self.served: set = set()

    def hook(self, event: str, n: int, mode: str, start, end) -> None:
        if event != "end" or mode != "train" or not S.run_dir:
            return
        now = _perf()
        if now < self.next_check_ns:
            return
        self.next_check_ns = now + CHECK_EVERY_NS
        path = os.path.join(S.run_dir, REQUEST_FILE)
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            return
        if mtime == self.mtime_ns:
            return
        self.mtime_ns = mtime
        try:
            with open(path) as f:
                req = json.load(f)
            rid, steps = str(req["id"]), int(req["steps"])
            created = int(req.get("created_ns", 0))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            warn_once("detail_request", f"ignoring an unreadable {REQUEST_FILE}: {exc}")
            return
        import time

        if rid in self.served or steps <= 0 or time.time_ns() - created > REQUEST_MAX_AGE_NS:
            return
        self.served.add(rid)
        lo, hi = n + 1, n + steps
        if req.get("python"):
            detail = PythonDetail(lo, hi)
        else:
            detail = (TfDetail if self.framework == "tensorflow" else TorchDetail)(lo, hi)
        detail.request_id = rid
        S.step_hooks.append(detail.hook)
        detail.hook("end", n, mode, start, end)  # starts now: the next step is the first
        R.annotate(**{f"detail.request.{rid}": {"steps": f"{lo}-{hi}", "pid": os.getpid(),
                                                "profiler": type(detail).__name__}})


def install_from_env(framework: str = "torch") -> None:
    """Adds the detail hooks the environment asks for (once per process), and the watcher of
    on-demand requests. `framework` picks the operator profiler: "torch" (Kineto) or
    "tensorflow" (tf.profiler)."""
    if not any(isinstance(getattr(h, "__self__", None), RequestWatcher) for h in S.step_hooks):
        S.step_hooks.append(RequestWatcher(framework).hook)
        import atexit

        atexit.register(close_open, "exit")
        if close_open not in R.before_stop:
            R.before_stop.append(close_open)
    detail = TfDetail if framework == "tensorflow" else TorchDetail
    have = {type(getattr(h, "__self__", None)) for h in S.step_hooks}
    op_range = parse_range(os.environ.get("TRAINPROF_DETAIL_STEPS"))
    op_window = parse_window(os.environ.get("TRAINPROF_DETAIL_TIME"))
    if (op_range or op_window) and not have & {TorchDetail, TfDetail}:
        if op_range:
            S.step_hooks.append(detail(*op_range).hook)
        if op_window:
            S.step_hooks.append(detail(window=op_window).hook)
    install_python_profile_from_env()


def install_python_profile_from_env() -> None:
    """The cProfile ranges the environment asks for (TRAINPROF_PYTHON_PROFILE[_TIME]), once per
    process. cProfile needs no framework: trainprof.start() calls this too, so that a job whose
    steps are `trainprof.step()` blocks, without PyTorch or TensorFlow, is profiled as well; a
    range still open when the job ends is stored by the recorder's before-stop hook."""
    have = {type(getattr(h, "__self__", None)) for h in S.step_hooks}
    py_range = parse_range(os.environ.get("TRAINPROF_PYTHON_PROFILE"))
    py_window = parse_window(os.environ.get("TRAINPROF_PYTHON_PROFILE_TIME"))
    if (py_range or py_window) and PythonDetail not in have:
        if py_range:
            S.step_hooks.append(PythonDetail(*py_range).hook)
        if py_window:
            S.step_hooks.append(PythonDetail(window=py_window).hook)
        if close_open not in R.before_stop:
            R.before_stop.append(close_open)
