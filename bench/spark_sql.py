#!/usr/bin/env python3
"""docs/fleet.md's fleet questions in Spark SQL and in DuckDB over the same Parquet export
(issue 21): the queries are read out of the docs' fenced ```sql blocks (section "The fleet's
questions in DuckDB and Spark SQL": the first block is DuckDB's, the second Spark's), so that
what is checked is what the docs show.

    python3 bench/spark_sql.py [--runs 16] [--repeat 3] [--spark-python .venv-bench/bin/python]
                               [--docs docs/fleet.md] [--keep DIR]

1. A fleet of --runs runs is written through trainprof.RunWriter (so it runs under the
   project's .venv): per run an instance type from a fixed list (run.json), phase spans
   (download, initialization, training, upload), steps with a data wait, and GPU utilisation
   samples drawn here (the generated truth of the GPU query).
2. `trainprof export parquet RUNS --out WORK/out` (Hive partitions run=<name>).
3. DuckDB (the project's, in this process) runs the docs' DuckDB block, and pyspark in local
   mode (SparkSession.builder.master("local[2]"), in --spark-python, a child process) runs the
   docs' Spark block, both with WORK as the working directory, so the docs' relative paths
   ('out/costs/...') are used as written. Each repeat is a fresh DuckDB connection / Spark
   session (newSession: views are made again) and runs every statement of its block.
4. The SELECTs are paired in order: the same column names, the same rows (in order where the
   query has ORDER BY, else as sets), numbers to a relative 1e-9. Queries whose columns are
   known are also checked against the runs themselves: spend per usage type, per phase and the
   what-if savings against each run's own `trainprof cost RUN --json`, the mean GPU utilisation
   against the generated samples.

Prints each query's rows (first lines), the timings and met / NOT met (target: no query whose
rows differ). Exit 0 when it ran (a difference is a result: NOT met), 1 when the check could
not be made or the answers differ from the runs' truth, 77 when Java or pyspark is missing (the
last line says which). Under bench/run_all.sh ($BENCH_RESULTS set) the figures spark.* go to the
results file (bench/targets.toml).

The Spark side is this file run as `spark_sql.py spark-worker --dir WORK --repeat N` under the
Spark Python; it reads the statements as JSON on stdin and prints one line `SPARK_RESULT {...}`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench" / "lib"))
import results  # noqa: E402 - bench/lib/results.py: the figures for bench/out/results.json

FIG_DIFFER = "spark.queries_differing"
FIG_DUCKDB = "spark.duckdb_s"
FIG_START = "spark.spark_start_s"
FIGURES = (FIG_DIFFER, FIG_DUCKDB, FIG_START)
SECTION_TITLE = "### The fleet's questions in DuckDB and Spark SQL"
REL_TOL = 1e-9
RESULT_MARK = "SPARK_RESULT "

# instance type, GPUs on it (the catalog's ml.* training rows; m5 and p3 bill a storage volume)
TYPES = [("ml.g5.xlarge", 1), ("ml.p3.2xlarge", 1), ("ml.m5.xlarge", 0), ("ml.g4dn.xlarge", 1),
         ("ml.g5.12xlarge", 4)]
START_NS = 1_790_000_000 * 10**9  # 2026-09-21
SAMPLE_NS = 5 * 10**9


# ---- the docs' queries --------------------------------------------------------------------------

def split_sql(block: str) -> list[str]:
    """The statements of a SQL block: full-line `--` comments dropped, split at ';'."""
    text = "\n".join(line for line in block.splitlines() if not line.strip().startswith("--"))
    return [s.strip() for s in text.split(";") if s.strip()]


def docs_queries(docs: Path) -> tuple[list[str], list[str]]:
    """(DuckDB statements, Spark statements) from the docs' section's two ```sql blocks."""
    text = docs.read_text()
    start = text.find(SECTION_TITLE)
    if start < 0:
        raise SystemExit(f"{docs}: no section {SECTION_TITLE!r}")
    rest = text[start + len(SECTION_TITLE):]
    end = re.search(r"^#{2,3} ", rest, re.M)
    section = rest[:end.start()] if end else rest
    blocks = re.findall(r"^```sql\n(.*?)^```", section, re.M | re.S)
    if len(blocks) != 2:
        raise SystemExit(f"{docs}: section {SECTION_TITLE!r} has {len(blocks)} ```sql blocks, "
                         "expected 2 (DuckDB's, then Spark's)")
    duck, spark = (split_sql(b) for b in blocks)
    if not any(is_select(s) for s in duck) or not any(is_select(s) for s in spark):
        raise SystemExit(f"{docs}: a ```sql block without a SELECT")
    return duck, spark


