"""The package is typed (py.typed, .pyi stubs for the native modules): mypy's stubtest checks
the stubs against the compiled modules themselves, and mypy sees real types in user code."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _mypy(*args, cwd):
    return subprocess.run([sys.executable, "-m", "mypy", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


def test_stubs_match_the_compiled_modules(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mypy.stubtest", "trainprof._core",
                           "trainprof._rec", "--allowlist", str(HERE / "stubtest_allowlist.txt")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_sees_the_types_of_the_public_api(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(textwrap.dedent("""
        import trainprof
        from trainprof import _core, _rec

        run = trainprof.open("runs/x")
        steps = run.steps()
        n: int = len(steps)
        code, out, err = _core.run_cli(["trainprof", "ls"])
        text: bytes = out
        with trainprof.span("load"):
            pass
        started: str = _rec.start("runs/x")
    """))
    ok = _mypy("--ignore-missing-imports", str(good), cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""
        from trainprof import _core
        code, out, err = _core.run_cli(["trainprof", "ls"])
        wrong: str = out
        count: str = _core.Run("runs/x").counters()
    """))
    caught = _mypy("--ignore-missing-imports", str(bad), cwd=tmp_path)
    assert caught.returncode == 1, caught.stdout
    assert "bad.py:4" in caught.stdout and "bad.py:5" in caught.stdout, caught.stdout


def test_every_public_name_has_a_docstring():
    import inspect

    import trainprof

    missing = []
    for name in trainprof.__all__:
        obj = getattr(trainprof, name)
        if not (getattr(obj, "__doc__", None) or "").strip():
            missing.append(name)
        if inspect.isclass(obj):
            for attr, value in vars(obj).items():
                if attr.startswith("_") or not (callable(value) or isinstance(value, property)):
                    continue
                if not (getattr(value, "__doc__", None) or "").strip():
                    missing.append(f"{name}.{attr}")
    assert not missing, missing
