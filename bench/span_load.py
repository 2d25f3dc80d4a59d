"""Span load on one run directory (issue 20): PROCS processes x THREADS threads each emitting
spans through trainprof's Python hot path (_rec.record_span, what `with trainprof.span` and
the automatic instrumentation end in) as fast as they can for SECONDS, every process recording
into the same run directory (each into its own process store, as under `trainprof record`).

Measured, per emitting call: its wall time (perf_counter_ns around the call alone) and the
thread's voluntary and involuntary context switches across it (getrusage(RUSAGE_THREAD) just
outside the timed window). A call over 10 us is put down to
  - "blocked": the thread gave up the CPU itself (a voluntary switch: a lock, a futex, a
    syscall that slept) -- trainprof blocking, or Python's GIL handed over at a bytecode
    boundary next to the call (the only other lock in the window);
  - "preempted": the scheduler took the CPU away (involuntary switches only);
  - "page faults": no switch, but the thread took page faults (first touch of new memory);
  - "none of these": interrupts, cache misses, the GIL's own bookkeeping.
The same loop is also run with a no-op C call in place of record_span (the control): what the
machine and the GIL do to a call that cannot block at all.

Checked: stored + dropped = emitted exactly (the run read back per process; the recorder's
dropped counter), the recorder's memory bounded (each process's peak RSS, and its RSS at the
first and the last second). Prints the distribution and met / NOT met for
"no call blocks longer than 10 us on trainprof", two ways:
  - the longest call, whatever held it up (with more threads than cores, the scheduler's
    preemption shows here as in the control);
  - the calls over 10 us that trainprof itself caused: those with page faults and no switch
    (the control, which allocates nothing, has none), and, in the native load (--native:
    bench/span_load_native, the same load from C++ threads calling the recorder directly, no
    GIL in the window), those with a voluntary switch: there nothing but the recorder can
    block the thread.

    python bench/span_load.py --procs 16 --threads 8 --seconds 30 [--native PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

TARGET_US = 10.0
BUCKETS_US = [1, 2, 5, 10, 20, 50, 100, 1000, 10_000, float("inf")]

CHILD = textwrap.dedent("""
    import json, os, resource, sys, threading, time
    import trainprof
    from trainprof import _rec
    run, threads, seconds, control = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1"
    BUCKETS = [1000 * b for b in %(buckets)r]
    RT = resource.RUSAGE_THREAD
    if not control:
        assert trainprof.start(out=run, auto=False, node="load")
    pc = time.perf_counter_ns
    def rss_kib(field="VmRSS:"):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    barrier = threading.Barrier(threads + 1)
    results = []
    def worker():
        call = _rec.record_span if not control else max
        hist = [0] * (len(BUCKETS) + 1)
        slow = {"blocked": 0, "preempted": 0, "faulted": 0, "neither": 0, "faulted_max_ns": 0,
                "neither_max_ns": 0}
        worst = 0
        n = 0
        barrier.wait()
        deadline = pc() + int(seconds * 1e9)
        while True:
            # The span's times are computed before the timed window: `start + 1000` makes an
            # int object, and its allocation (a fresh page for Python's allocator now and
            # then) is the interpreter's, not the call's.
            start = pc()
            end = start + 1000
            r0 = resource.getrusage(RT)
            t0 = pc()
            if control:
                call(start, end)
            else:
                call("load", "user", start, end)
            t1 = pc()
            r1 = resource.getrusage(RT)
            n += 1
            d = t1 - t0
            if d > worst:
                worst = d
            i = 0
            while i < len(BUCKETS) and d > BUCKETS[i]:
                i += 1
            hist[i] += 1
            if d > 10_000:
                if r1.ru_nvcsw > r0.ru_nvcsw:
                    slow["blocked"] += 1
                elif r1.ru_nivcsw > r0.ru_nivcsw:
                    slow["preempted"] += 1
                elif r1.ru_minflt > r0.ru_minflt or r1.ru_majflt > r0.ru_majflt:
                    slow["faulted"] += 1
                    slow["faulted_max_ns"] = max(slow["faulted_max_ns"], d)
                else:
                    slow["neither"] += 1
                    slow["neither_max_ns"] = max(slow["neither_max_ns"], d)
            if (n & 1023) == 0 and t1 > deadline:
                break
        results.append({"calls": n, "max_ns": worst, "hist": hist, "slow": slow})
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    [t.start() for t in ts]
    rss_start = rss_kib()
    barrier.wait()
    time.sleep(min(1.0, seconds / 2))
    rss_first = rss_kib()
    [t.join() for t in ts]
    rss_last = rss_kib()
    stats = {}
    if not control:
        trainprof.stop()  # flushes everything: the counters are final
        stats = _rec.stats()
    print(json.dumps({"pid": os.getpid(), "threads": results, "stats": stats,
                      "rss_start_kib": rss_start, "rss_first_kib": rss_first,
                      "rss_last_kib": rss_last,
                      # This process's own peak (VmHWM): ru_maxrss keeps the peak of the
                      # process that started it across fork + exec (pytest's, in the tests).
                      "peak_rss_kib": rss_kib("VmHWM:")}))
