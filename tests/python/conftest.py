"""Shared fixtures: where the trainprof executable is, and fresh run directories."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
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


class Browser:
    """One page of headless Chromium driven by Playwright (pip `playwright`: its driver; the
    browser is Debian's chromium, which Playwright launches by path, since its own browser
    builds are downloaded from outside the package index). The page's console errors and
    uncaught exceptions are kept for the tests to assert on (`errors()`)."""

    def __init__(self, page):
        self.page = page
        self._errors: list[str] = []
        page.on("console", lambda m: self._errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self._errors.append(f"uncaught: {e}"))

    def open(self, url: str) -> None:
        self.page.goto(url)

    def reload(self) -> None:
        self.page.reload()

    def js(self, body: str, *args):
        """Runs `body` as a function's body (`return` gives the value; `args[i]` are the
        arguments, element handles included)."""
        return self.page.evaluate(f"(args) => {{ {body} }}", list(args))

    def wait(self, body: str, timeout: float = 20):
        """Runs `body` (as `js`) every 0.2 s until it gives a truthy value; that value."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            value = self.js(body)
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for: {body}")

    def text(self, selector: str) -> str:
        """The rendered text (innerText) of the first element `selector` matches."""
        return self.page.locator(selector).first.inner_text()

    def resize(self, width: int, height: int) -> None:
        self.page.set_viewport_size({"width": width, "height": height})

    def screenshot(self, path: str) -> bool:
        self.page.screenshot(path=path)
        return Path(path).stat().st_size > 0

    def errors(self) -> list[str]:
        """The console errors and uncaught exceptions since the last call."""
        out, self._errors = self._errors, []
        return out


@pytest.fixture(scope="module")
def browser():
    """A Browser (above), one per test module, 1300 x 1000."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is required (scripts/requirements-dev.txt)")
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is required (scripts/system-packages.txt)")
    # Chromium leaves its singleton socket directory in $TMPDIR when it quits: a private one,
    # removed after, keeps /tmp clean across test runs.
    with tempfile.TemporaryDirectory(prefix="tp_chromium_") as tmp, sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=chromium, headless=True,
                                      args=["--no-sandbox", "--disable-gpu"],
                                      env={**os.environ, "TMPDIR": tmp})
        try:
            page = instance.new_page(viewport={"width": 1300, "height": 1000})
            yield Browser(page)
        finally:
            instance.close()
