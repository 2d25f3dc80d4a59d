"""Runs custom rules (subclasses of trainprof.rules.Rule in Python files) on a run.

    python -m trainprof.rules_runner RUN --custom my_rule.py [--custom other.py]
                                         [--rule NAME.param=value] [--json]

`trainprof rules RUN --custom FILE` and `trainprof record --custom-rule FILE` run this as a
subprocess and merge its entries with the built-in rules'. With --json it prints
``{"rules": [entry...], "errors": [{"file", "rule", "error"}...]}`` where each entry has the
shape of the built-in rules' entries (name, triggered, violations, datapoints, parameters,
findings, details). A file that does not load, or a rule that raises or returns something
wrong, is reported in "errors" (naming the file and the rule); the other rules still run.

Exit status: 0 when every rule ran, 1 when some failed (see "errors"), 2 for a usage error
(the run cannot be opened, a bad --rule).

With --live (what `record` runs while the job runs) it reads commands on stdin, one a line,
and answers each with one JSON line on stdout:

    poll     -> {"findings": [{"rule", "severity", ...}...], "errors": [...]}
                rules that implement update() get what the run gained since the last poll
    finish   -> the same line for the rest of the run (update(..., final=True)), then
    (or EOF)    {"final": true, "rules": [entry...], "errors": [...]}: every rule's entry,
                rules that only implement evaluate() evaluated now over the whole run

A rule that raises while live is reported once in "errors" and not called again.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import inspect
import json
import os
import signal
import sys
import traceback
from pathlib import Path
from types import ModuleType

from trainprof.rules import (NewData, Rule, RuleError, check_finding, finding_to_json, parse_value,
                             rule_entry, run_rule)


class UsageError(Exception):
    pass


def _error_text(e: BaseException, file: str) -> str:
    """The exception with the frames inside the rule's file (where the user's bug is)."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == file]
    where = "".join(f" (line {f.lineno}, in {f.name})" for f in frames[-1:])
    return f"{type(e).__name__}: {e}{where}"


