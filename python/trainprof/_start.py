"""trainprof.start(): the recorder (_recorder) and, with ``auto``, the zero-code PyTorch
instrumentation (_auto). This module is the top of the recording side's layering,
_recorder <- _detail <- _auto <- _start: no module imports one above it (the recorder used to
import the instrumentation that imports it)."""

from __future__ import annotations

from trainprof import _recorder as R


def start(out: str | None = None, node: str | None = None, name: str = "", auto: bool = True,
          flush_interval_s: float = 0.5, system_metrics: bool = True,
          system_interval_s: float = 0.5, gpus: bool = True) -> str | None:
    run_dir = R.start(out, node=node, name=name, flush_interval_s=flush_interval_s,
                      system_metrics=system_metrics, system_interval_s=system_interval_s,
                      gpus=gpus)
    if run_dir is not None and auto:
        from trainprof import _auto, _detail

        _detail.install_python_profile_from_env()
        _auto.install_when_imported()
    return run_dir


start.__doc__ = R.start.__doc__