""") % {"buckets": BUCKETS_US[:-1]}


def run_load(run_dir: Path, procs: int, threads: int, seconds: float, control: bool,
             native: str | None = None) -> dict:
    """Runs the load (or its control) and returns the per-process reports, merged. `native`:
    the C++ load program instead of Python children."""
    cmd = [native] if native else [sys.executable, "-c", CHILD]
    ps = [subprocess.Popen([*cmd, str(run_dir), str(threads), str(seconds),
                            "1" if control else "0"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True) for _ in range(procs)]
    reports = []
    for p in ps:
        out, err = p.communicate(timeout=seconds * 20 + 120)
        if p.returncode != 0:
            raise RuntimeError(f"load process failed ({p.returncode}): {err}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    hist = [0] * len(BUCKETS_US)
    slow = {"blocked": 0, "preempted": 0, "faulted": 0, "neither": 0, "faulted_max_ns": 0,
            "neither_max_ns": 0}
    calls = 0
    worst = 0
    for r in reports:
        for t in r["threads"]:
            calls += t["calls"]
            worst = max(worst, t["max_ns"])
            hist = [a + b for a, b in zip(hist, t["hist"])]
            for k in slow:
                if k.endswith("_max_ns"):
                    slow[k] = max(slow[k], t["slow"][k])
                else:
                    slow[k] += t["slow"][k]
    return {"reports": reports, "calls": calls, "max_ns": worst, "hist": hist, "slow": slow}


def stored_per_pid(run_dir: Path) -> dict[int, int]:
    import trainprof
    ev = trainprof.open(str(run_dir)).events(names=["load"]).to_pandas()
    return {int(k): int(v) for k, v in ev.groupby("pid").size().items()}


def percentile_us(hist: list[int], q: float) -> str:
    total = sum(hist)
    acc = 0
    for bound, n in zip(BUCKETS_US, hist):
        acc += n
        if acc >= q * total:
            return f"<= {bound:g} us" if bound != float("inf") else "> 10 ms"
    return "?"


def slow_per_million(m: dict) -> float:
    return 1e6 * sum(m["hist"][BUCKETS_US.index(10) + 1:]) / max(1, m["calls"])


def describe(name: str, m: dict) -> str:
    lines = [f"{name}: {m['calls']:,} calls, max {m['max_ns'] / 1000:.1f} us, "
             f"p99 {percentile_us(m['hist'], 0.99)}, p99.99 {percentile_us(m['hist'], 0.9999)}, "
             f"{slow_per_million(m):.0f} per million over 10 us"]
    labels = [f"<={b:g}us" if b != float("inf") else ">10ms" for b in BUCKETS_US]
    lines.append("  " + "  ".join(f"{lab}:{n}" for lab, n in zip(labels, m["hist"])))
    lines.append(f"  over 10 us: blocked (voluntary switch) {m['slow']['blocked']}, "
                 f"preempted {m['slow']['preempted']}, page faults {m['slow']['faulted']} "
                 f"(max {m['slow']['faulted_max_ns'] / 1000:.1f} us), none of these "
                 f"{m['slow']['neither']} (max {m['slow']['neither_max_ns'] / 1000:.1f} us)")
    return "\n".join(lines)


def measure(procs: int, threads: int, seconds: float, work: Path, native: str | None = None) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    run_dir = work / "run"
    load = run_load(run_dir, procs, threads, seconds, control=False, native=native)
    control = run_load(work / "control", procs, threads, seconds, control=True, native=native)
    stored = stored_per_pid(run_dir)
    accounting = []
    for r in load["reports"]:
        s = r["stats"]
        emitted = sum(t["calls"] for t in r["threads"])
        accounting.append({"pid": r["pid"], "emitted": emitted, "written": s["written_events"],
                           "dropped": s["dropped_events"],
                           "pool_empty_allocations": s.get("pool_empty_allocations", 0),
                           "no_block_drops": s.get("no_block_drops", 0),
                           "stored": stored.get(r["pid"], 0)})
    return {"load": load, "control": control, "accounting": accounting,
            "peak_rss_mib": max(r["peak_rss_kib"] for r in load["reports"]) / 1024,
            "rss_growth_mib": max(r["rss_last_kib"] - r["rss_first_kib"]
                                  for r in load["reports"]) / 1024}


def report(label: str, m: dict, native: bool) -> tuple[bool, bool, float, int]:
    """Prints one load's figures; returns (exact, own blocking is zero, longest us, own count)."""
    print(describe(f"{label} record_span", m["load"]))
    print(describe(f"{label} control (no-op call)", m["control"]))
    exact = all(x["stored"] + x["dropped"] == x["emitted"] for x in m["accounting"])
    emitted = sum(x["emitted"] for x in m["accounting"])
    dropped = sum(x["dropped"] for x in m["accounting"])
    pool_empty = sum(x["pool_empty_allocations"] for x in m["accounting"])
    no_block = sum(x["no_block_drops"] for x in m["accounting"])
    stored = sum(x["stored"] for x in m["accounting"])
    print(f"{label} emitted {emitted:,} = stored {stored:,} + dropped {dropped:,}: "
          f"{'exact' if exact else 'NOT exact'}; of the dropped, for want of a prepared block "
          f"(pool and spare blocks empty): {no_block:,}, the rest at the thread's event bound; "
          f"blocks allocated on a recording thread: {pool_empty:,}")
    print(f"{label} recorder memory: peak RSS {m['peak_rss_mib']:.0f} MiB per process, growth "
          f"from the first to the last second {m['rss_growth_mib']:.1f} MiB")
    load, control = m["load"]["slow"], m["control"]["slow"]
    worst_us = m["load"]["max_ns"] / 1000
    print(f"{label} longest record_span call {worst_us:.1f} us, control "
          f"{m['control']['max_ns'] / 1000:.1f} us (target <= {TARGET_US:g} us): "
          f"{'met' if worst_us <= TARGET_US else 'NOT met'}")
    own = load["faulted"] + (load["blocked"] if native else 0)
    what = "page faults and no switch" + (" or a voluntary switch" if native else "")
    print(f"{label} calls over 10 us that trainprof caused ({what}): {own} (control "
          f"{control['faulted'] + (control['blocked'] if native else 0)}): "
          f"{'met' if own == 0 else 'NOT met'}; the rest: preempted {load['preempted']} "
          f"(control {control['preempted']}), none of these {load['neither']} (control "
          f"{control['neither']})" + ("" if native else f", voluntary switch (trainprof or "
                                      f"the GIL) {load['blocked']} (control "
                                      f"{control['blocked']})"))
    print(f"{label} stored + dropped = emitted: {'met' if exact else 'NOT met'}")
    return exact, own == 0, worst_us, own


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--procs", type=int, default=16)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--native", help="bench/span_load_native: also run the load from C++")
    ap.add_argument("--record", action="store_true", help="add the figures to the bench results")
    a = ap.parse_args()
    print(f"{a.procs} processes x {a.threads} threads x {a.seconds:g} s on {platform.node()} "
          f"({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at the start)")
    with tempfile.TemporaryDirectory(prefix="tp_span_load_") as tmp:
        m = measure(a.procs, a.threads, a.seconds, Path(tmp) / "py")
    exact, own_zero, _, own = report("python:", m, native=False)
    native_m = None
    if a.native:
        with tempfile.TemporaryDirectory(prefix="tp_span_load_native_") as tmp:
            native_m = measure(a.procs, a.threads, a.seconds, Path(tmp) / "native", a.native)
        n_exact, n_own_zero, _, n_own = report("native:", native_m, native=True)
        exact = exact and n_exact
    if a.record:
        sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
        import results  # noqa: E402
        results.add("span_load.max_call_us", m["load"]["max_ns"] / 1000)
        results.add("span_load.slow_calls_per_million", slow_per_million(m["load"]))
        results.add("span_load.peak_rss_mib", m["peak_rss_mib"])
        results.add("span_load.own_slow_calls", own)
        if native_m is not None:
            results.add("span_load.native_own_slow_calls", n_own)
            results.add("span_load.native_max_call_us", native_m["load"]["max_ns"] / 1000)
        else:
            results.skip("span_load.native_own_slow_calls", "no --native program")
            results.skip("span_load.native_max_call_us", "no --native program")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