def load_rules(path: str) -> list[type[Rule]]:
    """The Rule subclasses defined in the file `path`, in definition order."""
    file = str(Path(path).resolve())
    if not Path(file).is_file():
        raise FileNotFoundError(f"no such file: {path}")
    module_name = "trainprof_custom_rule_" + hashlib.sha1(file.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return _rules_in(module)


def _rules_in(module: ModuleType) -> list[type[Rule]]:
    found = []
    for _, obj in inspect.getmembers(module, inspect.isclass):
        if issubclass(obj, Rule) and obj is not Rule and obj.__module__ == module.__name__ \
                and not inspect.isabstract(obj) and not obj.__name__.startswith("_"):
            found.append(obj)
    found.sort(key=lambda c: inspect.getsourcelines(c)[1])
    return found


def parse_overrides(texts: list[str]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for text in texts:
        name, dot, rest = text.partition(".")
        param, eq, value = rest.partition("=")
        if not dot or not eq or not name or not param:
            raise UsageError(f"--rule expects NAME.param=value, got {text!r}")
        out.setdefault(name, {})[param] = parse_value(value)
    return out


def _open(run_dir: str):
    from trainprof import Run

    try:
        return Run(run_dir)
    except Exception as e:  # noqa: BLE001 - the reader's error says what is wrong
        raise UsageError(f"cannot open run {run_dir}: {e}") from None


def evaluate(run_dir: str, files: list[str], overrides: dict[str, dict],
             required: list[str] = ()) -> dict:
    """Loads and runs the rules of `files` on the run; returns {"rules": [...], "errors": [...]}."""
    run = _open(run_dir)
    entries: list[dict] = []
    errors: list[dict] = []
    for path, file, rule in _instantiate(files, overrides, errors, required):
        try:
            entries.append(run_rule(rule, run))
        except RuleError as e:
            errors.append({"file": path, "rule": rule.rule_name(), "error": str(e)})
        except (Exception, SystemExit) as e:  # noqa: BLE001
            errors.append({"file": path, "rule": rule.rule_name(), "error": _error_text(e, file)})
    return {"rules": entries, "errors": errors}


def _instantiate(files: list[str], overrides: dict[str, dict], errors: list[dict],
                 required: list[str] = ()):
    """(path, resolved file, rule instance) for each rule the files define, in order; files
    that do not load and rules that cannot be created are entries of `errors`."""
    out = []
    seen: dict[str, str] = {}
    for path in files:
        file = str(Path(path).resolve())
        try:
            classes = load_rules(path)
        except (Exception, SystemExit) as e:  # noqa: BLE001 - user code fails: report it
            errors.append({"file": path, "rule": None,
                           "error": f"cannot load the file: {_error_text(e, file)}"})
            continue
        if not classes:
            errors.append({"file": path, "rule": None,
                           "error": "defines no subclass of trainprof.rules.Rule"})
            continue
        for cls in classes:
            name = cls.rule_name()
            if name in seen:
                errors.append({"file": path, "rule": name,
                               "error": f"a rule named {name} is already defined in {seen[name]}"})
                continue
            seen[name] = path
            try:
                out.append((path, file, cls(**overrides.get(name, {}))))
            except RuleError as e:
                errors.append({"file": path, "rule": name, "error": str(e)})
            except (Exception, SystemExit) as e:  # noqa: BLE001
                errors.append({"file": path, "rule": name, "error": _error_text(e, file)})
    for name in overrides:
        if name not in seen:
            raise UsageError(f"--rule {name}.…: no custom rule named {name} "
                             f"(custom rules: {', '.join(seen) or 'none'})")
    for name in required:
        if name not in seen:
            raise UsageError(f"the rule configuration names {name}, which is neither a built-in "
                             f"nor a custom rule (custom rules: {', '.join(seen) or 'none'})")
    return out


class _LiveRule:
    def __init__(self, path: str, file: str, rule: Rule):
        self.path, self.file, self.rule = path, file, rule
        self.findings: list = []
        self.keys: set = set()
        self.failed = False


def live(run_dir: str, files: list[str], overrides: dict[str, dict], commands, out,
         required: list[str] = ()) -> None:
    """The --live loop: answers each command read from `commands` with a JSON line on `out`."""
    errors: list[dict] = []
    rules = [_LiveRule(*r) for r in _instantiate(files, overrides, errors, required)]
    run = _open(run_dir)

    def fail(lr: _LiveRule, e: BaseException) -> dict:
        lr.failed = True
        text = str(e) if isinstance(e, RuleError) else _error_text(e, lr.file)
        return {"file": lr.path, "rule": lr.rule.rule_name(), "error": text}

    def poll(final: bool) -> None:
        new = NewData(run.new_system_metrics(), run.new_events(), final=final)
        found: list[dict] = []
        failed: list[dict] = []
        for lr in rules:
            if lr.failed or not lr.rule.is_incremental():
                continue
            try:
                for f in lr.rule.update(run, new) or []:
                    f = check_finding(lr.rule, f)
                    key = (f.node, f.device, f.start_ns, f.end_ns, f.message)
                    if key in lr.keys:  # a rule that repeats itself: once is enough
                        continue
                    lr.keys.add(key)
                    lr.findings.append(f)
                    found.append({"rule": f.rule, **finding_to_json(f)})
            except (Exception, SystemExit) as e:  # noqa: BLE001 - reported, others go on
                failed.append(fail(lr, e))
        errors.extend(failed)
        _send(out, {"findings": found, "errors": failed})

    for line in commands:
        command = line.strip()
        if command == "poll":
            poll(final=False)
        elif command == "finish":
            break
        elif command:
            _send(out, {"findings": [], "errors": [{"file": "", "rule": None,
                                                    "error": f"unknown command {command!r}"}]})
    poll(final=True)
    entries = []
    for lr in rules:
        try:
            if lr.rule.is_incremental():
                if not lr.failed:
                    entries.append(rule_entry(lr.rule, lr.findings))
            else:
                entries.append(run_rule(lr.rule, run))
        except (Exception, SystemExit) as e:  # noqa: BLE001
            errors.append(fail(lr, e))
    _send(out, {"final": True, "rules": entries, "errors": errors})


def _send(out, message: dict) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def _print_text(result: dict, out) -> None:
    for e in result["rules"]:
        out.write(f"{e['name']}: {'fired' if e['triggered'] else 'no finding'} "
                  f"({e['violations']} violation(s), {e['datapoints']} datapoint(s))\n")
        for f in e["findings"]:
            out.write(f"  [{f['severity']}] {f['node']}{'/' + f['device'] if f['device'] else ''}"
                      f": {f['message']}\n")
            if f["recommendation"]:
                out.write(f"    what to do: {f['recommendation']}\n")
    for err in result["errors"]:
        out.write(f"error: {_describe(err)}\n")


def _describe(err: dict) -> str:
    rule = f"rule {err['rule']} in " if err["rule"] else ""
    return f"custom {rule}{err['file']}: {err['error']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainprof.rules_runner",
                                     description="Run custom Python rules on a trainprof run")
    parser.add_argument("run", help="run directory")
    parser.add_argument("--custom", action="append", default=[], required=True, metavar="FILE",
                        help="Python file defining trainprof.rules.Rule subclasses (repeatable)")
    parser.add_argument("--rule", action="append", default=[], metavar="NAME.param=value",
                        help="override a custom rule's parameter (repeatable)")
    parser.add_argument("--require", action="append", default=[], metavar="NAME",
                        help="fail (usage error) unless a custom rule has this name")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--live", action="store_true",
                        help="answer poll/finish commands on stdin with JSON lines (record)")
    args = parser.parse_args(argv)
    # What rules print goes to stderr, also what C extensions write to fd 1: stdout carries
    # the results (JSON) alone.
    sys.stdout.flush()
    saved_stdout = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            if args.live:
                # `record` owns the terminal's ^C (it passes it to the job); the runner ends
                # with the job, on "finish" or EOF.
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                with os.fdopen(os.dup(saved_stdout), "w") as out:
                    live(args.run, args.custom, parse_overrides(args.rule), sys.stdin, out,
                         args.require)
                return 0
            result = evaluate(args.run, args.custom, parse_overrides(args.rule), args.require)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        sys.stdout.flush()
        os.dup2(saved_stdout, 1)
        os.close(saved_stdout)
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        _print_text(result, sys.stdout)
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
