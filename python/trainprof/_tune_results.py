"""What `trainprof tune` measures in a trial's run directory, and how it ranks, explains and
prints the trials (text table, JSON, tune.html). The driver is trainprof.tune."""

from __future__ import annotations

import html
import json
import math
import os
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from trainprof import _tune_knobs as K

DEFAULT = "default"
DEFAULT_LOSS_REGEX = r"\bloss\b[\s=:]+([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf))"
MAX_LOSS_VALUES = 200
_IGNORED_RULES = ("ProfilerReport",)  # the summary entry, not a finding about the job
_OOM = re.compile(r"MemoryError|out of memory|can't allocate memory|Cannot allocate memory|"
                  r"std::bad_alloc|OutOfMemoryError|Killed", re.I)


class TuneError(Exception):
    """A failure that is not the user's (exit 1)."""


class UsageError(Exception):
    """A bad option, knob or state directory (exit 2)."""


# ---------------------------------------------------------------------------------------------
# Measuring a trial


@dataclass
class Measure:
    steps: int  # measured training steps (after the warm-up), fewest over the processes
    total_steps: int  # every training step seen so far (progress)
    seconds: float  # wall time of the measured steps (longest over the processes)
    steps_per_second: float  # summed over the processes (ranks)
    samples_per_step: int | None
    step_time_s: float  # median measured step
    data_wait_share: float | None  # data wait / step time over the measured steps
    data_wait_per_step_s: float | None  # mean data wait of a measured step
    start_ns: int
    end_ns: int
    processes: int

    @property
    def samples_per_second(self) -> float:
        return self.steps_per_second * (self.samples_per_step or 1)


def _open(run_dir: Path):
    if not (run_dir / "run.json").exists():
        return None
    import trainprof

    try:
        return trainprof.open(str(run_dir))
    except Exception:  # noqa: BLE001 - a run being created; the next poll sees it
        return None


def _batch_size(run) -> int | None:
    """The batch size of the first DataLoader the job iterated (its annotation)."""
    best = None
    for _node, ts, key, value in run.annotations():
        if not key.startswith("dataloader."):
            continue
        try:
            bs = json.loads(value).get("batch_size")
        except (ValueError, AttributeError):
            continue
        if isinstance(bs, int) and bs > 0 and (best is None or ts < best[0]):
            best = (ts, bs)
    return best[1] if best else None


def _measure(run, warmup: int, samples_per_step: int | None, micro_batches: float = 1.0):
    import numpy as np

    st = run.steps()
    if len(st) == 0:
        return None
    mode = st.column("mode")
    train = mode == "train"
    if not train.any():
        return None
    pid = st.column("pid")[train]
    node = st.column("node")[train]
    start = st.column("start_ns")[train].astype(np.int64)
    dur = st.column("duration_ns")[train].astype(np.int64)
    wait = st.column("data_wait_ns")[train]  # float, NaN where missing
    groups: dict = {}
    for i in range(len(start)):
        groups.setdefault((node[i], pid[i]), []).append(i)
    total = len(start)
    counts, secs, rates, durs = [], [], [], []
    wait_ns = step_ns = 0.0
    n_wait = 0
    w_start, w_end = None, None
    for idx in groups.values():
        idx = sorted(idx, key=lambda i: start[i])[warmup:]
        if not idx:
            counts.append(0)
            continue
        s0 = int(start[idx[0]])
        s1 = max(int(start[i] + dur[i]) for i in idx)
        span = max(1, s1 - s0)
        counts.append(len(idx))
        secs.append(span / 1e9)
        rates.append(len(idx) / (span / 1e9))
        durs.extend(float(dur[i]) / 1e9 for i in idx)
        for i in idx:
            if not math.isnan(wait[i]):
                wait_ns += float(wait[i])
                step_ns += float(dur[i])
                n_wait += 1
        w_start = s0 if w_start is None else min(w_start, s0)
        w_end = s1 if w_end is None else max(w_end, s1)
    measured = min(counts) if counts else 0
    if measured == 0:
        return Measure(0, total, 0.0, 0.0, None, 0.0, None, None, 0, 0, len(groups))
    sps = samples_per_step
    if sps is None:
        bs = _batch_size(run)
        sps = None if bs is None else max(1, round(bs * micro_batches))
    return Measure(measured, total, max(secs), sum(rates), sps, statistics.median(durs),
                   wait_ns / step_ns if step_ns > 0 else None,
                   wait_ns / n_wait / 1e9 if n_wait else None, w_start, w_end, len(groups))


def measure_live(run_dir: Path, warmup: int) -> Measure | None:
    """The trial so far, read from its live run directory; None before it has steps."""
    run = _open(run_dir)
    if run is None:
        return None
    try:
        return _measure(run, warmup, None)
    except Exception:  # noqa: BLE001 - a store being written; the next poll reads it
        return None


def _micro_batches(run, m: Measure) -> float:
    try:
        ev = run.events(m.start_ns, m.end_ns, categories=["step"])
        values = []
        for mode, args in zip(ev.column("mode"), ev.column("args")):
            if mode == "train" and args:
                mb = json.loads(args).get("micro_batches")
                if isinstance(mb, int) and mb > 0:
                    values.append(mb)
        return statistics.median(values) if values else 1.0
    except Exception:  # noqa: BLE001
        return 1.0


def measure_final(run_dir: Path, warmup: int, samples_per_step: int | None) -> Measure | None:
    run = _open(run_dir)
    if run is None:
        return None
    try:
        m = _measure(run, warmup, samples_per_step)
        if m is not None and m.steps and samples_per_step is None and m.samples_per_step:
            mb = _micro_batches(run, m)
            if mb != 1.0:
                m = _measure(run, warmup, None, mb)
        return m
    except Exception:  # noqa: BLE001
        return None


