"""Faults a recording must survive (issue 20, docs/reliability.md): the wall clock stepped
during a run, two recorders on one run directory, a read-only run directory, a run directory
deleted mid-run. Real processes throughout."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import trainprof

REPO = Path(__file__).resolve().parents[2]
FAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def run_script(code: str, *, env=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          env=env or dict(os.environ), cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("jump_s", [-3600, 3600])
def test_wall_clock_steps_change_neither_durations_nor_the_order_of_timestamps(tmp_path, jump_s):
    # libfaketime (Debian's, LD_PRELOAD) fakes CLOCK_REALTIME only (monotonic left alone, as a
    # real `date -s` or an NTP step would); the offset is re-read from a file on every call, so
    # the program itself steps the wall clock between its fifth and sixth step.
    assert FAKETIME.exists(), "libfaketime is in scripts/system-packages.txt"
    run = tmp_path / "run"
    offset = tmp_path / "faketime"
    offset.write_text("+0\n")
    env = dict(os.environ, LD_PRELOAD=str(FAKETIME), FAKETIME_TIMESTAMP_FILE=str(offset),
               FAKETIME_NO_CACHE="1", FAKETIME_DONT_FAKE_MONOTONIC="1")
    proc = run_script(f"""
        import time
        import trainprof
        assert trainprof.start(out={str(run)!r}, auto=False)
        for i in range(10):
            if i == 5:
                before = time.time()
                open({str(offset)!r}, "w").write("{jump_s:+d}\\n")
                print("JUMP", time.time() - before)
            with trainprof.step(mode="train"):
                with trainprof.span("forward", category="forward"):
                    end = time.perf_counter() + 0.02
                    while time.perf_counter() < end:  # time.sleep: EINVAL under the shim
                        pass
        trainprof.stop()
    """, env=env)
    assert proc.returncode == 0, proc.stderr
    # The shim works: the program saw its wall clock jump.
    seen = float(proc.stdout.split("JUMP")[1].split()[0])
    assert abs(seen - jump_s) < 5, proc.stdout
    ev = trainprof.open(str(run)).events().to_pandas()
    fwd = ev[ev["name"] == "forward"].sort_values("step")
    assert list(fwd["step"]) == list(range(1, 11)) or list(fwd["step"]) == list(range(10))
    # Durations are the monotonic clock's: each 20 ms sleep, no hour added or taken.
    assert (fwd["duration_ns"] >= 20_000_000).all()
    assert (fwd["duration_ns"] < 500_000_000).all(), fwd["duration_ns"].tolist()
    # Timestamps keep the order of the calls and their spacing across the step: the recorder's
    # clock is CLOCK_MONOTONIC plus an offset taken at start, so a wall step is not seen.
    starts = fwd["start_ns"].tolist()
    gaps = [b - a for a, b in zip(starts, starts[1:])]
    assert all(20_000_000 <= g < 1_000_000_000 for g in gaps), gaps


def test_two_recorders_on_one_run_directory_each_keep_their_own_store(tmp_path):
    # Two processes started on the same run directory at once: each writes its own process
    # store (proc-<pid>.sqlite), neither store is corrupted, and every span of each is read back.
    run = tmp_path / "run"
    code = textwrap.dedent(f"""
        import os, sys, threading
        import trainprof
        assert trainprof.start(out={str(run)!r}, auto=False, node="shared")
        def work():
            for i in range(2000):
                with trainprof.span("s", category="user", who=os.getpid()):
                    pass
        ts = [threading.Thread(target=work) for _ in range(2)]
        [t.start() for t in ts]; [t.join() for t in ts]
        trainprof.stop()
        print(os.getpid())
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    pids = sorted(int(out.split()[-1]) for out, _ in outs)
    stores = sorted(p.name for p in (run / "nodes" / "shared").glob("proc-*.sqlite"))
    assert stores == sorted(f"proc-{pid}.sqlite" for pid in pids)
    for store in stores:
        check = subprocess.run(["sqlite3", str(run / "nodes" / "shared" / store),
                                "PRAGMA integrity_check"], capture_output=True, text=True)
        if check.returncode == 0 or "not found" not in check.stderr:
            assert check.stdout.strip() == "ok", (store, check.stdout, check.stderr)
    ev = trainprof.open(str(run)).events(names=["s"]).to_pandas()
    assert sorted(ev.groupby("pid").size().to_dict().items()) == [(pid, 4000) for pid in pids]


