"""The `trainprof` console script: hands over to the native executable shipped in the package,
so that `trainprof record` runs without Python in the recorder's process (signals, exit status
and overhead stay native). Falls back to running the CLI in-process if the executable is
missing (e.g. a build without it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def native_executable() -> Path:
    return Path(__file__).resolve().parent / "bin" / "trainprof"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv if argv is None else ["trainprof", *argv])
    exe = native_executable()
    # Lets the native recorder find the Python side (startup hooks) of this installation.
    os.environ.setdefault("TRAINPROF_PYTHON_PACKAGE_DIR", str(Path(__file__).resolve().parent))
    # The interpreter that runs custom rules (`rules --custom`, `record --custom-rule`): this one,
    # which has trainprof installed.
    os.environ.setdefault("TRAINPROF_PYTHON", sys.executable)
    if exe.exists() and argv is None:
        os.execv(str(exe), [str(exe), *args[1:]])
    from trainprof import _core

    return _core.main(args)


if __name__ == "__main__":
    sys.exit(main())
