"""Running one `trainprof tune` trial (docs/tune.md): `trainprof record` of the command with the
trial's values templated in or set in its environment, under a memory limit, stopped once its
steps are measured or its time is up. The driver is trainprof.tune."""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import time
from pathlib import Path

from trainprof import _tune_knobs as K
from trainprof import _tune_results as TR
from trainprof._tune_spec import DEFAULT, Knob, Spec, UsageError


# ---------------------------------------------------------------------------------------------
# One trial


def trainprof_executable() -> str:
    exe = os.environ.get("TRAINPROF_BIN")
    if exe:
        return exe
    from trainprof.cli import native_executable

    native = native_executable()
    if native.exists():
        return str(native)
    found = shutil.which("trainprof")
    if found is None:
        raise UsageError("the trainprof executable was not found (set $TRAINPROF_BIN)")
    return found


def templated(command: list[str], knobs: list[Knob], settings: dict[str, str]) -> list[str]:
    out = []
    for a in command:
        for k in knobs:
            if k.kind == "arg":
                a = a.replace("{" + k.name + "}", settings[k.name])
        out.append(a)
    return out


def trial_environment(knobs: list[Knob], settings: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TRAINPROF_TUNE_")
           and k not in ("TRAINPROF_RUN_DIR", "TRAINPROF_SOCKET", "TRAINPROF_NODE",
                         "TRAINPROF_RUN_ID")}
    env[K.OBSERVE_ENV] = "1"  # the job notes its model (whether the model knobs apply)
    for k in knobs:
        v = settings[k.name]
        if k.kind == "env":
            env[k.env] = v
        elif k.kind == "own" and v != DEFAULT:
            env[k.env] = v
    return env


def env_assignments(knobs: list[Knob], settings: dict[str, str]) -> list[str]:
    return [f"{k.env}={settings[k.name]}" for k in knobs
            if k.kind == "env" or (k.kind == "own" and settings[k.name] != DEFAULT)]


class Interrupted:
    """Set by SIGINT/SIGTERM: the running trial is stopped, results printed, exit 130."""

    flag = False


def _stop(proc: subprocess.Popen, grace_s: float = 20.0) -> None:
    """SIGTERM to `record` (it relays to the job and stores the end of the run), then, if it
    does not end, SIGKILL to the trial's whole process group."""
    if proc.poll() is not None:
        return
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _memory_limit(gib: float | None):
    if not gib:
        return None
    limit = int(gib * (1 << 30))

    def preexec():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return preexec


class TrialRunner:
    """Runs one trial under `record` and measures it from the live run directory (the main
    thread polls; nothing else runs meanwhile)."""

    POLL_S = 0.3

    def __init__(self, spec: Spec, exe: str, reader: TR.RunReader):
        self.spec = spec
        self.exe = exe
        self.o = spec.options
        self.reader = reader

    def record_command(self, run_dir: Path, number: int, settings: dict[str, str]) -> list[str]:
        cmd = [self.exe, "record", "--out", str(run_dir), "--name", f"tune-{number:03d}",
               "--tag", f"tune.trial={number}"]
        if self.o.no_gpu:
            cmd.append("--no-gpu")
        if self.o.instance_type:
            cmd += ["--instance-type", self.o.instance_type]
        for a in self.o.record_arg or []:
            cmd.append(a)
        return cmd + ["--", *templated(self.spec.command, self.spec.knobs, settings)]

    def run(self, number: int, settings: dict[str, str], report, deadline: float) -> dict:
        """Runs the trial; `report(measure, prune)` tells the pruner and returns True to
        prune it."""
        run_dir = self.spec.state / "trials" / f"{number:03d}"
        log_path = self.spec.state / "trials" / f"{number:03d}.log"
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        if run_dir.exists():  # left by an interrupted attempt with this number
            shutil.rmtree(run_dir)
        cmd = self.record_command(run_dir, number, settings)
        t0 = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    env=trial_environment(self.spec.knobs, settings),
                                    preexec_fn=_memory_limit(self.o.max_memory_gib))
        status = None
        last_count, last_progress = -1, t0
        first_step_s = None
        measure = None
        try:
            while True:
                time.sleep(self.POLL_S)
                exited = proc.poll() is not None
                measure = self.reader.live(run_dir, self.o.warmup_steps) or measure
                now = time.monotonic()
                if measure is not None:
                    if measure.total_steps != last_count:
                        last_count, last_progress = measure.total_steps, now
                        if first_step_s is None and measure.total_steps > 0:
                            first_step_s = now - t0
                    if measure.steps >= self.o.steps or (
                            measure.steps >= 1 and measure.seconds >= self.o.trial_seconds):
                        report(measure, False)
                        status = "ok"
                        break
                    if measure.steps >= 1 and not exited and report(measure):
                        status = "pruned"
                        break
                if exited:
                    break
                if Interrupted.flag:
                    status = "interrupted"
                    break
                if now >= deadline:
                    status = "stopped"
                    break
                if now - last_progress > self.o.trial_timeout:
                    status = "timeout"
                    break
        finally:
            stop_t = time.monotonic()
            _stop(proc)
        wall_s = time.monotonic() - t0
        exit_status = proc.returncode
        if exit_status is not None and exit_status < 0:
            exit_status = 128 - exit_status
        final, obs = self.reader.final(run_dir, self.o.warmup_steps, self.o.samples_per_step)
        if final is not None and final.steps >= 1:
            measure = final
        log_text = _tail(log_path)
        if status is None:  # the job ended by itself
            if exit_status == 0:
                status = "ok" if measure is not None and measure.steps >= 1 else "no_steps"
            else:
                status = "oom" if TR.looks_oom(log_text, exit_status) else "failed"
        result = TR.trial_result(number, settings, status, measure, run_dir, log_path,
                                 exit_status, log_text, self.spec, wall_s,
                                 startup_s=first_step_s, stop_s=time.monotonic() - stop_t,
                                 env=env_assignments(self.spec.knobs, settings),
                                 command=templated(self.spec.command, self.spec.knobs, settings),
                                 obs=obs)
        return result


def _tail(path: Path, limit: int = 1 << 20) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""