def observe(run_dir: Path, m: Measure | None) -> dict:
    """What the trial's run shows besides the steps: the rules that fired, the loader and
    thread settings the job ran with, the process tree's CPU and peak memory."""
    out: dict = {"findings": [], "observed": {}, "cpu_cores": None, "peak_rss_bytes": None}
    run = _open(run_dir)
    if run is None:
        return out
    try:
        out["findings"] = sorted({f.rule for f in run.findings() if f.rule not in _IGNORED_RULES})
    except Exception:  # noqa: BLE001
        pass
    obs = out["observed"]
    try:
        loaders = sorted((ts, key, value) for _n, ts, key, value in run.annotations()
                         if key.startswith("dataloader."))
        obs["dataloader"] = bool(loaders)
        if loaders:
            cfg = json.loads(loaders[0][2])
            for k in ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers",
                      "batch_size"):
                obs[k] = cfg.get(k)
        for _n, _ts, key, value in sorted(run.annotations(), key=lambda a: a[1]):
            if key == "torch.model" and "model" not in obs:  # the first model the job ran
                model = json.loads(value)
                obs["model"] = model.get("type")
                obs["conv2d"] = bool(model.get("conv2d"))
                obs["channels_last"] = bool(model.get("channels_last"))
                obs["autocast"] = model.get("autocast", "off")
                obs["compile"] = model.get("compile", "off")
            elif key == "torch.num_threads":
                obs["torch_threads"] = json.loads(value)
            elif key == "torch.num_interop_threads":
                obs["interop_threads"] = json.loads(value)
    except Exception:  # noqa: BLE001
        pass
    try:
        out["logged_loss"] = [v for _ts, v, _step in run.logged_metric("loss")]
    except Exception:  # noqa: BLE001
        pass
    try:
        start = m.start_ns if m is not None and m.steps else None
        end = m.end_ns + 1 if m is not None and m.steps else None
        t = run.system_metrics(start, end, metrics=["process_cpu_utilization_ratio",
                                                    "process_resident_memory_bytes"],
                               devices=["tree"])
        metric, value = t.column("metric"), t.column("value")
        cpu = [float(v) for k, v in zip(metric, value) if k == "process_cpu_utilization_ratio"]
        rss = [float(v) for k, v in zip(metric, value) if k == "process_resident_memory_bytes"]
        out["cpu_cores"] = statistics.fmean(cpu) if cpu else None
        out["peak_rss_bytes"] = int(max(rss)) if rss else None
    except Exception:  # noqa: BLE001
        pass
    return out


class RunReader:
    """Reads the trials' run directories in a child process (`python -m
    trainprof._tune_results --reader`, one JSON request and answer a line), so that a reader
    that fails on a store being written costs one poll, not the search: tune itself was seen to
    die of rare SIGSEGVs while polling live runs of PyTorch jobs. A child that dies is started
    again at the next request. Called from tune's main thread only."""

    def __init__(self):
        self.proc = None
        self.restarts = 0

    def _start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "trainprof._tune_results", "--reader"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     bufsize=1)

    def call(self, request: dict):
        for _ in range(2):
            if self.proc is None or self.proc.poll() is not None:
                if self.proc is not None:
                    self.restarts += 1
                self._start()
            try:
                self.proc.stdin.write(json.dumps(request) + "\n")
                self.proc.stdin.flush()
                line = self.proc.stdout.readline()
            except OSError:
                line = ""
            if line:
                return json.loads(line)
            self.proc.kill()
            self.proc.wait()
        return None

    def live(self, run_dir: Path, warmup: int) -> Measure | None:
        a = self.call({"op": "live", "run": str(run_dir), "warmup": warmup})
        return Measure(**a["measure"]) if a and a.get("measure") else None

    def final(self, run_dir: Path, warmup: int, samples_per_step):
        """(measure, observe()) after the trial; (None, empty observation) if unreadable."""
        a = self.call({"op": "final", "run": str(run_dir), "warmup": warmup,
                       "samples_per_step": samples_per_step})
        if not a:
            return None, {"findings": [], "observed": {}, "cpu_cores": None,
                          "peak_rss_bytes": None}
        return (Measure(**a["measure"]) if a.get("measure") else None), a["observe"]

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _reader_main() -> int:
    import dataclasses
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is tune's to handle
    for line in sys.stdin:
        req = json.loads(line)
        run = Path(req["run"])
        if req["op"] == "live":
            m = measure_live(run, req["warmup"])
            answer = {"measure": dataclasses.asdict(m) if m else None}
        else:
            m = measure_final(run, req["warmup"], req.get("samples_per_step"))
            answer = {"measure": dataclasses.asdict(m) if m else None, "observe": observe(run, m)}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


def looks_oom(log_text: str, exit_status: int | None) -> bool:
    if exit_status == 137:  # SIGKILL: the kernel's OOM killer, most often
        return True
    tail = "\n".join(_job_lines(log_text)[-40:])
    return bool(_OOM.search(tail))


def _job_lines(log_text: str) -> list[str]:
    """The job's own output: the log without `record`'s lines and summary table."""
    out = []
    summary = False
    for line in log_text.splitlines():
        if line.startswith("trainprof:"):
            summary = "finished in" in line or summary
            continue
        if summary and (line.startswith("  ") or line.startswith("cost:")
                        or line.startswith("           ")):
            continue
        out.append(line)
    return out


def error_line(log_text: str) -> str:
    lines = [ln.strip() for ln in _job_lines(log_text) if ln.strip()]
    for ln in reversed(lines[-60:]):
        if re.search(r"Error|Exception|error:|Killed|Traceback", ln):
            return ln[:300]
    return lines[-1][:300] if lines else ""


