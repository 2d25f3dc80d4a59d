"""Progress of long CLI work on a terminal (issue 17): `import` and `export` draw one progress
line on stderr when stderr is a terminal (here a pseudo-terminal), erase it at the end, and
stay silent when stderr is a pipe or under --quiet. The numbers on the line are checked against
the input file's size from the file system, not against trainprof's own figures.
TRAINPROF_PROGRESS_AFTER_MS=0 makes the line appear at once (by default only after 1 s, and
the biggest stored trace imports in well under that)."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess

import pytest

from conftest import SHARED_DATA, trainprof_command

CLEAR = "\r\x1b[K"


def _biggest_trace():
    traces = sorted((SHARED_DATA / "traces").rglob("*.json.gz"), key=lambda p: p.stat().st_size)
    if not traces:
        pytest.fail(f"no Kineto traces under {SHARED_DATA / 'traces'}")
    return traces[-1]


def _mib(n: int) -> str:
    """cli/output.cc FormatBytes for sizes of 1 MiB and more (what the stored traces are)."""
    assert 2**20 <= n < 2**30
    return f"{n / 2**20:.1f} MiB"


def _run_on_pty(args, env_extra=None, timeout=60):
    """Runs the CLI with stderr on a pseudo-terminal (stdout a pipe); returns (rc, stdout,
    what the terminal received)."""
    env = dict(os.environ, **(env_extra or {}))
    master, slave = pty.openpty()
    proc = subprocess.Popen([*trainprof_command(), *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    received = b""
    stdout = b""
    try:
        while True:
            ready, _, _ = select.select([master, proc.stdout], [], [], timeout)
            if not ready:
                pytest.fail("the command stalled")
            if master in ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the terminal's last writer closed it
                    chunk = b""
                if not chunk:
                    break
                received += chunk
            if proc.stdout in ready:
                data = proc.stdout.read1(65536)
                if not data and proc.poll() is not None:
                    break
                stdout += data
        stdout += proc.stdout.read()
        rc = proc.wait(timeout=timeout)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return rc, stdout.decode(), received.decode(errors="replace")


def test_import_draws_progress_on_a_terminal_and_clears_it(tmp_path):
    trace = _biggest_trace()
    size = trace.stat().st_size
    rc, out, tty = _run_on_pty(["import", "kineto", str(trace), "--out", str(tmp_path / "run")],
                               {"TRAINPROF_PROGRESS_AFTER_MS": "0"})
    assert rc == 0, tty
    lines = [x for x in tty.replace("\x1b[K", "").split("\r") if x.strip()]
    assert lines, repr(tty)
    assert all(x.startswith("import kineto: ") for x in lines), lines
    # The total is the file's size once known (a first line may show only the elapsed time,
    # drawn before the importer opened the file); the last line drawn has read all of it.
    counted = [x for x in lines if " / " in x]
    assert counted and all(f"/ {_mib(size)} (" in x for x in counted), (size, lines)
    assert all(re.fullmatch(r"import kineto: +\d+:\d\d", x) for x in lines if " / " not in x), lines
    assert any(re.search(r"\(\d+%\)", x) for x in lines), lines
    # The end: the line is erased (carriage return, erase to end of line) and nothing follows.
    assert tty.endswith(CLEAR), repr(tty[-80:])
    # The terminal got no other text; the summary went to stdout.
    assert "imported" in out and "imported" not in tty


def test_import_piped_draws_nothing(tmp_path):
    trace = _biggest_trace()
    proc = subprocess.run([*trainprof_command(), "import", "kineto", str(trace), "--out",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, TRAINPROF_PROGRESS_AFTER_MS="0"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "imported" in proc.stdout


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_on_a_terminal_draws_and_prints_nothing(tmp_path, where):
    trace = _biggest_trace()
    args = ["import", "kineto", str(trace), "--out", str(tmp_path / "run")]
    args = ["--quiet", *args] if where == "before" else [*args, "--quiet"]
    rc, out, tty = _run_on_pty(args, {"TRAINPROF_PROGRESS_AFTER_MS": "0"})
    assert rc == 0, tty
    assert tty == "" and out == ""
    assert (tmp_path / "run" / "run.json").exists()


def test_export_draws_bytes_written_and_clears(tmp_path):
    trace = _biggest_trace()
    subprocess.run([*trainprof_command(), "import", "kineto", str(trace), "--out",
                    str(tmp_path / "run")], check=True, capture_output=True, timeout=60)
    out_file = tmp_path / "trace.json"
    rc, out, tty = _run_on_pty(["export", "chrome-trace", str(tmp_path / "run"), "--out",
                                str(out_file)], {"TRAINPROF_PROGRESS_AFTER_MS": "0"})
    assert rc == 0, tty
    lines = [x for x in tty.replace("\x1b[K", "").split("\r") if x.strip()]
    assert lines and all(x.startswith("export chrome-trace: ") for x in lines), lines
    assert tty.endswith(CLEAR)
    # Bytes written never exceed the file's final size (no total is known ahead: no percent).
    size = out_file.stat().st_size
    for x in lines:
        m = re.search(r"(\d+(?:\.\d)?) (B|KiB|MiB) ", x)
        if m:
            scale = {"B": 1, "KiB": 2**10, "MiB": 2**20}[m.group(2)]
            assert float(m.group(1)) * scale <= size * 1.001 + 2**20 * 0.05, (x, size)
        assert "%" not in x and "ETA" not in x
