"""Python view of the run store: thin wrappers over trainprof._core.

Tables come back columnar: NumPy arrays straight from C++ (no per-value copies), with repeated
strings dictionary-coded, so ``to_pandas()`` builds Categorical columns from codes and integer
columns with missing values as pandas' nullable Int64 (missing is not zero).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

import numpy as np

from trainprof import _core

MISSING = _core.MISSING

TimeLike = int | float | str | datetime | np.datetime64 | None


def _to_ns(t: TimeLike) -> int | None:
    """A time as ns since the Unix epoch. Accepts ns (int), seconds (float), an ISO 8601
    string ("2026-12-02T06:30:00Z", "2026-12-02 06:30:00.5+01:00"), a datetime, a pandas
    Timestamp or a numpy datetime64. Times without a zone are UTC."""
    if t is None:
        return None
    if isinstance(t, bool):
        raise TypeError(f"not a time: {t!r}")
    value = getattr(t, "value", None)  # pandas Timestamp: exact ns
    if isinstance(value, int) and hasattr(t, "tz_localize"):
        return value if t.tzinfo is None else int(t.tz_convert("UTC").value)
    if isinstance(t, str):
        text = t.strip()
        try:
            t = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise ValueError(f"not an ISO 8601 time: {text!r} (e.g. 2026-12-02T06:30:00Z)") from None
    if isinstance(t, np.datetime64):
        return int(t.astype("datetime64[ns]").astype(np.int64))
    if isinstance(t, datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        delta = t - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    if isinstance(t, float):
        return int(t * 1e9)
    if isinstance(t, (int, np.integer)):
        return int(t)
    raise TypeError(f"not a time: {t!r} (ns since the epoch, seconds as float, ISO text, "
                    "datetime, pandas Timestamp or numpy datetime64)")


# Event categories trainprof itself writes or imports: asking for one the run happens not to have
# (no GPU kernels in a CPU run) gives an empty table; any other name is checked against the run.
KNOWN_CATEGORIES = frozenset({
    "step", "data_wait", "forward", "backward", "optimizer", "collective", "dataloader",
    "dataloader_init", "phase", "mark", "gpu_step", "compile", "python_function", "cpu_op",
    "kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "user_annotation",
    "gpu_user_annotation", "cpu_instant_event", "python_function", "ac2g", "tf_op", "tf_device",
    "overhead", "Trace", "fwdbwd", "cuda_sync", "horovod", "smdebug"})


def _known_metrics() -> frozenset:
    return frozenset(m["name"] for m in _core.metric_catalog())


def _check_names(kind: str, asked: list | None, known: Iterable) -> None:
    """Raises KeyError for a name the run does not have, suggesting the closest known one:
    a wrong name is an error, not an empty table."""
    if not asked:
        return
    known = sorted({str(k) for k in known})
    for name in asked:
        if str(name) in known:
            continue
        import difflib

        close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]}?" if close else ""
        shown = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
        raise KeyError(f"unknown {kind} {name!r}{hint} (this run has: {shown or 'none'})")


def _list(x: str | Iterable | None) -> list | None:
    if x is None:
        return None
    if isinstance(x, (str, int)):
        return [x]
    return list(x)


class _Table:
    """Columns as NumPy arrays. Dictionary-coded columns are (codes, categories) pairs."""

    _coded: tuple[str, ...] = ()
    _nullable: tuple[str, ...] = ()
    _order: tuple[str, ...] = ()

    def __init__(self, columns: dict[str, Any]):
        self._columns = columns

    def __len__(self) -> int:
        first = self._columns[self._order[0]]
        return len(first["codes"] if isinstance(first, dict) else first)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} rows={len(self)} columns={list(self._order)}>"

    @property
    def columns(self) -> list[str]:
        return list(self._order)

    def column(self, name: str) -> np.ndarray:
        """One column as a NumPy array (strings decoded to an object array)."""
        col = self._columns[name]
        if isinstance(col, dict):
            cats = np.asarray(col["categories"], dtype=object)
            return cats[col["codes"]] if len(cats) else np.empty(0, dtype=object)
        if name in self._nullable:
            out = col.astype("float64")
            out[col == MISSING] = np.nan
            return out
        return col

    def to_numpy(self) -> dict[str, np.ndarray]:
        """All columns as NumPy arrays; missing integers become NaN (float)."""
        return {name: self.column(name) for name in self._order}

    def to_pandas(self, datetimes: bool = False):
        """A pandas DataFrame: Categorical string columns, nullable Int64 where values can be
        missing, without per-value Python work. With `datetimes`, the time columns
        (timestamp_ns, start_ns) become datetime64[ns, UTC] (named without "_ns")."""
        df = self._to_pandas()
        if datetimes:
            import pandas as pd

            for name in ("timestamp_ns", "start_ns"):
                if name in df.columns:
                    df.insert(df.columns.get_loc(name), name[:-3],
                              pd.to_datetime(df.pop(name).to_numpy("int64"), unit="ns", utc=True))
        return df

    def _to_pandas(self):
        import pandas as pd

        data = {}
        for name in self._order:
            col = self._columns[name]
            if isinstance(col, dict):
                data[name] = pd.Categorical.from_codes(col["codes"], categories=_unique(col["categories"]))
            elif name in self._nullable:
                mask = col == MISSING
                data[name] = pd.arrays.IntegerArray(np.where(mask, 0, col), mask)
            else:
                data[name] = col
        return pd.DataFrame(data, copy=False)

    def to_polars(self):
        import polars as pl

        return pl.from_pandas(self.to_pandas())


def _unique(categories: list[str]) -> list[str]:
    # Categories are distinct by construction; pandas requires it, so keep the guarantee cheap.
    return categories


class MetricTable(_Table):
    """System metrics in long form: node, metric, device, timestamp_ns, value."""

    _order = ("node", "metric", "device", "timestamp_ns", "value")


class EventTable(_Table):
    """Framework events: node, rank, pid, tid, name, category, mode, step, start_ns,
    duration_ns, args (and kind: 0 span, 1 instant)."""

    _order = ("node", "rank", "pid", "tid", "name", "category", "mode", "step", "start_ns",
              "duration_ns", "kind", "args")
    _nullable = ("rank", "pid", "tid", "step")

    def _to_pandas(self):
        df = super()._to_pandas()
        df["kind"] = df["kind"].map({0: "span", 1: "instant"}).astype("category")
        return df

    def column(self, name: str) -> np.ndarray:
        """One column as a NumPy array ("args": the JSON text of each event, or None)."""
        if name == "args":
            return np.asarray(self._columns["args"], dtype=object)
        return super().column(name)


class StepTable(_Table):
    """One row per training step: node, rank, pid, step, mode, start_ns, duration_ns,
    data_wait_ns, forward_ns, backward_ns, optimizer_ns (missing parts are <NA>, not 0)."""

    _order = ("node", "rank", "pid", "step", "mode", "start_ns", "duration_ns", "data_wait_ns",
              "forward_ns", "backward_ns", "optimizer_ns")
    _nullable = ("rank", "pid", "step", "data_wait_ns", "forward_ns", "backward_ns",
                 "optimizer_ns")


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    node: str
    device: str
    start_ns: int
    end_ns: int
    message: str
    recommendation: str
    evidence: dict


class Run:
    """A run directory opened for reading; works while the run is still being written."""

    def __init__(self, run_dir: str):
        self._run = _core.Run(str(run_dir))
        self._cursor: dict[str, int] = {}

    def __repr__(self) -> str:
        m = self.metadata
        return f"<trainprof.Run {m.get('run_id') or self.dir!r} nodes={self.nodes}>"

    @property
    def dir(self) -> str:
        """The run directory's path."""
        return self._run.dir

    @property
    def metadata(self) -> dict:
        """run.json: run_id, name, command, start_ns, end_ns, exit_status, instance_type..."""
        return json.loads(self._run.metadata_json())

    @property
    def nodes(self) -> list[str]:
        """The nodes that stored data (one store each)."""
        return self._run.nodes()

    @property
    def node_info(self) -> dict[str, dict]:
        """Per node: hostname, CPU model and cores, memory, GPUs, instance type."""
        infos = [json.loads(s) for s in self._run.node_infos_json()]
        return {i["node"]: i for i in infos}

    @property
    def problems(self) -> list[str]:
        """What could not be read (a missing run.json, a broken node store, corrupt chunks)."""
        return self._run.problems()

    def metrics(self) -> list[str]:
        """The names of the system metrics stored (docs/metrics.md)."""
        return sorted({s["metric"] for s in self._run.series()})

    def devices(self, metric: str | None = None) -> list[str]:
        """The devices stored ("total", "cpu0", "gpu0", "eth0", ...), of one metric or all."""
        return sorted({s["device"] for s in self._run.series()
                       if metric is None or s["metric"] == metric})

    def series(self) -> list[dict]:
        """Every stored series: node, metric, device, count, first_ns, last_ns."""
        return self._run.series()

    def system_metrics(self, start: TimeLike = None, end: TimeLike = None, *,
                       metrics: str | Sequence[str] | None = None,
                       nodes: str | Sequence[str] | None = None,
                       devices: str | Sequence[str] | None = None) -> MetricTable:
        """Samples with start <= timestamp < end, optionally filtered. Times: see _to_ns (ns,
        seconds, ISO text, datetime, pandas Timestamp). A metric, node or device the run does
        not have raises KeyError naming the closest one."""
        metrics, nodes, devices = _list(metrics), _list(nodes), _list(devices)
        table = MetricTable(self._run.system_metrics(_to_ns(start), _to_ns(end), metrics, nodes,
                                                     devices))
        if len(table) == 0 and (metrics or nodes or devices):
            # Only an empty answer pays for the check. A catalogued metric this run lacks (no
            # GPU) is an empty table; a name neither catalogued nor stored is an error.
            series = self._run.series()
            _check_names("metric", [m for m in metrics or [] if m not in _known_metrics()],
                         (x["metric"] for x in series))
            _check_names("node", nodes, self._run.nodes())
            stored = [x["device"] for x in series if not metrics or x["metric"] in metrics]
            if stored:
                _check_names("device", devices, stored)
        return table

    def events(self, start: TimeLike = None, end: TimeLike = None, *,
               names: str | Sequence[str] | None = None,
               categories: str | Sequence[str] | None = None,
               ranks: int | Sequence[int] | None = None,
               nodes: str | Sequence[str] | None = None) -> EventTable:
        """Events overlapping [start, end), optionally filtered (smdebug: get_events). A node,
        rank or category the run does not have raises KeyError naming the closest one (names
        are free: an event name that never occurred gives an empty table)."""
        names, categories, ranks, nodes = _list(names), _list(categories), _list(ranks), _list(nodes)
        table = EventTable(self._run.events(_to_ns(start), _to_ns(end), names, categories, ranks,
                                            nodes))
        if len(table) == 0 and (categories or ranks or nodes):
            # Only an empty answer pays for the check: which categories and ranks exist at all.
            _check_names("node", nodes, self._run.nodes())
            everything = EventTable(self._run.events(None, None, None, None, None, nodes))
            _check_names("category", [c for c in categories or [] if c not in KNOWN_CATEGORIES],
                         everything.column("category"))
            if ranks:
                have = everything.column("rank")
                _check_names("rank", [str(r) for r in ranks],
                             (str(int(r)) for r in set(have[~np.isnan(have)].tolist())))
        return table

    def new_system_metrics(self) -> MetricTable:
        """Samples written since the previous call, each once (incremental tail of a live
        run; the first call returns everything so far)."""
        return MetricTable(self._run.new_system_metrics())

    def new_events(self) -> EventTable:
        """Events written since the previous call (incremental tail of a live run)."""
        table, self._cursor = self._run.events_since(self._cursor)
        return EventTable(table)

    def steps(self) -> StepTable:
        """One row per step (node, rank, pid, step, mode, start and duration, and its data-wait,
        forward, backward and optimizer parts; a part not measured is missing, not 0)."""
        return StepTable(self._run.steps())

    # The command line's analyses of this run, in this process (trainprof._api): the same
    # content as `trainprof <command> RUN --json`.

    def rules(self, **options) -> dict:
        """The profiler rules on this run: {"rules": [...]} as `trainprof rules RUN --json`.
        Options: config, rule (overrides), custom (Python rule files), store."""
        from trainprof import _api

        return _api.evaluate_rules(self, **options)

    def rules_frame(self, **options):
        """The rules' findings as a DataFrame, one row per finding with its rule's name."""
        import pandas as pd

        rows = [dict(f, rule=r["name"]) for r in self.rules(**options)["rules"]
                for f in r.get("findings", [])]
        return pd.DataFrame(rows, columns=["rule", "severity", "node", "device", "start_ns",
                                           "end_ns", "message", "recommendation", "evidence"])

    def cost(self, **options) -> dict:
        """What this run cost, as `trainprof cost RUN --json`. Options: instance_type,
        instances, spot, price_usd_per_hour, discount_pct, catalog, volume_gb, ..."""
        from trainprof import _api

        return _api.cost(self, **options)

    def analyze(self, **options) -> dict:
        """Trace analyses per rank, as `trainprof analyze RUN --json`. Options: hta_compat,
        diff (a baseline run), top, kernel_wait_threshold_us."""
        from trainprof import _api

        return _api.analyze(self, **options)

    def report(self, path=None, **options) -> dict:
        """Writes the HTML report (default <run>/report.html) and its JSON; `pdf=PATH` too.
        Returns the paths written."""
        from trainprof import _api

        return _api.report(self, path, **options)

    def findings(self) -> list[Finding]:
        """The findings stored in the run (live rules, `rules --store`)."""
        out = []
        for f in self._run.findings():
            evidence = json.loads(f.pop("evidence_json") or "{}")
            out.append(Finding(evidence=evidence, **f))
        return out

    def data_quality(self) -> dict[str, int]:
        """Data-quality counters: dropped events, parse errors, sampling overruns..."""
        return self._run.counters()

    def annotations(self) -> list[tuple[str, int, str, str]]:
        """(node, ts_ns, key, value) rows."""
        return self._run.annotations()

    def logged_metric(self, name: str) -> list[tuple[int, float, int | None]]:
        """The values the job logged with ``trainprof.log_metric(name, v)``: (ts_ns, value,
        step or None) rows in time order (nan/inf as floats)."""
        rows = []
        for _node, ts, key, value in self._run.annotations():
            if key != "metric." + name:
                continue
            try:
                doc = json.loads(value)
                rows.append((ts, float(doc["value"]), doc.get("step")))
            except (ValueError, TypeError, KeyError):
                continue
        rows.sort(key=lambda r: r[0])
        return rows

    def latest_timestamp(self) -> int | None:
        """The latest sample or event end in ns, or None (smdebug:
        get_timestamp_of_latest_available_file)."""
        return self._run.latest_timestamp_ns()

    def refresh(self) -> None:
        """Picks up nodes that started writing after the run was opened."""
        self._run.refresh()

    # smdebug-style names for users moving over.
    get_events = events

    def get_timestamp_of_latest_available_file(self) -> int | None:
        """smdebug's name for latest_timestamp()."""
        return self.latest_timestamp()