def losses(log_text: str, regex: str) -> list[float]:
    pat = re.compile(regex)
    out = []
    for line in _job_lines(log_text):
        mm = pat.search(line)
        if mm:
            try:
                out.append(float(mm.group(1)))
            except ValueError:
                continue
            if len(out) >= 10 * MAX_LOSS_VALUES:
                break
    return out


# ---------------------------------------------------------------------------------------------
# A trial's result (what tune stores in the study and prints)


def typed(text: str):
    t = str(text)
    if t == DEFAULT:
        return None
    if re.fullmatch(r"[-+]?\d+", t):
        return int(t)
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    try:
        f = float(t)
        return f if math.isfinite(f) else t
    except ValueError:
        return t


def changed(knobs, settings: dict[str, str]) -> list[str]:
    return [f"{k.name}={settings[k.name]}" for k in knobs if settings[k.name] != k.baseline]


def changed_as_run(knobs, settings: dict[str, str], canon) -> list[str]:
    """What changed as the job saw it: a value of trainprof's own knob that the baseline shows
    leaves the job as it is (e.g. channels_last on a model without 2-D convolutions) is no
    change (canon: canonical_values)."""
    return [f"{k.name}={settings[k.name]}" for k in knobs if settings[k.name] != k.baseline
            and (k.kind != "own" or canon.get(k.name, {}).get(settings[k.name]) != DEFAULT)]


def describe(knobs, settings: dict[str, str]) -> str:
    return ", ".join(changed(knobs, settings))


def trial_result(number, settings, status, m: Measure | None, run_dir: Path, log_path: Path,
                 exit_status, log_text: str, spec, wall_s: float, startup_s, stop_s, *,
                 env: list[str], command: list[str], obs: dict) -> dict:
    o = spec.options
    measured = m is not None and m.steps >= 1
    loss = obs.get("logged_loss") or []  # trainprof.log_metric("loss", v), else the regex
    loss_source = "log_metric" if loss else "output"
    if not loss:
        loss = losses(log_text, o.loss_regex)
    changes_math = any(k.changes_math and settings[k.name] != k.baseline for k in spec.knobs)
    r = {
        "trial": number,
        "settings": {k: typed(v) for k, v in settings.items()},
        "status": status,
        "samples_per_second": m.samples_per_second if measured else None,
        "usd_per_hour": None,
        "samples_per_usd": None,
        "run": str(run_dir),
        "log": str(log_path),
        "raw_settings": dict(settings),
        "changed": changed(spec.knobs, settings),
        "changes_math": changes_math,
        "samples_per_step": m.samples_per_step if measured else None,
        "throughput_unit": "samples" if measured and m.samples_per_step else "steps",
        "steps_per_second": m.steps_per_second if measured else None,
        "steps_measured": m.steps if m is not None else 0,
        "measured_s": m.seconds if measured else None,
        "step_time_s": m.step_time_s if measured else None,
        "data_wait_share": m.data_wait_share if measured else None,
        "data_wait_per_step_s": m.data_wait_per_step_s if measured else None,
        "processes": m.processes if m is not None else 0,
        "exit_status": exit_status,
        "error": error_line(log_text) if status in ("failed", "oom", "no_steps") else "",
        "findings": obs["findings"],
        "observed": obs["observed"],
        "cpu_cores": obs["cpu_cores"],
        "peak_rss_bytes": obs["peak_rss_bytes"],
        "loss": {"first": loss[0], "last": loss[-1], "count": len(loss),
                 "values": loss[-MAX_LOSS_VALUES:], "source": loss_source} if loss else None,
        "wall_s": wall_s,
        "startup_s": startup_s,
        "stop_s": stop_s,
        "env": env,
        "command": command,
    }
    if status == "timeout":
        r["error"] = f"no new training step for {o.trial_timeout:g} s: stopped as hung"
    elif status == "no_steps":
        seen = m.total_steps if m is not None else 0
        last = error_line(log_text)
        r["error"] = (f"the job ended (exit status {exit_status}) after {seen} training steps, "
                      f"not more than the {o.warmup_steps} warm-up steps"
                      + (f"; its last output: {last}" if last else ""))
    return r


def objective_of(m: Measure, objective: str, price) -> float | None:
    if m is None or m.steps < 1:
        return None
    if objective == "step_time":
        return -m.step_time_s
    if objective == "samples_per_usd" and price is not None:
        return m.samples_per_second * 3600.0 / price["usd_per_hour"]
    return m.samples_per_second


def price_result(r: dict, price, objective: str, epoch_samples: int | None) -> None:
    sps = r["samples_per_second"]
    if price is not None:
        r["usd_per_hour"] = price["usd_per_hour"]
        if sps:
            r["samples_per_usd"] = sps * 3600.0 / price["usd_per_hour"]
    if epoch_samples and sps:
        r["epoch_s"] = epoch_samples / sps
        if price is not None:
            r["usd_per_epoch"] = r["epoch_s"] / 3600.0 * price["usd_per_hour"]
    if sps is None:
        r["objective"] = None
    elif objective == "step_time":
        r["objective"] = -r["step_time_s"]
    elif objective == "samples_per_usd" and r["samples_per_usd"] is not None:
        r["objective"] = r["samples_per_usd"]
    else:
        r["objective"] = sps


def price_for(exe: str, instance_type: str | None, usd_per_hour: float | None):
    if usd_per_hour:
        return {"usd_per_hour": usd_per_hour, "instance_type": None,
                "source": "--price-usd-per-hour"}
    if not instance_type:
        return None
    try:
        proc = subprocess.run([exe, "instances", "--json"], capture_output=True, text=True,
                              timeout=60)
        rows = json.loads(proc.stdout)["instances"]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError) as exc:
        raise TuneError(f"cannot read the instance catalog (`trainprof instances --json`): "
                        f"{exc}") from None
    for row in rows:
        if row.get("instance_type") == instance_type:
            if row.get("price_usd_per_hour") is None:
                raise TuneError(f"--instance-type {instance_type}: the catalog has no price for it")
            return {"usd_per_hour": float(row["price_usd_per_hour"]),
                    "instance_type": instance_type,
                    "source": f"{row.get('price_basis', '')}, {row.get('price_source', '')}, "
                              f"as of {row.get('price_as_of', '?')}"}
    raise UsageError(f"--instance-type {instance_type}: not in the instance catalog (see "
                     f"`trainprof instances`)")


