"""Shared fixtures: where the trainprof executable is, and fresh run directories."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"


def trainprof_command() -> list[str]:
    """The command that runs the CLI: $TRAINPROF_BIN, else the installed console script."""
    if os.environ.get("TRAINPROF_BIN"):
        return [os.environ["TRAINPROF_BIN"]]
    # The native executable the installed package ships (what the console script execs).
    import trainprof.cli

    native = trainprof.cli.native_executable()
    if native.exists():
        return [str(native)]
    exe = shutil.which("trainprof", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    if exe is None:
        pytest.fail("the trainprof command is not installed (run scripts/setup.sh)")
    return [exe]


@pytest.fixture
def trainprof_cli() -> list[str]:
    return trainprof_command()


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.fail(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA
