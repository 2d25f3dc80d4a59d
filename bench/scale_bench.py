"""Scale of analysis (issue 20): a generated many-rank run (bench/lib/scale_run.py: 512 ranks on
64 nodes of 8, one planted straggler rank, known step and collective times, written through the
store writer) analysed by the merged commands a user runs on it:
    trainprof rules RUN --json,  trainprof report RUN --out DIR,  trainprof analyze RUN --json
each one process, timed whole (wall), with its CPU time (user + sys) and peak RSS (getrusage of
the finished child, RUSAGE_CHILDREN). Targets (bench/targets.toml, section "scale"): the three
together <= 60 s wall and each <= 4 GB peak RSS. The straggler each must name is checked against
the generated truth (a figure is recorded only when it is right).

CPU time / wall of the three together is printed and recorded (scale.512_ranks_cpu_per_wall):
rules and analyze work on a small thread pool (per node, per rank), so above 1 means both cores
were in use; on a loaded machine other processes take cores away and it drops.

Usage: python bench/scale_bench.py [--ranks 512] [--steps 200] [--keep DIR]
The short form (64 ranks) is tests/python/test_scale_analysis.py."""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench" / "lib"))
import results  # noqa: E402
import scale_run  # noqa: E402

WALL_TARGET_S = 60.0
RSS_TARGET_GB = 4.0


def trainprof_cmd() -> list[str]:
    exe = os.environ.get("TRAINPROF_BIN")
    if exe:
        return [exe]
    try:
        import trainprof.cli

        native = trainprof.cli.native_executable()
        if native.exists():
            return [str(native)]
    except ImportError:
        pass
    found = shutil.which("trainprof")
    return [found] if found else [sys.executable, "-m", "trainprof"]


def measure(args: list[str]) -> dict:
    """Runs one trainprof command in a fresh process: wall, CPU (user + sys) and peak RSS.
    The child is started from a fresh helper process so that RUSAGE_CHILDREN's maximum RSS is
    this command's alone."""
    code = ("import json, resource, subprocess, sys, time\n"
            "t = time.perf_counter()\n"
            "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
            "wall = time.perf_counter() - t\n"
            "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "json.dump({'rc': p.returncode, 'wall_s': wall, 'cpu_s': u.ru_utime + u.ru_stime,\n"
            "           'max_rss_kb': u.ru_maxrss, 'stdout': p.stdout, 'stderr': p.stderr[-2000:]},"
            " sys.stdout)\n")
    p = subprocess.run([sys.executable, "-c", code, *trainprof_cmd(), *args], capture_output=True,
                       text=True, check=True)
    return json.loads(p.stdout)


def analyse(run: Path, out_dir: Path) -> dict:
    """{command: measurement} for rules, report and analyze of the run, with what each named."""
    res = {}
    for name, args in (("rules", ["rules", str(run), "--json"]),
                       ("report", ["report", str(run), "--out", str(out_dir / "report.html"),
                                   "--json", str(out_dir / "report.json")]),
                       ("analyze", ["analyze", str(run), "--json"])):
        m = measure(args)
        if m["rc"] not in (0, 2):  # rules exits 2 when it finds something
            raise RuntimeError(f"trainprof {name} exited {m['rc']}: {m['stderr']}")
        res[name] = m
    return res


def named_stragglers(res: dict, out_dir: Path) -> dict:
    """What each command named as the straggler: rules and the report (the StragglerRank
    findings' messages), analyze (its stragglers list: rank labels)."""
    rules = json.loads(res["rules"]["stdout"])
    by_rule = {r["name"]: r for r in rules["rules"]}
    report = json.loads((out_dir / "report.json").read_text())
    report_text = json.dumps(report)
    analysis = json.loads(res["analyze"]["stdout"])
    return {
        "rules": [f["message"] for f in by_rule["StragglerRank"]["findings"]],
        "report": report_text,
        "analyze": [s["rank"] for s in analysis["stragglers"]],
    }


def check(truth: dict, named: dict) -> list[str]:
    """Problems with what was named, against the generated truth (empty: all right)."""
    want = f"Rank {truth['straggler']} on {truth['straggler_node']} is a straggler"
    problems = []
    if not named["rules"] or not all(m.startswith(want) for m in named["rules"]):
        problems.append(f"rules named {named['rules'][:3]}, not only {want!r}")
    if want not in named["report"]:
        problems.append(f"the report does not say {want!r}")
    if named["analyze"] != [str(truth["straggler"])]:
        problems.append(f"analyze named ranks {named['analyze'][:5]}, not [{truth['straggler']}]")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=512)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--keep", help="generate into this directory and keep it")
    a = ap.parse_args()
    if a.ranks < 16 or a.ranks % 8 or a.steps < 10:
        ap.error("--ranks: a multiple of 8, at least 16; --steps at least 10")
    root = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="scale-bench-"))
    try:
        run = root / "run"
        t = time.perf_counter()
        truth = scale_run.write(str(run), ranks=a.ranks, steps=a.steps)
        gen_s = time.perf_counter() - t
        size = sum(f.stat().st_size for f in run.rglob("*") if f.is_file())
        print(f"generated {a.ranks} ranks x {a.steps} steps on {truth['nodes']} nodes "
              f"({2 * a.ranks * a.steps:,} events, {size / 1e6:.1f} MB) in {gen_s:.1f} s; "
              f"planted straggler: rank {truth['straggler']} on {truth['straggler_node']}")
        res = analyse(run, root)
        problems = check(truth, named_stragglers(res, root))
        wall = sum(m["wall_s"] for m in res.values())
        cpu = sum(m["cpu_s"] for m in res.values())
        rss_gb = max(m["max_rss_kb"] for m in res.values()) / 1024 / 1024
        for name, m in res.items():
            print(f"  {name:8s} {m['wall_s']:6.2f} s wall, {m['cpu_s']:6.2f} s CPU "
                  f"({m['cpu_s'] / m['wall_s']:.2f} cores), peak RSS {m['max_rss_kb'] / 1024:7.1f} MiB")
        print(f"  together {wall:.2f} s wall, CPU/wall {cpu / wall:.2f}; peak RSS "
              f"{rss_gb * 1024:.1f} MiB; load {os.getloadavg()[0]:.2f}")
        for p in problems:
            print(f"  WRONG: {p}")
        if a.ranks == 512 and not problems:
            results.add("scale.512_ranks_s", wall)
            results.add("scale.512_ranks_rss_gb", rss_gb)
            results.add("scale.512_ranks_cpu_per_wall", cpu / wall)
        elif a.ranks == 512:
            results.skip("scale.512_ranks_s", "; ".join(problems))
            results.skip("scale.512_ranks_rss_gb", "; ".join(problems))
            results.skip("scale.512_ranks_cpu_per_wall", "; ".join(problems))
        met = not problems and wall <= WALL_TARGET_S and rss_gb <= RSS_TARGET_GB
        print(f"{a.ranks}-rank run: rules + report + analyze {wall:.1f} s (target <= "
              f"{WALL_TARGET_S:g} s), peak RSS {rss_gb:.2f} GB (target <= {RSS_TARGET_GB:g} GB), "
              f"straggler {'named right' if not problems else 'NOT named right'}: "
              f"{'met' if met else 'NOT met'}")
        return 0 if not problems else 1
    finally:
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