def open(run_dir) -> Run:  # noqa: A001
    """Opens a run directory for reading."""
    return Run(run_dir)


def list_runs(directory="trainprof-runs") -> list[dict]:
    """The runs under `directory`, newest first: dir, run_id, name, start_ns, duration_ns,
    exit_status, nodes, source, error."""
    return _core.list_runs(str(directory))


class RunWriter:
    """Writes a one-node run from Python (bring your own data, or tests)::

        with trainprof.RunWriter("runs/r1", node="algo-1", name="r1") as w:
            w.append_metric("gpu_utilization_ratio", "gpu0", ts_ns_array, values_array)
    """

    def __init__(self, run_dir, *, node: str = "", name: str = "", command=(),
                 start_ns: int | None = None, source: str = "python"):
        self._w = _core.RunWriter(str(run_dir), node, name, list(command), start_ns, source)

    def append_metric(self, metric: str, device: str, timestamps_ns, values) -> None:
        """Appends samples of one series (NumPy int64 timestamps in ns, float64 values)."""
        self._w.append_metric(metric, device, np.asarray(timestamps_ns, dtype=np.int64),
                              np.asarray(values, dtype=np.float64))

    def append_event(self, name: str, category: str, start_ns: int, duration_ns: int = 0, *,
                     mode: str = "", step: int | None = None, pid: int | None = None,
                     tid: int | None = None, rank: int | None = None, args: dict | None = None,
                     instant: bool = False) -> None:
        """Appends one span (duration_ns > 0) or instant (0) with its step, mode, rank, args."""
        self._w.append_event(name, category, start_ns, duration_ns, mode, step, pid, tid, rank,
                             json.dumps(args) if args else "", instant)

    def annotate(self, ts_ns: int, key: str, value: str) -> None:
        """Stores a key/value fact about the run at ts_ns."""
        self._w.annotate(ts_ns, key, value)

    def flush(self) -> None:
        """Makes everything appended so far durable."""
        self._w.flush()

    def close(self, end_ns: int | None = None, exit_status: int | None = None) -> None:
        """Flushes, closes the store and completes run.json with the end time and exit status."""
        self._w.close(end_ns, exit_status)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close(exit_status=0 if exc_type is None else 1)
