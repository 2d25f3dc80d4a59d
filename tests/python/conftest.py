"""Shared fixtures: where the trainprof executable is, and fresh run directories."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"


def trainprof_command() -> list[str]:
    """The command that runs the CLI: $TRAINPROF_BIN, else the installed console script."""
    if os.environ.get("TRAINPROF_BIN"):
        return [os.environ["TRAINPROF_BIN"]]
    # The native executable the installed package ships (what the console script execs).
    import trainprof.cli

    native = trainprof.cli.native_executable()
    if native.exists():
        return [str(native)]
    exe = shutil.which("trainprof", path=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    if exe is None:
        pytest.fail("the trainprof command is not installed (run scripts/setup.sh)")
    return [exe]


@pytest.fixture
def trainprof_cli() -> list[str]:
    return trainprof_command()


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.exists():
        pytest.fail(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


def smallest_kineto_trace(accept):
    """The smallest real Kineto trace in the shared data whose parsed document satisfies
    accept(doc): (path, doc)."""
    import gzip
    import json

    for path in sorted((SHARED_DATA / "traces").rglob("*.json*"), key=lambda p: p.stat().st_size):
        if path.suffix not in (".json", ".gz") or "MANIFEST" in path.name:
            continue
        opener = gzip.open if path.suffix == ".gz" else open
        try:
            with opener(path, "rt") as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and accept(doc):
            return path, doc
    raise AssertionError("no such Kineto trace under shared/data/traces")


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (Debian's chromium and chromium-driver) driven by Selenium, with the
    browser console kept (tests assert there are no errors); one per test module."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is required (scripts/requirements-dev.txt)")
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        pytest.fail("Debian's chromium and chromium-driver are required (scripts/system-packages.txt)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # Chromium leaves its singleton socket directory in $TMPDIR when it quits: a private one,
    # removed after, keeps /tmp clean across test runs.
    with tempfile.TemporaryDirectory(prefix="tp_chromium_") as tmp:
        service = Service(driver_path, env={**os.environ, "TMPDIR": tmp})
        driver = webdriver.Chrome(service=service, options=options)
        try:
            yield driver
        finally:
            driver.quit()