def catalog_rows(exe: str) -> tuple[dict, Path | None]:
    """The instance catalog by type (`trainprof instances --json`) and its directory."""
    try:
        proc = subprocess.run([exe, "instances", "--json"], capture_output=True, text=True,
                              timeout=60)
        rows = json.loads(proc.stdout)["instances"]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError) as exc:
        raise TuneError(f"cannot read the instance catalog (`trainprof instances --json`): "
                        f"{exc}") from None
    by_type = {r.get("instance_type"): r for r in rows if isinstance(r, dict)}
    origin = next((r.get("origin") for r in rows if r.get("origin")), None)
    folder = Path(origin.rsplit(":", 1)[0]).parent if origin else None
    return by_type, folder


def _accelerators(folder: Path | None) -> dict[str, dict]:
    import csv

    if folder is None or not (folder / "accelerators.csv").exists():
        return {}
    with open(folder / "accelerators.csv", newline="") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {r["accel_model"].lower(): r for r in rows if r.get("accel_model")}


def _num(text) -> float | None:
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def accelerator_time_factor(accels: dict, a_model: str, b_model: str) -> tuple[float | None, str]:
    """The cost advisor's step-time factor from accelerator `a_model` to `b_model`
    (src/analyze/cost/what_if.cc TimeFactor): the slower of the 16-bit tensor (else fp32) peak
    ratio and the memory bandwidth ratio; None when the catalog lacks the figures."""
    if a_model.lower() == b_model.lower():
        return 1.0, "same accelerator: same step time"
    a, b = accels.get(a_model.lower()), accels.get(b_model.lower())
    if a is None or b is None:
        missing = a_model if a is None else b_model
        return None, f"no scaling model: {missing} is not in the accelerator catalog"

    def t16(r):
        return _num(r.get("bf16_tensor_tflops_dense")) or _num(r.get("fp16_tensor_tflops_dense"))

    if t16(a) and t16(b):
        compute, unit = t16(a) / t16(b), "16-bit tensor"
    elif _num(a.get("fp32_tflops")) and _num(b.get("fp32_tflops")):
        compute, unit = _num(a["fp32_tflops"]) / _num(b["fp32_tflops"]), "fp32"
    else:
        return None, f"no scaling model: no comparable peaks for {a_model} and {b_model}"
    if not _num(a.get("mem_bw_gbs")) or not _num(b.get("mem_bw_gbs")):
        return None, f"no scaling model: no memory bandwidth for {a_model} or {b_model}"
    bw = _num(a["mem_bw_gbs"]) / _num(b["mem_bw_gbs"])
    f = max(compute, bw)
    return f, (f"estimated step time x{f:.2f} on {b_model} vs {a_model} (peak {unit} ratio "
               f"{compute:.2f}, memory bandwidth ratio {bw:.2f}; the slower bound; catalog "
               f"peaks, not a measurement)")


def projections(best: dict | None, types: list[str], trial_type: str | None, catalog: dict,
                folder: Path | None, epoch_samples: int | None) -> list[dict]:
    """The best trial's setting projected onto other instance types with the cost advisor's
    scaling model: between accelerators the peak/bandwidth step-time factor; between CPU-only
    types the rightsizing basis (same step time where the type holds the measured CPU and
    memory peaks with 20 % headroom). Ranked by samples per dollar; each row states its basis
    or why it has none."""
    if not types:
        return []
    accels = _accelerators(folder)
    cur = catalog.get(trial_type) if trial_type else None
    cur_accel = (cur or {}).get("accel_model") or ""
    rows = []
    for t in types:
        row = catalog.get(t) or {}
        price = row.get("price_usd_per_hour")
        out = {"instance_type": t, "projection": True, "from_trial": best["trial"] if best else None,
               "usd_per_hour": price, "factor": None, "samples_per_second": None,
               "samples_per_usd": None, "usd_per_epoch": None, "basis": ""}
        rows.append(out)
        if best is None or not best.get("samples_per_second"):
            out["basis"] = "no measured trial to project"
            continue
        if price is None:
            out["basis"] = "the catalog has no price for this type"
            continue
        accel = row.get("accel_model") or ""
        if accel and cur_accel:
            factor, basis = accelerator_time_factor(accels, cur_accel, accel)
        elif accel or cur_accel:
            factor = None
            basis = ("no usable scaling model: the trials ran " + (
                f"on {cur_accel}" if cur_accel else "without an accelerator (" + (
                    trial_type or "this machine") + ")") + f" and {t} has " + (
                f"{accel}" if accel else "none") + "; the cost advisor scales step time only "
                "between accelerators of the catalog")
        else:
            cores, rss = best.get("cpu_cores"), best.get("peak_rss_bytes")
            need_cpu = cores * 1.2 if cores else None
            need_gib = rss * 1.2 / (1 << 30) if rss else None
            if need_cpu is None and need_gib is None:
                factor, basis = None, "no usable scaling model: no CPU or memory use measured"
            elif (need_cpu and (row.get("vcpus") or 0) < need_cpu) or (
                    need_gib and (row.get("memory_gib") or 0) < need_gib):
                factor, basis = None, (
                    f"does not hold the measured peaks with 20 % headroom ({cores or 0:.1f} "
                    f"cores, {(rss or 0) / (1 << 30):.2f} GiB)")
            else:
                factor, basis = 1.0, (
                    f"same step time: CPU-only, holds the measured peaks with 20 % headroom "
                    f"({cores or 0:.1f} cores, {(rss or 0) / (1 << 30):.2f} GiB; the cost "
                    f"advisor's rightsizing basis, not a measurement)")
        out["basis"] = basis
        if factor is None:
            continue
        out["factor"] = factor
        sps = best["samples_per_second"] / factor
        out["samples_per_second"] = sps
        out["samples_per_usd"] = sps * 3600 / float(price)
        if epoch_samples:
            out["usd_per_epoch"] = epoch_samples / sps / 3600 * float(price)
    rows.sort(key=lambda r: (r["samples_per_usd"] is None, -(r["samples_per_usd"] or 0)))
    return rows


