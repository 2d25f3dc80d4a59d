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

from trainprof._core import TrainprofError, __version__
from trainprof._reader import (
    EventTable,
    MetricTable,
    Run,
    RunWriter,
    StepTable,
    list_runs,
    open,  # noqa: A004 - trainprof.open(run_dir) is the public entry point
)
from trainprof._recorder import annotate, flush, mark, span, start, step, stop

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
