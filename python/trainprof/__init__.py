"""trainprof: profiler and cost advisor for machine-learning training jobs.

Reading runs::

    import trainprof
    run = trainprof.open("trainprof-runs/<run>")
    run.system_metrics(metrics=["gpu_utilization_ratio"]).to_pandas()
    run.steps().to_pandas()
    run.findings()

The command line's work, from a notebook (the same content as ``--json``)::

    run = trainprof.import_kineto("trace.json.gz", out="runs/t")
    trainprof.analyze(run); run.rules(); run.cost(instance_type="ml.p4d.24xlarge")
    run.report("report.html")

Recording (see docs/instrumentation.md)::

    trainprof.start(out="trainprof-runs/my-run")
    with trainprof.step(mode="train"):
        with trainprof.span("load"):
            ...
    trainprof.mark("download_start")
    trainprof.annotate(batch_size=64)
    trainprof.log_metric("loss", loss.item())
"""

# The recording API is imported at once: it is small (no NumPy). The reading API (NumPy, the
# pybind11 extension) loads on first use, so that the startup hook of every process of a
# recorded job, which imports this package, costs about a millisecond rather than ~50 ms.
from trainprof._recorder import annotate, flush, log_metric, mark, span, step, stop
from trainprof._start import start

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
    "analyze": "trainprof._api",
    "cost": "trainprof._api",
    "import_horovod": "trainprof._api",
    "import_kineto": "trainprof._api",
    "import_smdebug": "trainprof._api",
    "instances": "trainprof._api",
    "report": "trainprof._api",
    "evaluate_rules": "trainprof._api",
    "run_cli": "trainprof._api",
    "metric_catalog": "trainprof._core",
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
    "log_metric",
    "mark",
    "span",
    "start",
    "step",
    "stop",
    "list_runs",
    "open",
    "analyze",
    "cost",
    "import_horovod",
    "import_kineto",
    "import_smdebug",
    "instances",
    "metric_catalog",
    "report",
    "evaluate_rules",
    "run_cli",
]