def one_line(r: dict) -> str:
    if r["samples_per_second"] is not None:
        unit = "samples/s" if r["throughput_unit"] == "samples" else "steps/s"
        rate = f"{r['samples_per_second']:.1f} {unit} over {r['steps_measured']} steps"
    else:
        rate = r["error"] or "no measurement"
    return f"{r['status']}: {rate} ({r['wall_s']:.1f} s; run {r['run']})"


# ---------------------------------------------------------------------------------------------
# Ranking and explaining


def canonical_values(knobs, base: dict | None) -> dict[str, dict[str, str]]:
    """Per own knob, the values that leave the job as it is, written as DEFAULT: the value
    the baseline ran with, or every value when the baseline shows the knob does not apply
    (no DataLoader, no torch)."""
    out: dict[str, dict[str, str]] = {}
    if base is None:
        return out
    obs = base.get("observed") or {}
    for k in knobs:
        if k.kind != "own":
            continue
        own = K.OWN_KNOBS[k.name]
        loader = k.name in ("num_workers", "pin_memory", "prefetch_factor", "persistent_workers",
                            "batch_size")
        if loader:
            applies = obs.get("dataloader")
        elif k.name == "channels_last":
            applies = obs.get("conv2d")
        else:
            applies = k.name in obs
        m = {}
        for v in k.values:
            if v == DEFAULT:
                continue
            if not applies or K.parse_value(own, v) == obs.get(k.name):
                m[v] = DEFAULT
        out[k.name] = m
    return out


def _canon(r: dict, canon) -> dict[str, str]:
    return {k: canon.get(k, {}).get(v, v) for k, v in r["raw_settings"].items()}


def effects(knobs, results: list[dict], canon, min_effect: float) -> list[dict]:
    """Each knob's effect on throughput: for each value, the median ratio against the
    baseline value over pairs of trials that differ in this knob only (else the medians of
    all trials with either value, marked unpaired)."""
    measured = [r for r in results if r["status"] in ("ok", "pruned") and r["samples_per_second"]]
    crashed = [r for r in results if r["status"] in ("failed", "oom", "timeout")]
    out = []
    for k in knobs:
        base_v = DEFAULT if k.kind == "own" else k.baseline
        values = []
        for v in k.values:
            cv = canon.get(k.name, {}).get(v, v)
            if cv == base_v:
                continue
            ratios = []
            for r in measured:
                cr = _canon(r, canon)
                if cr[k.name] != cv:
                    continue
                for q in measured:
                    cq = _canon(q, canon)
                    if cq[k.name] == base_v and all(cq[n] == cr[n] for n in cr if n != k.name):
                        ratios.append(r["samples_per_second"] / q["samples_per_second"])
            paired = bool(ratios)
            if not ratios:
                a = [r["samples_per_second"] for r in measured if _canon(r, canon)[k.name] == cv]
                b = [r["samples_per_second"] for r in measured
                     if _canon(r, canon)[k.name] == base_v]
                if a and b:
                    ratios = [statistics.median(a) / statistics.median(b)]
            n_crash = sum(1 for r in crashed if _canon(r, canon)[k.name] == cv)
            if any(v2 == v for v2 in [x["value"] for x in values]):
                continue
            values.append({"value": typed(v), "text": v,
                           "ratio": statistics.median(ratios) if ratios else None,
                           "pairs": len(ratios) if paired else 0, "crashed": n_crash})
        applies = bool(values) or k.kind != "own"
        measured_vals = [x for x in values if x["ratio"] is not None]
        if not values:
            verdict = "does not apply to this job" if k.kind == "own" else "not varied"
        elif not measured_vals:
            verdict = "not measured" + (" (every other value crashed)" if any(
                x["crashed"] for x in values) else "")
        elif all(abs(x["ratio"] - 1.0) < min_effect for x in measured_vals):
            verdict = f"no effect (every value within ±{min_effect * 100:.0f} % of the baseline's)"
        else:
            best = max(measured_vals, key=lambda x: x["ratio"])
            verdict = (f"best {k.name}={best['text']}: {_pct(best['ratio'])}" if best["ratio"] > 1
                       else "every other value is slower")
        out.append({"knob": k.name, "kind": k.kind, "changes_math": k.changes_math,
                    "baseline": None if k.kind == "own" else typed(k.baseline),
                    "applies": applies,
                    "no_effect": bool(measured_vals) and all(
                        abs(x["ratio"] - 1.0) < min_effect for x in measured_vals),
                    "verdict": verdict, "values": values})
    return out


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.0f} %"


