"""What every adapter does: start the recorder if needed, and record job phases."""

from __future__ import annotations

from trainprof import _recorder as R
from trainprof import _start


def ensure_started(out: str | None) -> bool:
    if R.S.active:
        return True
    return _start.start(out=out) is not None


class Phases:
    """Open phase spans by name (category "phase"); ending an unknown phase is ignored."""

    def __init__(self):
        self._open: dict[str, int] = {}

    def begin(self, name: str) -> None:
        self._open[name] = R._perf()

    def end(self, name: str) -> None:
        t0 = self._open.pop(name, None)
        if t0 is not None:
            R.record_span(name, "phase", t0, R._perf(), step=None, mode="")
