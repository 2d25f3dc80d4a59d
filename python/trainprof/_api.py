"""The command line's work from Python: rules, cost, analyze, import, report and instances,
run in this process by the same C++ code as `trainprof <command> --json`, returning the same
content as plain dicts (or a DataFrame where it is a table). Failures raise TrainprofError with
the command's own message; nothing is printed.

    import trainprof
    run = trainprof.import_kineto("trace.json.gz", out="runs/t")
    trainprof.analyze(run)["ranks"]
    run.rules()["rules"]
    run.cost(instance_type="ml.p4d.24xlarge")["total_usd"]
    run.report("report.html")
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

from trainprof import _core

TrainprofError = _core.TrainprofError

PathLike = str | os.PathLike


def _path(p) -> str:
    """A run argument: a path, or a Run (its directory)."""
    d = getattr(p, "dir", None)
    return str(d if d is not None else os.fspath(p))


def _environment() -> None:
    # What the console script sets for the native CLI: the Python side of this installation
    # (startup hooks) and the interpreter that runs custom rules.
    os.environ.setdefault("TRAINPROF_PYTHON_PACKAGE_DIR", str(Path(__file__).resolve().parent))
    os.environ.setdefault("TRAINPROF_PYTHON", sys.executable)


def run_cli(*args: str) -> str:
    """Runs `trainprof ARGS...` in this process and returns what it printed on stdout.
    Raises TrainprofError with its error message when it fails."""
    _environment()
    code, out, err = _core.run_cli(["trainprof", *map(str, args)])
    if code != 0:
        text = err.decode("utf-8", "replace").strip()
        lines = [ln.removeprefix("error: ") for ln in text.splitlines() if ln.strip()]
        raise TrainprofError("; ".join(lines) or f"trainprof {args[0]} failed (exit {code})")
    return out.decode("utf-8", "replace")


def _json(*args: str) -> Any:
    return json.loads(run_cli(*args))


def _options(**opts) -> list[str]:
    """Keyword options as command-line options: instance_type="x" -> --instance-type x,
    True flags -> --flag, lists repeat the option, None and False are left out."""
    out: list[str] = []
    for key, value in opts.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            for v in value:
                out += [flag, str(v)]
        elif isinstance(value, Mapping):
            for k, v in value.items():
                out += [flag, f"{k}={v}"]
        else:
            out += [flag, str(value)]
    return out


def analyze(run, *, hta_compat: bool = False, diff=None, top: int | None = None,
            kernel_wait_threshold_us: float | None = None,
            scaling: Iterable[PathLike] | None = None, warmup_steps: int | None = None) -> dict:
    """Trace analyses per rank (`trainprof analyze RUN --json`): temporal, kernel-type and
    idle-time breakdowns, communication/computation overlap, kernel launch statistics. `run` is
    a run, or a Kineto trace file or a list of them (one job's ranks), analysed through a
    scratch run the command removes. With `diff`, the comparison with that baseline run (or
    trace file). With `scaling` (runs of the same job at other world sizes), the scaling
    efficiency instead: {"scaling": {"baseline", "runs": [...]}}."""
    runs = [_path(r) for r in run] if isinstance(run, (list, tuple)) else [_path(run)]
    return _json("analyze", *runs, "--json",
                 *_options(hta_compat=hta_compat, diff=None if diff is None else _path(diff),
                           top=top, kernel_wait_threshold_us=kernel_wait_threshold_us,
                           scaling=[_path(r) for r in scaling] if scaling else None,
                           warmup_steps=warmup_steps))


def evaluate_rules(run, *, config: PathLike | None = None, rule: Iterable[str] | None = None,
          custom: Iterable[PathLike] | PathLike | None = None, store: bool = False) -> dict:
    """The profiler rules (`trainprof rules RUN --json`): {"rules": [{"name", "triggered",
    "violations", "datapoints", "parameters", "findings": [...]}]}. `rule` takes overrides as
    on the command line ("StepOutlier.stddev=5"); `custom` Python rule files; `store` keeps
    the findings in the run."""
    if isinstance(custom, (str, os.PathLike)):
        custom = [custom]
    return _json("rules", _path(run), "--json",
                 *_options(config=config, rule=list(rule or []) or None,
                           custom=[os.fspath(c) for c in custom] if custom else None,
                           store=store))


def cost(run, *, instance_type: str | None = None, instances: int | None = None,
         spot: bool = False, price_usd_per_hour: float | None = None,
         discount_pct: float | None = None, catalog: PathLike | None = None,
         volume_gb: float | None = None, idle_threshold: float | None = None,
         max_price_age_days: int | None = None) -> dict:
    """What the run cost (`trainprof cost RUN --json`): the instance and price used (with its
    date and source), billed seconds by phase, total, idle-accelerator cost, cost per step and
    the ranked what-ifs."""
    return _json("cost", _path(run), "--json",
                 *_options(instance_type=instance_type, instances=instances, spot=spot,
                           price_usd_per_hour=price_usd_per_hour, discount_pct=discount_pct,
                           catalog=catalog, volume_gb=volume_gb, idle_threshold=idle_threshold,
                           max_price_age_days=max_price_age_days))


def report(run, path: PathLike | None = None, *, json_path: PathLike | None = None,
           pdf: PathLike | None = None, scaling: Iterable[PathLike] | None = None,
           warmup_steps: int | None = None) -> dict:
    """Writes the HTML report (default <run>/report.html) and its JSON (default
    <run>/report.json), and a PDF when `pdf` is given; with `scaling` (runs of the same job at
    other world sizes) a scaling-efficiency section. Returns {"html", "json", "pdf"} paths
    (pdf None when not asked)."""
    run_dir = _path(run)
    html = os.fspath(path) if path is not None else os.path.join(run_dir, "report.html")
    js = os.fspath(json_path) if json_path is not None else os.path.join(run_dir, "report.json")
    run_cli("report", run_dir, "--out", html, "--json", js,
            *(["--pdf", os.fspath(pdf)] if pdf is not None else []),
            *_options(scaling=[_path(r) for r in scaling] if scaling else None,
                      warmup_steps=warmup_steps))
    return {"html": html, "json": js, "pdf": os.fspath(pdf) if pdf is not None else None}


def _import(kind: str, sources, out: PathLike, name: str | None, **opts):
    from trainprof._reader import open as open_run

    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    summary = _json("import", kind, *[os.fspath(s) for s in sources], "--out", os.fspath(out),
                    "--json", *_options(name=name, **opts))
    run = open_run(os.fspath(out))
    run.import_summary = summary
    return run


def import_kineto(sources, out: PathLike, *, name: str | None = None):
    """Imports PyTorch profiler / Kineto traces (.json or .json.gz; one per rank) into the new
    run directory `out` and returns it opened (its `import_summary` holds the counts)."""
    return _import("kineto", sources, out, name)


def import_smdebug(source, out: PathLike, *, name: str | None = None):
    """Imports a SageMaker Debugger profiler-output folder into the new run directory `out`."""
    return _import("smdebug", source, out, name)


def import_horovod(sources, out: PathLike, *, name: str | None = None,
                   base_time_us: int | None = None):
    """Imports Horovod timelines (HOROVOD_TIMELINE files) into the new run directory `out`."""
    return _import("horovod", sources, out, name, base_time_us=base_time_us)


def instances(*, gpu: str | None = None, max_price: float | None = None,
              provider: str | None = None, service: str | None = None,
              catalog: PathLike | None = None, max_price_age_days: int | None = None,
              sort: str | None = None, as_frame: bool = False):
    """The instance catalog (`trainprof instances --json`), filtered; a DataFrame with
    `as_frame`. `sort`: "price" (default), "gb" ($ per GiB of accelerator memory), "fp32" or
    "bf16" ($ per peak dense TFLOP), types without the figure last."""
    data = _json("instances", "--json",
                 *_options(gpu=gpu, max_price=max_price, provider=provider, service=service,
                           catalog=catalog, max_price_age_days=max_price_age_days, sort=sort))
    if not as_frame:
        return data
    import pandas as pd

    rows = data.get("instances", data) if isinstance(data, dict) else data
    return pd.DataFrame(rows)