def _bytes(n) -> str:
    if n is None:
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def evidence(r: dict, base: dict | None) -> list[str]:
    """Why this trial is faster or slower than the baseline, from what both runs show."""
    out = []
    if r["status"] in ("failed", "oom", "no_steps", "timeout"):
        return [r["error"]] if r["error"] else []
    if base is None or r is base:
        if r.get("data_wait_share") is not None:
            out.append(f"data wait {r['data_wait_share'] * 100:.0f} % of the step "
                       f"({r['data_wait_per_step_s'] * 1e3:.3g} ms)")
        if r["findings"]:
            out.append("fired: " + ", ".join(r["findings"]))
        return out
    bw, tw = base.get("data_wait_share"), r.get("data_wait_share")
    bs, ts = base.get("data_wait_per_step_s"), r.get("data_wait_per_step_s")
    if bw is not None and tw is not None and (bw >= 0.1 or tw >= 0.1) and (
            abs(bw - tw) >= 0.05 or (bs and ts is not None and abs(ts / bs - 1) >= 0.2)):
        out.append(f"data wait {bw * 100:.0f} % -> {tw * 100:.0f} % of the step "
                   f"({bs * 1e3:.3g} -> {ts * 1e3:.3g} ms)")
    if r["status"] == "ok":  # a pruned trial ran too few steps for the rules' windows
        gone = sorted(set(base["findings"]) - set(r["findings"]))
        new = sorted(set(r["findings"]) - set(base["findings"]))
        if gone:
            out.append(", ".join(gone) + " no longer fires")
        if new:
            out.append(", ".join(new) + " fires")
    bc, tc = base.get("cpu_cores"), r.get("cpu_cores")
    if bc and tc and abs(tc / bc - 1) >= 0.2:
        out.append(f"CPU {bc:.1f} -> {tc:.1f} cores")
    bm, tm = base.get("peak_rss_bytes"), r.get("peak_rss_bytes")
    if bm and tm and abs(tm / bm - 1) >= 0.2:
        out.append(f"memory {_bytes(bm)} -> {_bytes(tm)}")
    if r["changes_math"] and r.get("loss"):
        bl = base.get("loss")
        txt = f"loss {r['loss']['first']:.4g} -> {r['loss']['last']:.4g}"
        if bl:
            txt += f" (baseline {bl['first']:.4g} -> {bl['last']:.4g})"
        out.append(txt)
    return out


def _shell_quote(a: str) -> str:
    import shlex

    return shlex.quote(a)


def command_line(r: dict, record: bool) -> str:
    """The trial's setting as a command line; own knobs need `trainprof record` to apply."""
    words = [*r["env"]]
    if record:
        words += ["trainprof", "record", "--"]
    words += [_shell_quote(a) for a in r["command"]]
    return " ".join(words)


def command_as_run(r: dict, knobs, canon) -> str:
    """The trial's command line as the job saw it: a value of trainprof's own knob that the
    baseline shows leaves the job as it is (canon: canonical_values) is left out, and
    `trainprof record` is needed only while one of its own knobs is left."""
    drop = {f"{k.env}={r['raw_settings'][k.name]}" for k in knobs
            if k.kind == "own" and canon.get(k.name, {}).get(r["raw_settings"][k.name]) == DEFAULT}
    env = [e for e in r["env"] if e not in drop]
    own_env = {k.env for k in knobs if k.kind == "own"}
    record = any(e.split("=", 1)[0] in own_env for e in env)
    return command_line(dict(r, env=env), record)


def summarize(spec, results: list[dict], price, *, elapsed_s: float, trials_s: float, ran: int,
              stop_reason: str, setup_s: float) -> dict:
    o = spec.options
    base = next((r for r in results if r.get("baseline") and r["status"] == "ok"), None)
    if base is None:
        base = next((r for r in results if r.get("baseline")), None)
    canon = canonical_values(spec.knobs, base if base and base["status"] == "ok" else None)
    base_ok = base is not None and base["status"] == "ok"
    for r in results:
        r["changed"] = changed_as_run(spec.knobs, r["raw_settings"], canon)
    for r in results:
        r["speedup"] = (r["samples_per_second"] / base["samples_per_second"]
                        if base_ok and r["samples_per_second"] else None)
        r["evidence"] = evidence(r, base if base_ok else None)
    ok = [r for r in results if r["status"] == "ok" and r.get("objective") is not None]
    best = max(ok, key=lambda r: r["objective"]) if ok else None
    notes = list(spec.notes)
    objective = o.objective
    if objective == "samples_per_usd" and price is None:
        objective = "samples_per_second"
        notes.append("no price for this machine (give --instance-type or --price-usd-per-hour): "
                     "ranked by throughput")
    if any(r["throughput_unit"] == "steps" and r["samples_per_second"] for r in results):
        notes.append("the batch size is unknown for some trials (no DataLoader seen): their "
                     "throughput is in steps/s (give --samples-per-step)")
    for r in results:
        if r["status"] in ("failed", "oom", "timeout") and len(r["changed"]) == 1:
            notes.append(f"{r['changed'][0]} failed ({r['status']}) in trial {r['trial']}: "
                         f"other settings with it were skipped")
    in_code = []
    if best is not None:
        for k in spec.knobs:
            v = best["raw_settings"][k.name]
            if k.kind == "own" and v != DEFAULT and canon.get(k.name, {}).get(v) != DEFAULT:
                in_code.append(K.OWN_KNOBS[k.name].in_code.format(
                    v=typed(v), dtype={"bf16": "bfloat16", "fp16": "float16"}.get(v, v)))
    ranked = sorted(results, key=_rank_key)
    # the setting with the fewest changes whose objective is within --min-effect of the best's
    simplest = None
    if best is not None and best["objective"] > 0:
        near = [r for r in ok if r["objective"] >= best["objective"] * (1 - o.min_effect)]
        simplest = min(near, key=lambda r: (len(r["changed"]), -r["objective"]))
        if simplest is best:
            simplest = None
    return {
        "baseline": base,
        "best": best,
        "trials": results,
        "ranked": [r["trial"] for r in ranked],
        "objective": objective,
        "price": price,
        "effects": effects(spec.knobs, results, canon, o.min_effect),
        "best_command": command_as_run(best, spec.knobs, canon) if best else None,
        "best_in_code": in_code,
        "simplest": None if simplest is None else {
            "trial": simplest["trial"], "changed": simplest["changed"],
            "command": command_as_run(simplest, spec.knobs, canon)},
        "command": spec.command,
        "knobs": [{"name": k.name, "kind": k.kind, "env": k.env, "values": k.values,
                   "changes_math": k.changes_math} for k in spec.knobs],
        "state": str(spec.state),
        "elapsed_s": elapsed_s,
        "trials_s": trials_s,
        "outside_trials_s": max(0.0, elapsed_s - trials_s),
        "outside_share": max(0.0, elapsed_s - trials_s) / elapsed_s if elapsed_s > 0 else None,
        "setup_s": setup_s,
        "trials_run_now": ran,
        "stop_reason": stop_reason,
        "epoch_samples": o.epoch_samples,
        "min_effect": o.min_effect,
        "notes": notes,
    }