def test_read_only_run_directory_is_a_clear_warning_and_the_job_keeps_its_exit_status(tmp_path):
    # A read-only bind mount (root ignores permission bits, so chmod would prove nothing).
    run = tmp_path / "run"
    run.mkdir()
    code = (f"import trainprof, sys\n"
            f"print('START', trainprof.start(out={str(run)!r}, auto=False))\n"
            f"with trainprof.span('x'):\n    pass\n"
            f"trainprof.stop()\nsys.exit(3)\n")
    script = tmp_path / "job.py"
    script.write_text(code)
    shell = (f"mount --bind {run} {run} && mount -o remount,bind,ro {run} && "
             f"exec {sys.executable} {script}")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", shell], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    if "Operation not permitted" in proc.stderr and "START" not in proc.stdout:
        pytest.fail(f"cannot make a read-only bind mount here: {proc.stderr}")
    assert proc.returncode == 3, proc.stderr
    assert "START None" in proc.stdout
    assert "recording is off" in proc.stderr and "Read-only file system" in proc.stderr
    assert str(run) in proc.stderr
    assert list(run.iterdir()) == []


def test_run_directory_deleted_mid_run_warns_and_the_job_keeps_its_exit_status(tmp_path):
    run = tmp_path / "run"
    proc = run_script(f"""
        import shutil, sys, time
        import trainprof
        assert trainprof.start(out={str(run)!r}, auto=False, flush_interval_s=0.05)
        for i in range(200):
            with trainprof.span("before"):
                pass
        time.sleep(0.2)
        shutil.rmtree({str(run)!r})
        for i in range(200):
            with trainprof.span("after"):
                pass
        time.sleep(0.2)
        trainprof.stop()
        print("STOPPED")
        sys.exit(7)
    """)
    assert proc.returncode == 7, proc.stderr
    assert "STOPPED" in proc.stdout
    assert "Traceback" not in proc.stderr
    # Said once, naming the directory and what it means (was: silence, the spans after the
    # removal going into unlinked files; only run.json's final update complained).
    assert proc.stderr.count("was removed during the run") == 1, proc.stderr
    assert str(run) in proc.stderr
    assert not run.exists()


def test_span_load_short_form_accounts_for_every_span_in_bounded_memory(tmp_path):
    # bench/span_load.py's short form (the full one, 16 x 8 x 30 s, is bench section
    # span_load): 4 processes x 4 threads emitting as fast as they can for 2 s into one run.
    sys.path.insert(0, str(REPO / "bench"))
    import span_load

    m = span_load.measure(4, 4, 2.0, tmp_path)
    print(span_load.describe("record_span", m["load"]))
    print(span_load.describe("control", m["control"]))
    assert m["load"]["calls"] > 10_000
    # Every span is stored or counted as dropped, per process, exactly (read back from the run).
    for row in m["accounting"]:
        assert row["stored"] + row["dropped"] == row["emitted"], row
        assert row["written"] == row["stored"], row
    # Memory bounded: an interpreter plus at most 64 MiB of buffers per thread was the design;
    # seen: about 50 MiB per process.
    assert m["peak_rss_mib"] < 256, m["peak_rss_mib"]
    # Most calls are sub-microsecond; the tail belongs to a 2-core machine shared by 16 threads
    # (see the control). The longest call is reported, not asserted (docs/reliability.md).
    assert span_load.percentile_us(m["load"]["hist"], 0.99) in ("<= 1 us", "<= 2 us", "<= 5 us",
                                                                "<= 10 us")
