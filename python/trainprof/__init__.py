"""trainprof: profiler and cost advisor for machine-learning training jobs.

Reading runs::

    import trainprof
    run = trainprof.open("trainprof-runs/<run>")
    run.system_metrics(metrics=["gpu_utilization_ratio"]).to_pandas()
    run.steps().to_pandas()
    run.findings()
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

__all__ = [
    "EventTable",
    "MetricTable",
    "Run",
    "RunWriter",
    "StepTable",
    "TrainprofError",
    "__version__",
    "list_runs",
    "open",
]