_STATUS_ORDER = {"ok": 0, "pruned": 1, "stopped": 2, "interrupted": 2, "no_steps": 3,
                 "timeout": 4, "oom": 5, "failed": 6}


def _rank_key(r: dict):
    obj = r.get("objective")
    return (0 if r["status"] == "ok" else 1, -(obj if obj is not None else -math.inf),
            _STATUS_ORDER.get(r["status"], 9), r["trial"])


def _fmt(v, spec: str = ".1f", na: str = "-") -> str:
    return na if v is None else format(v, spec)


def _table(rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in
                 enumerate(zip(row, widths))]
        out.append("  ".join(cells).rstrip())
    return out


def _what(r: dict, spec_knobs: list[dict]) -> str:
    txt = ", ".join(r["changed"]) or "(baseline)"
    if r["changes_math"]:
        txt += " [changes the training]"
    return txt


def render_text(s: dict) -> str:
    trials = {r["trial"]: r for r in s["trials"]}
    lines = []
    per = "samples/s" if not any(r["throughput_unit"] == "steps" for r in s["trials"]
                                 if r["samples_per_second"]) else "per s"
    head = ["#", "trial", "status", per, "vs base"]
    price = s["price"]
    epoch = bool(s["epoch_samples"])
    if price:
        head.append("samples/$")
    if epoch:
        head.append("$/epoch" if price else "epoch")
    head += ["what changed", "evidence"]
    rows = [head]
    rank = 0
    for n in s["ranked"]:
        r = trials[n]
        rank_txt = str(rank := rank + 1) if r["status"] == "ok" else "-"
        row = [rank_txt, str(n), r["status"], _fmt(r["samples_per_second"]),
               _fmt(r["speedup"], ".2f") + ("x" if r["speedup"] is not None else "")]
        if price:
            row.append(_fmt(r["samples_per_usd"], ".3g"))
        if epoch:
            if price:
                row.append(_fmt(r.get("usd_per_epoch"), ".4g"))
            else:
                row.append(_fmt(r.get("epoch_s"), ".0f") + ("s" if r.get("epoch_s") else ""))
        row += [_what(r, s["knobs"]), "; ".join(r["evidence"])]
        rows.append(row)
    right = {0, 1, 3, 4} | ({5} if price else set()) | ({5 + bool(price)} if epoch else set())
    n_ok = sum(1 for r in s["trials"] if r["status"] == "ok")
    lines.append(f"trainprof tune: {len(s['trials'])} trials ({n_ok} complete), "
                 f"{s['trials_run_now']} run now in {s['elapsed_s']:.0f} s "
                 f"({s['outside_trials_s']:.1f} s outside trials); stopped: {s['stop_reason']}")
    obj = {"samples_per_usd": "samples per dollar", "samples_per_second": "throughput",
           "step_time": "time per step"}[s["objective"]]
    lines.append(f"objective: {obj}" + (f" at ${price['usd_per_hour']:.4g}/h "
                                         f"({price['instance_type'] or price['source']})"
                                         if price else ""))
    for note in s["notes"]:
        lines.append(f"note: {note}")
    lines.append("")
    lines += _table(rows, right)
    lines.append("")
    lines.append("knob effects (throughput against the baseline value, other knobs equal):")
    for e in s["effects"]:
        vals = ", ".join(
            f"{x['text']}: " + (_pct(x["ratio"]) if x["ratio"] is not None else "n/a")
            + (f" ({x['crashed']} crashed)" if x["crashed"] else "")
            + ("" if x["pairs"] or x["ratio"] is None else " unpaired")
            for x in e["values"])
        flag = " [changes the training]" if e["changes_math"] else ""
        lines.append(f"  {e['knob']}{flag}: {e['verdict']}" + (f"  ({vals})" if vals else ""))
    lines.append("")
    best = s["best"]
    if best is not None:
        lines.append(f"best: trial {best['trial']} ({', '.join(best['changed']) or 'the baseline'})"
                     + (f", {best['speedup']:.2f}x the baseline" if best["speedup"] else ""))
        lines.append(f"  command: {s['best_command']}")
        for c in s["best_in_code"]:
            lines.append(f"  in code: {c}")
        lines.append(f"  report:  trainprof report {best['run']}")
        simple = s.get("simplest")
        if simple:
            lines.append(f"  within {s['min_effect'] * 100:.0f} % of it with fewer changes: trial "
                         f"{simple['trial']} ({', '.join(simple['changed']) or 'the baseline'}): "
                         f"{simple['command']}")
    if s.get("projections"):
        lines.append(f"projections of trial {s['projections'][0]['from_trial']} onto other "
                     f"instance types (not measured; ranked by samples per dollar):")
        for p in s["projections"]:
            lines.append(f"  {p['instance_type']:<16} {_fmt(p['samples_per_second']):>9} samples/s"
                         f" {_fmt(p['samples_per_usd'], '.3g'):>9} samples/$"
                         f"  ${_fmt(p['usd_per_hour'], '.3f')}/h  ({p['basis']})")
    lines.append(f"state: {s['state']} (results: tune.json, tune.html; trial runs: trials/NNN; "
                 f"re-run the same command to continue)")
    return "\n".join(lines) + "\n"


