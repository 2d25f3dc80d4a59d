"""trainprof: profiler and cost advisor for machine-learning training jobs.

Reading runs::

    import trainprof
    run = trainprof.open("trainprof-runs/<run>")
    run.system_metrics(metrics=["gpu_utilization_ratio"]).to_pandas()
    run.steps().to_pandas()
    run.findings()

Recording (see docs/instrumentation.md)::

    trainprof.start(out="trainprof-runs/my-run")
    with trainprof.step(mode="train"):
        with trainprof.span("load"):
            ...
    trainprof.mark("download_start")
    trainprof.annotate(batch_size=64)
"""

# The recording API is imported at once: it is small (no NumPy). The reading API (NumPy, the
# pybind11 extension) loads on first use, so that the startup hook of every process of a
# recorded job, which imports this package, costs about a millisecond rather than ~50 ms.
from trainprof._recorder import annotate, flush, mark, span, start, step, stop

_LAZY = {
    "TrainprofError": "trainprof._core",
    "__version__": "trainprof._core",
    "EventTable": "trainprof._reader",
    "MetricTable": "trainprof._reader",
    "Run": "trainprof._reader",
    "RunWriter": "trainprof._reader",
    "StepTable": "trainprof._reader",
    "list_runs": "trainprof._reader",
    "open": "trainprof._reader",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'trainprof' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "EventTable",
    "MetricTable",
    "Run",
    "RunWriter",
    "StepTable",
    "TrainprofError",
    "__version__",
    "annotate",
    "flush",
    "mark",
    "span",
    "start",
    "step",
    "stop",
    "list_runs",
    "open",
]