def is_select(stmt: str) -> bool:
    return stmt.lstrip().upper().startswith(("SELECT", "WITH"))


def ordered(stmt: str) -> bool:
    return re.search(r"\border\s+by\b", stmt, re.I) is not None


# ---- the fleet ----------------------------------------------------------------------------------

def generate(runs_dir: Path, n: int, seed: int = 21) -> dict[str, list[float]]:
    """Writes n runs; returns each run's GPU utilisation samples (the GPU query's truth)."""
    import numpy as np

    import trainprof

    rng = random.Random(seed)
    gen = np.random.default_rng(seed)
    gpu_values: dict[str, list[float]] = {}
    for i in range(n):
        itype, gpus = TYPES[i % len(TYPES)]
        # Names of digits with leading zeros: the one case where the engines' partition-type
        # inference parts (Spark would read run=0007 as the integer 7, DuckDB as the text
        # '0007'), so the docs' queries must turn it off for the answers to agree.
        name = f"{i + 1:04d}"
        d = runs_dir / name
        start = START_NS + i * 86_400 * 10**9
        phases = [("download", rng.choice([0, rng.randint(60, 900)])),
                  ("initialization", rng.randint(30, 300)),
                  ("training", rng.randint(600, 3600)),
                  ("upload", rng.randint(10, 120))]
        end = start + sum(s for _, s in phases) * 10**9
        with trainprof.RunWriter(d, node="algo-1", name=name, start_ns=start) as w:
            t = start
            for phase, secs in phases:
                if secs:
                    w.append_event(phase, "phase", t, secs * 10**9)
                if phase == "training":  # steps of 2 s with a data wait of 0..60 %
                    wait_share = rng.uniform(0.0, 0.6)
                    for s in range(min(200, secs // 2)):
                        b = t + s * 2 * 10**9
                        w.append_event("step", "step", b, 2 * 10**9, mode="train", step=s,
                                       rank=0, pid=100, tid=100)
                        w.append_event("data_wait", "data_wait", b, int(wait_share * 2e9),
                                       mode="train", step=s, rank=0, pid=100, tid=100)
                t += secs * 10**9
            ts = np.arange(start + SAMPLE_NS, end + 1, SAMPLE_NS, dtype=np.int64)
            vals: list[float] = []
            for g in range(gpus):
                v = np.round(gen.uniform(0.0, 1.0, len(ts)), 4)
                w.append_metric("gpu_utilization_ratio", f"gpu{g}", ts, v)
                vals += v.tolist()
            w.append_metric("cpu_utilization_ratio", "total", ts,
                            np.round(gen.uniform(0.0, 1.0, len(ts)), 4))
            w.close(end_ns=end, exit_status=0)
        if vals:
            gpu_values[name] = vals
        meta = json.loads((d / "run.json").read_text())
        meta["instance_type"] = itype
        meta["instance_count"] = 1
        (d / "run.json").write_text(json.dumps(meta, indent=1))
    return gpu_values


def trainprof_cmd() -> list[str]:
    exe = os.environ.get("TRAINPROF_BIN")
    if exe:
        return [exe]
    found = shutil.which("trainprof", path=str(Path(sys.executable).parent)) or \
        shutil.which("trainprof")
    return [found] if found else [sys.executable, "-m", "trainprof"]


def truth_of(run_dirs: list[Path], gpu_values: dict[str, list[float]]) -> dict[tuple, list]:
    """The docs' questions answered from each run's own `trainprof cost RUN --json` and the
    generated samples, keyed by the query's column names (lower case)."""
    usage: dict[str, list[float]] = {}
    phase: dict[str, float] = {}
    what: dict[str, list[float]] = {}
    for d in run_dirs:
        p = subprocess.run(trainprof_cmd() + ["cost", str(d), "--json"], capture_output=True,
                           text=True, check=True)
        c = json.loads(p.stdout)
        code = {"us-east-1": "USE1"}  # every generated run is priced in us-east-1
        for n in c["nodes"]:
            region = (n.get("price") or c["price"])["region"]
            ut = f"{code[region]}-Train:{n['instance_type']}"
            u = usage.setdefault(ut, [0.0, 0.0])
            u[0] += n["billed_seconds"] / 3600
            u[1] += n["compute_cost_usd"]
            if n["storage_cost_usd"] > 0:
                u = usage.setdefault(f"{code[region]}-Train:VolumeUsage.gp2", [0.0, 0.0])
                u[0] += n["billed_seconds"] / 3600
                u[1] += n["storage_cost_usd"]
            for ph in n["phases"]:
                phase[ph["phase"]] = phase.get(ph["phase"], 0.0) + ph["cost_usd"]
        for w in c["what_ifs"]:
            x = what.setdefault(w["id"], [0, 0.0])
            x[0] += 1
            x[1] += w["saving_usd"]
    return {
        ("usage_type", "hours", "cost_usd"): [(k, h, v) for k, (h, v) in usage.items()],
        ("phase", "cost_usd"): list(phase.items()),
        ("what", "runs", "saving_usd"): [(k, r, s) for k, (r, s) in what.items()],
        ("run", "gpu_utilization"): [(k, math.fsum(v) / len(v)) for k, v in gpu_values.items()],
    }


# ---- the engines --------------------------------------------------------------------------------

def plain(v):
    """A cell as JSON-able plain Python (Spark's Decimal -> float)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


def run_duckdb(work: Path, stmts: list[str], repeat: int) -> dict:
    import duckdb

    here = os.getcwd()
    os.chdir(work)  # the docs' relative paths
    try:
        times, answers = [], []
        for _ in range(repeat):
            t = time.perf_counter()
            con = duckdb.connect()
            answers = []
            for s in stmts:
                cur = con.execute(s)
                if is_select(s):
                    cols = [c[0] for c in cur.description]
                    answers.append({"columns": cols,
                                    "rows": [[plain(v) for v in r] for r in cur.fetchall()]})
            con.close()
            times.append(time.perf_counter() - t)
    finally:
        os.chdir(here)
    return {"version": duckdb.__version__, "times": times, "answers": answers}


def spark_worker(work: Path, repeat: int) -> int:
    """Runs in the Spark Python: the statements (JSON on stdin), timed per fresh session."""
    stmts = json.loads(sys.stdin.read())
    os.chdir(work)
    t = time.perf_counter()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("trainprof-fleet-sql")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    start_s = time.perf_counter() - t
    times, answers = [], []
    try:
        for _ in range(repeat):
            t = time.perf_counter()
            session = spark.newSession()  # its own temporary views
            answers = []
            for s in stmts:
                df = session.sql(s)
                if is_select(s):
                    answers.append({"columns": list(df.columns),
                                    "rows": [[plain(v) for v in r] for r in df.collect()]})
            times.append(time.perf_counter() - t)
        import pyspark

        out = {"version": spark.version, "pyspark": pyspark.__version__,
               "java": spark.sparkContext._jvm.System.getProperty("java.version"),
               "start_s": start_s, "times": times, "answers": answers}
    finally:
        spark.stop()
    print(RESULT_MARK + json.dumps(out), flush=True)
    return 0


def spark_missing(spark_python: str) -> str | None:
    """Why Spark cannot run here, or None."""
    java = shutil.which("java", path=os.path.join(os.environ["JAVA_HOME"], "bin")) \
        if os.environ.get("JAVA_HOME") else shutil.which("java")
    if not java:
        return "no Java (java not on PATH, no JAVA_HOME): Spark SQL not checked"
    p = subprocess.run([java, "-version"], capture_output=True, text=True)
    m = re.search(r'version "(\d+)(?:\.(\d+))?', p.stderr + p.stdout)
    major = int(m.group(1)) if m else 0
    if major == 1 and m and m.group(2):
        major = int(m.group(2))
    if major < 17:
        return f"Java {major or '?'} found, Spark 4 needs 17 or later: Spark SQL not checked"
    if not os.access(spark_python, os.X_OK):
        return f"no {spark_python} (the bench venv): Spark SQL not checked"
    p = subprocess.run([spark_python, "-c", "import pyspark"], capture_output=True, text=True)
    if p.returncode != 0:
        return f"pyspark not importable in {spark_python}: Spark SQL not checked"
    return None


def run_spark(work: Path, stmts: list[str], repeat: int, spark_python: str, log: Path) -> dict:
    env = dict(os.environ, SPARK_LOCAL_IP=os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
               PYTHONUNBUFFERED="1")
    with open(log, "w") as err:
        p = subprocess.run([spark_python, str(Path(__file__).resolve()), "spark-worker", "--dir",
                            str(work), "--repeat", str(repeat)], input=json.dumps(stmts),
                           stdout=subprocess.PIPE, stderr=err, text=True, env=env, timeout=1800)
    lines = [x for x in p.stdout.splitlines() if x.startswith(RESULT_MARK)]
    if p.returncode != 0 or not lines:
        tail = log.read_text(errors="replace").strip().splitlines()[-15:]
        raise RuntimeError(f"the Spark worker failed (exit {p.returncode}); its log {log} ends:\n"
                           + "\n".join(tail))
    return json.loads(lines[-1][len(RESULT_MARK):])


# ---- comparing ----------------------------------------------------------------------------------

def same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12)
    return a == b


def sort_key(row):
    return [("" if v is None else str(v)) if not isinstance(v, (int, float)) else f"{v:+.6e}"
            for v in row]


def diff_rows(a: list, b: list, keep_order: bool) -> str | None:
    """None when the rows agree, else what differs first."""
    if len(a) != len(b):
        return f"{len(a)} rows against {len(b)}"
    if not keep_order:
        # Sort on the text columns first (group keys), then the numbers.
        a, b = sorted(a, key=sort_key), sorted(b, key=sort_key)
    for i, (x, y) in enumerate(zip(a, b)):
        if len(x) != len(y) or not all(same(u, v) for u, v in zip(x, y)):
            return f"row {i + 1}: {x} against {y}"
    return None


def show(rows: list, cols: list[str], limit: int = 6) -> str:
    def cell(v):
        return f"{v:,.6g}" if isinstance(v, float) else str(v)
    lines = ["      " + " | ".join(cols)]
    lines += ["      " + " | ".join(cell(v) for v in r) for r in rows[:limit]]
    if len(rows) > limit:
        lines.append(f"      ... {len(rows) - limit} more rows")
    return "\n".join(lines)


def skip_all(reason: str) -> int:
    for f in FIGURES:
        results.skip(f, reason)
    print(reason)
    return 77


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--docs", default=str(ROOT / "docs" / "fleet.md"))
    ap.add_argument("--spark-python", default=str(ROOT / ".venv-bench" / "bin" / "python"))
    ap.add_argument("--keep", help="work in this directory and keep it (runs/, out/, logs)")
    a = ap.parse_args()
    if a.runs < 2 or a.repeat < 1:
        ap.error("--runs must be at least 2 and --repeat at least 1")
    duck_sql, spark_sql = docs_queries(Path(a.docs))
    duck_q = [s for s in duck_sql if is_select(s)]
    spark_q = [s for s in spark_sql if is_select(s)]
    if len(duck_q) != len(spark_q):
        print(f"{a.docs}: {len(duck_q)} DuckDB queries against {len(spark_q)} Spark ones: the "
              "blocks must ask the same questions in the same order")
        return 1
    why = spark_missing(a.spark_python)
    if why:
        return skip_all(why)

    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="spark-sql-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        runs_dir, out = work / "runs", work / "out"
        shutil.rmtree(runs_dir, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        t = time.perf_counter()
        gpu_values = generate(runs_dir, a.runs)
        run_dirs = sorted(runs_dir.iterdir())
        gen_s = time.perf_counter() - t
        t = time.perf_counter()
        subprocess.run(trainprof_cmd() + ["export", "parquet", *map(str, run_dirs), "--out",
                                          str(out)], check=True, stdout=subprocess.DEVNULL)
        export_s = time.perf_counter() - t
        files = sum(1 for _ in out.rglob("*.parquet"))
        print(f"fleet: {a.runs} generated runs ({gen_s:.1f} s), `trainprof export parquet` "
              f"{files} files ({export_s:.1f} s); queries from {a.docs}: {len(duck_q)} "
              f"(DuckDB block {len(duck_sql)} statements, Spark block {len(spark_sql)})")
        duck = run_duckdb(work, duck_sql, a.repeat)
        spark = run_spark(work, spark_sql, a.repeat, a.spark_python, work / "spark.log")
        truth = truth_of(run_dirs, gpu_values)

        differing, false_to_truth, checked_truth = 0, [], 0
        for i, (dq, d, s) in enumerate(zip(duck_q, duck["answers"], spark["answers"]), 1):
            cols_d = [c.lower() for c in d["columns"]]
            cols_s = [c.lower() for c in s["columns"]]
            why = None
            if cols_d != cols_s:
                why = f"columns {d['columns']} (DuckDB) against {s['columns']} (Spark)"
            else:
                why = diff_rows(d["rows"], s["rows"], ordered(dq))
            first = dq.splitlines()[0]
            verdict = "the same" if why is None else "DIFFERS: " + why
            print(f"  query {i} ({first[:70]}{'...' if len(first) > 70 else ''}): "
                  f"{len(d['rows'])} rows; Spark {verdict}")
            print(show(d["rows"], d["columns"]))
            differing += why is not None
            want = truth.get(tuple(cols_d))
            if want is not None:
                checked_truth += 1
                bad = diff_rows([list(r) for r in want], d["rows"], False)
                if bad:
                    false_to_truth.append(f"query {i} against the runs' own figures: {bad}")
        if not duck_q:
            print("no queries compared")
            return 1

        med = sorted(duck["times"])[len(duck["times"]) // 2]
        smed = sorted(spark["times"])[len(spark["times"]) // 2]
        detail = (f"Spark {spark['version']} (pyspark {spark['pyspark']}, Java "
                  f"{spark['java']}), local[2]")
        results.add(FIG_DIFFER, differing)
        results.add(FIG_DUCKDB, duck["times"])
        results.peer(FIG_DUCKDB, spark["times"], detail=detail)
        results.add(FIG_START, spark["start_s"])
        print(f"DuckDB {duck['version']}: {med:.3f} s for the block (median of {a.repeat}: "
              + ", ".join(f"{x:.3f}" for x in duck["times"]) + ")")
        print(f"{detail}: session start {spark['start_s']:.1f} s, then {smed:.3f} s for the "
              f"block (median of {a.repeat}: " + ", ".join(f"{x:.3f}" for x in spark["times"])
              + ")")
        print(f"against the runs themselves (cost --json, generated samples): {checked_truth} of "
              f"{len(duck_q)} queries checked, "
              + ("all agree" if not false_to_truth else "; ".join(false_to_truth)))
        print(f"queries whose rows differ between Spark SQL and DuckDB: {differing} of "
              f"{len(duck_q)}; target 0: {'met' if differing == 0 else 'NOT met'}")
        return 1 if false_to_truth else 0
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "spark-worker":
        wp = argparse.ArgumentParser(prog="spark_sql.py spark-worker")
        wp.add_argument("--dir", required=True)
        wp.add_argument("--repeat", type=int, default=1)
        wa = wp.parse_args(sys.argv[2:])
        sys.exit(spark_worker(Path(wa.dir), wa.repeat))
    sys.exit(main())
