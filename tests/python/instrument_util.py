"""Helpers for the instrumentation tests: run a Python program the way `trainprof record`
would (hook directory first on PYTHONPATH, run directory in the environment)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import trainprof

REPO = Path(__file__).resolve().parents[2]
HOOK_DIR = Path(trainprof.__file__).resolve().parent / "_hook"


def hooked_env(run_dir: Path, **extra: str) -> dict:
    from trainprof import _core

    env = dict(os.environ)
    env.update(_core.child_environment(str(run_dir), node="testnode",
                                       package_dir=str(HOOK_DIR.parent), parent=env))
    env.update(extra)
    return env


def run_hooked(args: list[str], run_dir: Path, timeout: float = 600, check: bool = True,
               **extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, *args], env=hooked_env(run_dir, **extra), cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def steps_df(run_dir: Path):
    return trainprof.open(str(run_dir)).steps().to_pandas()


def events_df(run_dir: Path, **query):
    return trainprof.open(str(run_dir)).events(**query).to_pandas()
