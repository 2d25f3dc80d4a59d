"""A job that records itself (trainprof._rec) and reads its run (trainprof._core) in one process,
while another process reads the same store: the job keeps its SQLite locks and lives.

Both extension modules used to carry a private copy of SQLite. File locks belong to the process,
so the reader's copy closing its descriptor of the job's store dropped the locks the writer's
copy held on it. The next process to open the store (an agent's live rules) then found no one
there and reset the store's shared-memory index under the writer, which died of SIGBUS (CI,
test_live_rules.py::test_agent_evaluates_live_for_a_job_it_did_not_start, exit status -7).

The kernel's lock table (/proc/locks) and Python's own sqlite3 module, in another process, are
the independent witnesses here."""

from __future__ import annotations

import glob
import os
import sqlite3
import subprocess
import sys
import textwrap

JOB = textwrap.dedent("""
    import os, sys, time
    import trainprof
    run = sys.argv[1]
    assert trainprof.start(out=run, auto=False, system_metrics=False)

    def steps(seconds):
        t_end = time.time() + seconds
        while time.time() < t_end:
            with trainprof.step(mode="train"):
                time.sleep(0.005)

    steps(0.5)
    trainprof.flush()
    # The reader opens every store of the run, this process's own included, and closes them.
    for _ in range(3):
        trainprof.open(run).findings()
    print("read", flush=True)
    sys.stdin.readline()            # the other process has opened the store meanwhile
    steps(1.5)                      # the writer touches its shared-memory index again
    trainprof.flush()
    trainprof.stop()
    print("done", flush=True)
""")


def _locks_held_by(pid: int, inode: int) -> list[str]:
    with open("/proc/locks") as f:
        return [line for line in f
                if len(line.split()) > 5 and line.split()[4] == str(pid)
                and line.split()[5].rsplit(":", 1)[-1] == str(inode)]


def test_the_job_keeps_its_store_locks_after_reading_its_own_run_and_lives(tmp_path):
    run = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINPROF_")}
    job = subprocess.Popen([sys.executable, "-c", JOB, str(run)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert job.stdout.readline().strip() == "read", job.stderr.read()
        stores = glob.glob(str(run / "nodes" / "*" / f"proc-{job.pid}.sqlite"))
        assert len(stores) == 1, sorted(map(str, run.rglob("*")))
        store = stores[0]
        shm = store + "-shm"
        assert os.path.exists(shm), "the store is not in WAL mode"
        # The writer still holds its locks on the shared-memory index (SQLite's "DMS" read
        # lock among them): the kernel's view.
        held = _locks_held_by(job.pid, os.stat(shm).st_ino)
        assert held, open("/proc/locks").read()

        # Another process reads the store (Python's own SQLite). Finding no lock there, it
        # would take the store for abandoned and reset the index (truncating it while the job
        # maps it: the SIGBUS); with the locks held it reads alongside the writer.
        con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        rows = con.execute("SELECT count(*) FROM meta").fetchone()[0]
        con.close()
        assert rows > 0
        assert _locks_held_by(job.pid, os.stat(shm).st_ino)

        job.stdin.write("go\n")
        job.stdin.flush()
        out, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, f"exit status {job.returncode}: {err}"
    assert "done" in out, out + err
    # Everything the job recorded after the other reader came is there.
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()


def test_both_modules_use_the_one_shared_sqlite():
    """Both modules loaded, one SQLite mapped: the package's shared library; neither module
    carries SQLite's code itself (its symbol table)."""
    code = textwrap.dedent("""
        import trainprof._core as c, trainprof._rec as r
        print(c.__file__); print(r.__file__)
        print("\\n".join(sorted({line.split()[-1] for line in open("/proc/self/maps")
                                 if "trainprof_sqlite3" in line})))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    core, rec, *libs = r.stdout.split()
    assert len(libs) == 1 and libs[0].endswith("libtrainprof_sqlite3.so"), libs
    for module in (core, rec):
        nm = subprocess.run(["nm", module], capture_output=True, text=True)
        assert nm.returncode == 0, nm.stderr
        defined = [line for line in nm.stdout.splitlines()
                   if line.endswith(" sqlite3VdbeExec") and " U " not in line]
        assert not defined, f"{module} carries its own SQLite: {defined}"