def write_outputs(state: Path, s: dict) -> None:
    tmp = state / "tune.json.tmp"
    tmp.write_text(json.dumps(s, indent=1) + "\n")
    os.replace(tmp, state / "tune.json")
    tmp = state / "tune.html.tmp"
    tmp.write_text(render_html(s))
    os.replace(tmp, state / "tune.html")


def render_html(s: dict) -> str:
    """One self-contained page: the ranked table with a link to each trial's report."""
    e = html.escape
    trials = {r["trial"]: r for r in s["trials"]}
    state = Path(s["state"]).resolve()
    rows = []
    for n in s["ranked"]:
        r = trials[n]
        run = Path(r["run"]).resolve()
        try:
            rel = os.path.relpath(run, state)
        except ValueError:
            rel = str(run)
        report = f'<a href="{e(rel)}/report.html">report</a>' if (run / "report.html").exists() \
            else e(rel)
        rows.append(
            f"<tr class='{e(r['status'])}'><td>{n}</td><td>{e(r['status'])}</td>"
            f"<td class=n>{e(_fmt(r['samples_per_second']))}</td>"
            f"<td class=n>{e(_fmt(r['speedup'], '.2f'))}</td>"
            f"<td class=n>{e(_fmt(r['samples_per_usd'], '.3g'))}</td>"
            f"<td>{e(_what(r, s['knobs']))}</td><td>{e('; '.join(r['evidence']))}</td>"
            f"<td>{report}</td></tr>")
    effects = "".join(f"<li><b>{e(x['knob'])}</b>: {e(x['verdict'])}</li>" for x in s["effects"])
    best = s["best"]
    best_html = (f"<p>Best: trial {best['trial']}; command: <code>{e(s['best_command'])}</code></p>"
                 if best else "<p>No trial completed.</p>")
    notes = "".join(f"<li>{e(n)}</li>" for n in s["notes"])
    proj = "".join(
        f"<tr><td>{e(p['instance_type'])}</td><td class=n>{e(_fmt(p['samples_per_second']))}</td>"
        f"<td class=n>{e(_fmt(p['samples_per_usd'], '.3g'))}</td>"
        f"<td class=n>{e(_fmt(p['usd_per_hour'], '.3f'))}</td><td>{e(p['basis'])}</td></tr>"
        for p in s.get("projections") or [])
    if proj:
        proj = ("<h2>Projections onto other instance types (not measured)</h2><table><thead><tr>"
                "<th>instance type</th><th>samples/s</th><th>samples/$</th><th>$/h</th>"
                "<th>basis</th></tr></thead><tbody>" + proj + "</tbody></table>")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>trainprof tune: {e(' '.join(s['command']))}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:left}}
td.n{{text-align:right}}tr.failed,tr.oom,tr.timeout{{color:#a00}}tr.pruned{{color:#777}}
code{{background:#f4f4f4;padding:.1em .3em}}</style></head><body>
<h1>trainprof tune</h1>
<p>Command: <code>{e(' '.join(s['command']))}</code>; objective: {e(s['objective'])};
{len(s['trials'])} trials, {s['elapsed_s']:.0f} s.</p>
<ul>{notes}</ul>
{best_html}
<table><thead><tr><th>trial</th><th>status</th><th>samples/s</th><th>vs baseline</th>
<th>samples/$</th><th>what changed</th><th>evidence</th><th>run</th></tr></thead>
<tbody>{''.join(rows)}</tbody></table>
{proj}
<h2>Knob effects</h2><ul>{effects}</ul>
</body></html>
"""


MAX_REPORTED_TRIALS = 1000


def report_state(state: Path, out: str | None = None) -> int:
    """`trainprof report STATE` on a tune state directory (src/cli/report_command.cc hands it
    over): writes each trial's report into its run (where it has none yet), so that the table's
    "report" links open, then the result table itself (tune.html, or `out`)."""
    path = state / "tune.json"
    try:
        if path.stat().st_size > 256 << 20:
            raise ValueError("larger than 256 MiB")
        s = json.loads(path.read_text())
        trials = s["trials"]
        if not isinstance(trials, list):
            raise ValueError("'trials' is not a list")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: {path}: not a tune result ({exc})", file=sys.stderr)
        return 1
    exe = os.environ.get("TRAINPROF_BIN") or "trainprof"
    written = 0
    for r in trials[:MAX_REPORTED_TRIALS]:
        run = Path(str(r.get("run", "")))
        if not run.is_absolute():  # as tune stored it, relative to where tune ran
            run = run if run.exists() else state / "trials" / run.name
        r["run"] = str(run)
        if not (run / "run.json").exists() or (run / "report.html").exists():
            continue
        proc = subprocess.run([exe, "report", "-q", str(run)], capture_output=True, text=True,
                              timeout=600)
        if proc.returncode != 0:
            print(f"warning: the report of trial {r.get('trial')} failed: "
                  f"{proc.stderr.strip()[-300:]}", file=sys.stderr)
        else:
            written += 1
    s["state"] = str(state)
    target = Path(out) if out else state / "tune.html"
    target.write_text(render_html(s))
    print(f"wrote {target} (the tune result table; {written} trial report(s) written)")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--reader"]:
        sys.exit(_reader_main())
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--report":
        sys.exit(report_state(Path(sys.argv[2]), sys.argv[3] if len(sys.argv) == 4 else None))
    sys.exit("usage: python -m trainprof._tune_results --reader | --report STATE [OUT.html]")
