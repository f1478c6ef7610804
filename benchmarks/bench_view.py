"""The sample viewer at scale: page size, write time and time to the first rows in headless Chromium, for a real
listwise run (bundled sample, scripted answers) cloned to N examples; the unscaled run is the baseline, measured in
the same process.

    python benchmarks/bench_view.py [--n 60000] [--unique-prompts] [--screenshot FILE] [--out FILE]

Time to first rows is the page's own clock (performance.now() once the first page of rows is in the DOM, from
navigation start); `open` is the wall time until the load event; `filter` is one parse-status filter change and
`search` one free-text search over every example. Results: benchmarks/results/bench_view.json.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recbench.cli import view  # noqa: E402
from tests.report.report_cdp import Chromium, find_chromium  # noqa: E402
from tests.view.scale import listwise_run, scaled_run  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "bench_view.json"


def measure(run_dir: Path, html: Path, screenshot: Path | None = None) -> dict:
    """Write the page for run_dir and open it in Chromium; prints and returns the figures."""
    t = time.perf_counter()
    data = view.load_run(run_dir)
    view.write_view(run_dir, html, data)
    write_s = time.perf_counter() - t
    out = {"examples": data["n_samples"], "page_mb": round(html.stat().st_size / 1e6, 2), "write_s": round(write_s, 2)}
    with Chromium(find_chromium(), timeout_s=300) as c:
        t = time.perf_counter()
        s = c.open(html)
        out["open_s"] = round(time.perf_counter() - t, 2)
        out["first_rows_s"] = round(c.evaluate(s, "window.recbenchView.firstRowsMs") / 1000, 2)
        out["rows_in_dom"] = c.evaluate(s, "document.querySelectorAll('#rows tr').length")
        t = time.perf_counter()
        c.evaluate(s, "(() => { const f = document.getElementById('f-status'); f.value = 'ok';"
                      " f.dispatchEvent(new Event('change')); return true; })()")
        out["filter_s"] = round(time.perf_counter() - t, 2)
        t = time.perf_counter()
        out["search_matches"] = c.evaluate(s, "(() => { const v = window.recbenchView; v.state.text = 'user b';"
                                              " v.state.page = 0; v.draw(); return v.filtered().length; })()")
        out["search_s"] = round(time.perf_counter() - t, 2)
        c.evaluate(s, "(() => { const v = window.recbenchView; v.state.text = ''; v.state.status = 'all';"
                      " document.getElementById('f-status').value = 'all'; v.draw(); return true; })()")
        if screenshot:
            c.send("Emulation.setDeviceMetricsOverride", {"width": 1500, "height": 1000, "deviceScaleFactor": 1,
                                                          "mobile": False}, s)
            png = c.send("Page.captureScreenshot", {"format": "png"}, s)["data"]
            screenshot.write_bytes(base64.b64decode(png))
        out["console_errors"] = c.console_errors()
    print(json.dumps(out), flush=True)
    return out


def main() -> None:
    """Baseline (the run as made) and the scaled run, one process; writes the JSON results."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=60000)
    ap.add_argument("--unique-prompts", action="store_true", help="one distinct prompt per example (a real run)")
    ap.add_argument("--screenshot", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None,
                    help="default: benchmarks/results/bench_view[_unique_prompts].json")
    a = ap.parse_args()
    a.out = a.out or RESULTS.with_name(f"bench_view{'_unique_prompts' if a.unique_prompts else ''}.json")
    assert find_chromium(), "chromium not found (apt-get install -y chromium)"
    root = Path(tempfile.mkdtemp(prefix="rb_bench_view_"))
    src = listwise_run(root)
    base = measure(src, root / "base.html")
    t = time.perf_counter()
    big = scaled_run(src, root / f"scaled_{a.n}", a.n, a.unique_prompts)
    print(f"scaled run dir written in {time.perf_counter() - t:.1f} s", flush=True)
    scaled = measure(big, root / "scaled.html", a.screenshot)
    res = {"command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
           "load_avg": os.getloadavg(), "unique_prompts": a.unique_prompts, "baseline": base, "scaled": scaled,
           "first_rows_ratio": round(scaled["first_rows_s"] / max(base["first_rows_s"], 1e-3), 1)}
    print(json.dumps(res, indent=1))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
