"""The explicit recording API (trainprof.start/step/span/mark/annotate), faults and fork, in
real subprocesses writing real run directories."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import json

import pandas as pd
import pytest

import trainprof
from instrument_util import REPO, events_df, hooked_env, steps_df


def run_script(code: str, *, env=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env or dict(os.environ),
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_explicit_api_records_steps_spans_marks_and_annotations(tmp_path):
    run = tmp_path / "run"
    proc = run_script(f"""
        import time, warnings, threading
        import trainprof
        assert trainprof.start(out={str(run)!r}, auto=False)
        @trainprof.span("helper", category="user")
        def helper():
            time.sleep(0.001)
        for i in range(4):
            with trainprof.step(mode="train"):
                with trainprof.span("data_wait", category="data_wait"):
                    time.sleep(0.002)
                with trainprof.span("forward", category="forward"):
                    time.sleep(0.003)
                helper()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            with trainprof.step():
                with trainprof.step():   # misuse: warned once, ignored
                    pass
            s = trainprof.span("x")
            with s:
                pass
            s.__exit__(None, None, None)  # ended twice: warned
            print("WARNINGS", len(w))
        def worker():
            for _ in range(100):
                with trainprof.span("thread_work"):
                    pass
        ts = [threading.Thread(target=worker) for _ in range(4)]
        [t.start() for t in ts]; [t.join() for t in ts]
        trainprof.mark("download_start", url="s3://bucket/x")
        trainprof.annotate(batch_size=64, optimizer="sgd")
        trainprof.stop()
    """)
    assert proc.returncode == 0, proc.stderr
    assert "WARNINGS 2" in proc.stdout
    steps = steps_df(run)
    train = steps[steps["mode"] == "train"].sort_values("step")
    assert list(train["step"]) == [0, 1, 2, 3, 4]
    first = train.iloc[0]
    assert first["data_wait_ns"] >= 2_000_000 and first["forward_ns"] >= 3_000_000
    assert first["duration_ns"] >= first["data_wait_ns"] + first["forward_ns"]
    assert train["backward_ns"].isna().all()  # absent parts are missing, not 0
    ev = events_df(run)
    assert (ev["name"] == "thread_work").sum() == 400
    assert (ev["name"] == "helper").sum() == 4
    mark = ev[ev["category"] == "mark"]
    assert list(mark["name"]) == ["download_start"] and "s3://bucket/x" in mark["args"].iloc[0]
    ann = {a[2]: a[3] for a in trainprof.open(str(run)).annotations()}
    assert ann["batch_size"] == "64" and ann["optimizer"] == "sgd"


def test_span_type_args_keywords_and_the_current_step(tmp_path):
    """trainprof.span is the C type in trainprof._rec: its attributes, keyword forms, args as
    JSON, spans of other threads carrying the process's current step, and record_span's
    CURRENT defaults (what the automatic instrumentation calls)."""
    run = tmp_path / "run"
    proc = run_script(f"""
        import json, threading, time
        import trainprof
        from trainprof import _recorder as R
        assert trainprof.start(out={str(run)!r}, auto=False)
        s = trainprof.span("load", category="io", shard=3, path="/data/x")
        assert (s.name, s.category) == ("load", "io") and json.loads(s.args) == {{"shard": 3, "path": "/data/x"}}
        assert trainprof.span(name="n").category == "user" and trainprof.span("n").args is None
        for bad in (lambda: trainprof.span(), lambda: trainprof.span("a", name="b"),
                    lambda: trainprof.span("a", "c", category="d"),
                    lambda: R.record_span("a", "b", 1, 2, 3, step=4)):
            try:
                bad()
            except TypeError:
                pass
            else:
                raise AssertionError("accepted a call Python would refuse")
        with trainprof.step(mode="eval", step=7):
            with s:
                pass
            t = threading.Thread(target=lambda: trainprof.span("other_thread").__enter__().__exit__(None, None, None))
            t.start(); t.join()
            t0 = time.perf_counter_ns()
            R.record_span("auto_part", "forward", t0, t0 + 5000)                 # current step
            R.record_span("no_step", "user", t0, t0 + 5000, step=None, mode="")  # explicitly none
        R.record_span("bad", "user", "not a time", t0)                           # counted, ignored
        with s:
            pass                                                                  # outside a step
        trainprof.stop()
    """)
    assert proc.returncode == 0, proc.stderr
    ev = events_df(run)
    load = ev[ev["name"] == "load"].sort_values("start_ns")
    assert len(load) == 2 and set(load["category"]) == {"io"}
    assert json.loads(load["args"].iloc[0]) == {"shard": 3, "path": "/data/x"}
    assert load["step"].iloc[0] == 7 and load["mode"].iloc[0] == "eval"
    assert pd.isna(load["step"].iloc[1]) and load["mode"].iloc[1] == ""
    other = ev[ev["name"] == "other_thread"].iloc[0]
    assert other["step"] == 7 and other["tid"] != load["tid"].iloc[0]
    part = ev[ev["name"] == "auto_part"].iloc[0]
    assert part["step"] == 7 and part["mode"] == "eval" and part["duration_ns"] == 5000
    assert pd.isna(ev[ev["name"] == "no_step"]["step"].iloc[0])
    assert "bad" not in set(ev["name"])
    assert trainprof.open(str(run)).data_quality()["malformed_events"] == 1


def test_the_startup_hook_imports_no_numpy_and_the_reading_api_loads_on_use():
    """The hook runs in every Python process of a recorded job: it must stay small."""
    proc = run_script("""
        import sys
        import trainprof
        assert "numpy" not in sys.modules and "trainprof._core" not in sys.modules, sorted(sys.modules)
        assert "json" not in sys.modules and "multiprocessing" not in sys.modules
        assert callable(trainprof.open) and "numpy" in sys.modules   # loaded on first use
        assert issubclass(trainprof.TrainprofError, Exception)
        assert "open" in dir(trainprof)
        try:
            trainprof.no_such_thing
        except AttributeError:
            print("OK")
    """)
    assert proc.returncode == 0, proc.stderr
    assert "OK" in proc.stdout


def test_disable_turns_everything_off(tmp_path):
    run = tmp_path / "run"
    env = dict(os.environ, TRAINPROF_DISABLE="1")
    proc = run_script(f"""
        import trainprof
        assert trainprof.start(out={str(run)!r}) is None
        with trainprof.step():
            with trainprof.span("x"):
                pass
        trainprof.stop()
    """, env=env)
    assert proc.returncode == 0, proc.stderr
    assert not run.exists()


def test_sitecustomize_hook_starts_recording_and_chains_to_the_existing_one(tmp_path):
    run = tmp_path / "run"
    user_site = tmp_path / "usersite"
    user_site.mkdir()
    (user_site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITECUSTOMIZE_RAN'] = '1'\n")
    env = hooked_env(run)
    env["PYTHONPATH"] = env["PYTHONPATH"] + os.pathsep + str(user_site)
    proc = run_script("""
        import os, trainprof
        from trainprof import _recorder
        print("ACTIVE", _recorder.S.active, os.environ.get("USER_SITECUSTOMIZE_RAN"))
        with trainprof.step():
            pass
    """, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "ACTIVE True 1" in proc.stdout
    assert len(steps_df(run)) == 1
    # TRAINPROF_DISABLE=1 wins over the hook
    run2 = tmp_path / "run2"
    env2 = hooked_env(run2, TRAINPROF_DISABLE="1")
    proc = run_script("from trainprof import _recorder; print('ACTIVE', _recorder.S.active)", env=env2)
    assert "ACTIVE False" in proc.stdout and not run2.exists()


SPIN = """
    import os, sys, time, trainprof
    trainprof.start(out=sys.argv[1], auto=False, flush_interval_s=0.2)
    for i in range(20):
        with trainprof.step():
            with trainprof.span("work"):
                time.sleep(0.005)
    time.sleep(1.0)   # the flusher has written the 20 steps by now
    print("READY", flush=True)
    {ending}
