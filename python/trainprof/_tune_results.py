"""What `trainprof tune` measures in a trial's run directory (steps, throughput, memory, losses,
findings, through a reader process) and what each trial's result and price are. How the trials
are ranked, explained and printed is trainprof._tune_report; the driver is trainprof.tune."""

from __future__ import annotations

import json
import math
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

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



if __name__ == "__main__":
    if sys.argv[1:] == ["--reader"]:
        sys.exit(_reader_main())
    if len(sys.argv) in (3, 4) and sys.argv[1] == "--report":
        from trainprof._tune_report import report_state
        sys.exit(report_state(Path(sys.argv[2]), sys.argv[3] if len(sys.argv) == 4 else None))
    sys.exit("usage: python -m trainprof._tune_results --reader | --report STATE [OUT.html]")

