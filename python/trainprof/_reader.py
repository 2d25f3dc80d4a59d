"""Python view of the run store: thin wrappers over trainprof._core.

Tables come back columnar: NumPy arrays straight from C++ (no per-value copies), with repeated
strings dictionary-coded, so ``to_pandas()`` builds Categorical columns from codes and integer
columns with missing values as pandas' nullable Int64 (missing is not zero).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Sequence

import numpy as np

from trainprof import _core

MISSING = _core.MISSING

TimeLike = int | float | datetime | None


def _to_ns(t: TimeLike) -> int | None:
    """Accepts ns since the epoch (int), seconds (float) or a datetime."""
    if t is None:
        return None
    if isinstance(t, datetime):
        return int(t.timestamp() * 1e9)
    if isinstance(t, float):
        return int(t * 1e9)
    return int(t)


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

    def to_pandas(self):
        """A pandas DataFrame: Categorical string columns, nullable Int64 where values can be
        missing, without per-value Python work."""
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

    def to_pandas(self):
        df = super().to_pandas()
        df["kind"] = df["kind"].map({0: "span", 1: "instant"}).astype("category")
        return df

    def column(self, name: str) -> np.ndarray:
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
        return self._run.dir

    @property
    def metadata(self) -> dict:
        """run.json: run_id, name, command, start_ns, end_ns, exit_status, instance_type..."""
        return json.loads(self._run.metadata_json())

    @property
    def nodes(self) -> list[str]:
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
        return sorted({s["metric"] for s in self._run.series()})

    def devices(self, metric: str | None = None) -> list[str]:
        return sorted({s["device"] for s in self._run.series()
                       if metric is None or s["metric"] == metric})

    def series(self) -> list[dict]:
        """Every stored series: node, metric, device, count, first_ns, last_ns."""
        return self._run.series()

    def system_metrics(self, start: TimeLike = None, end: TimeLike = None, *,
                       metrics: str | Sequence[str] | None = None,
                       nodes: str | Sequence[str] | None = None,
                       devices: str | Sequence[str] | None = None) -> MetricTable:
        """Samples with start <= timestamp < end, optionally filtered."""
        return MetricTable(self._run.system_metrics(_to_ns(start), _to_ns(end), _list(metrics),
                                                    _list(nodes), _list(devices)))

    def events(self, start: TimeLike = None, end: TimeLike = None, *,
               names: str | Sequence[str] | None = None,
               categories: str | Sequence[str] | None = None,
               ranks: int | Sequence[int] | None = None,
               nodes: str | Sequence[str] | None = None) -> EventTable:
        """Events overlapping [start, end), optionally filtered (smdebug: get_events)."""
        return EventTable(self._run.events(_to_ns(start), _to_ns(end), _list(names),
                                           _list(categories), _list(ranks), _list(nodes)))

    def new_system_metrics(self) -> MetricTable:
        """Samples written since the previous call, each once (incremental tail of a live
        run; the first call returns everything so far)."""
        return MetricTable(self._run.new_system_metrics())

    def new_events(self) -> EventTable:
        """Events written since the previous call (incremental tail of a live run)."""
        table, self._cursor = self._run.events_since(self._cursor)
        return EventTable(table)

    def steps(self) -> StepTable:
        return StepTable(self._run.steps())

    def findings(self) -> list[Finding]:
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
        self._w.append_metric(metric, device, np.asarray(timestamps_ns, dtype=np.int64),
                              np.asarray(values, dtype=np.float64))

    def append_event(self, name: str, category: str, start_ns: int, duration_ns: int = 0, *,
                     mode: str = "", step: int | None = None, pid: int | None = None,
                     tid: int | None = None, rank: int | None = None, args: dict | None = None,
                     instant: bool = False) -> None:
        self._w.append_event(name, category, start_ns, duration_ns, mode, step, pid, tid, rank,
                             json.dumps(args) if args else "", instant)

    def annotate(self, ts_ns: int, key: str, value: str) -> None:
        self._w.annotate(ts_ns, key, value)

    def flush(self) -> None:
        self._w.flush()

    def close(self, end_ns: int | None = None, exit_status: int | None = None) -> None:
        self._w.close(end_ns, exit_status)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close(exit_status=0 if exc_type is None else 1)