"""


@pytest.mark.parametrize("ending,sig", [
    ("raise RuntimeError('training crashed')", None),
    ("os._exit(3)", None),
    ("time.sleep(60)", signal.SIGKILL),
    ("time.sleep(60)", signal.SIGTERM),
], ids=["crash", "os_exit", "sigkill", "sigterm"])
def test_faults_keep_every_flushed_event(tmp_path, ending, sig):
    run = tmp_path / "run"
    script = tmp_path / "spin.py"
    script.write_text(textwrap.dedent(SPIN.format(ending=ending)))
    proc = subprocess.Popen([sys.executable, str(script), str(run)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)
    line = proc.stdout.readline()
    assert "READY" in line, proc.stderr.read()
    if sig is not None:
        proc.send_signal(sig)
    proc.wait(timeout=60)
    steps = steps_df(run)
    assert len(steps) == 20
    assert steps["step"].tolist() == list(range(20))


def test_fork_without_exec_child_writes_its_own_store(tmp_path):
    run = tmp_path / "run"
    proc = run_script(f"""
        import os, time, trainprof
        trainprof.start(out={str(run)!r}, auto=False)
        with trainprof.span("parent_before"):
            pass
        pid = os.fork()
        if pid == 0:
            with trainprof.span("in_child"):
                time.sleep(0.01)
            trainprof.flush()
            os._exit(0)
        os.waitpid(pid, 0)
        with trainprof.span("parent_after"):
            pass
        trainprof.stop()
        print("CHILD", pid)
    """)
    assert proc.returncode == 0, proc.stderr
    child = int(proc.stdout.split("CHILD")[1])
    ev = events_df(run, categories=["user"])
    names = sorted(ev["name"])
    assert names == ["in_child", "parent_after", "parent_before"]  # nothing written twice
    assert ev.loc[ev["name"] == "in_child", "pid"].item() == child
    assert (run / "nodes").exists() and any(p.name == f"proc-{child}.sqlite" for p in (run / "nodes").rglob("*.sqlite"))


@pytest.mark.parametrize("launcher", ["horovod", "slurm", "openmpi"])
def test_rank_and_node_come_from_the_launchers_environment(tmp_path, launcher):
    """horovodrun / Open MPI / SLURM set their own variables (no torch.distributed): each
    process still records its rank, local rank, world size and node."""
    run = tmp_path / "run"
    names = {"horovod": ("HOROVOD_RANK", "HOROVOD_LOCAL_RANK", "HOROVOD_SIZE"),
             "slurm": ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"),
             "openmpi": ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                         "OMPI_COMM_WORLD_SIZE")}[launcher]
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE") and not k.startswith("TRAINPROF_")}
    env.update(dict(zip(names, ("3", "1", "4"))))
    if launcher == "slurm":
        env["SLURMD_NODENAME"] = "gpu-node-07"
    proc = run_script(f"""
        import trainprof
        trainprof.start(out={str(run)!r})
        for _ in range(2):
            with trainprof.step():
                pass
        trainprof.stop()
    """, env=env)
    assert proc.returncode == 0, proc.stderr
    steps = steps_df(run)
    assert len(steps) == 2 and set(steps["rank"]) == {3}
    r = trainprof.open(str(run))
    if launcher == "slurm":
        assert r.nodes == ["gpu-node-07"]
    # Local rank and world size are facts of the process store (read with SQLite itself).
    import sqlite3

    [store] = list((run / "nodes").glob("*/proc-*.sqlite"))
    with sqlite3.connect(store) as db:
        meta = dict(db.execute("SELECT key, value FROM meta"))
    assert meta["process.local_rank"] == "1" and meta["process.world_size"] == "4"
