"""How long a report takes to open in headless Chromium (Debian's chromium driven by Playwright):
from navigation to the load event, by which the charts' canvases exist. Run by
bench/run_all.d/report.sh on the 24-hour report (issue 7; the target: bench/targets.toml).

    python bench/report_open_time.py bench/out/report_bench/24h.html [--reps 5] [--figure NAME]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
import results  # noqa: E402 - bench/lib/results.py: the figures for bench/out/results.json


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("html")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--figure", help="the row of bench/targets.toml this measures")
    args = ap.parse_args()
    missing = [b for b in ("chromium",) if not shutil.which(b)]
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        missing.append(f"playwright ({e})")
    if missing:
        print(f"report open time: skipped, not installed: {', '.join(missing)}")
        if args.figure:
            results.skip(args.figure, f"not installed: {', '.join(missing)}")
        return

    url = Path(args.html).resolve().as_uri()
    times = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium"), headless=True,
                                     args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            for _ in range(args.reps):
                t0 = time.perf_counter()
                page.goto(url)  # returns after the load event: scripts ran, charts drawn
                canvases = page.evaluate("document.querySelectorAll('div.chart canvas').length")
                times.append(time.perf_counter() - t0)
        finally:
            browser.close()
    size_mb = Path(args.html).stat().st_size / 1e6
    print(f"{args.html}: {size_mb:.2f} MB, {canvases} chart canvases; open to load event: "
          f"median {statistics.median(times):.2f} s (first {times[0]:.2f} s, all "
          f"{', '.join(f'{t:.2f}' for t in times)})")
    if args.figure:
        results.add(args.figure, times)


if __name__ == "__main__":
    main()
