"""A/B of the sample viewer's page layout on one 60,000-example listwise run with one prompt per example: the old
page (commit 264d52b: the prompt table inside the rows' JSON, before the code) against today's (the prompt table
after the code), the same data, opened alternately in headless Chromium; time to first rows by the page's clock.

    python benchmarks/bench_view_ab.py [--reps 3]

Results: benchmarks/results/bench_view_ab.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from jinja2 import Environment, FileSystemLoader, select_autoescape  # noqa: E402

from recbench.cli import view  # noqa: E402
from tests.report.report_cdp import Chromium, find_chromium  # noqa: E402
from tests.view.scale import listwise_run, scaled_run  # noqa: E402

OLD = "264d52b"


def main() -> None:
    """Write both pages from one run dir, open them alternately, print and write the medians."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--n", type=int, default=60000)
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="rb_bench_view_ab_"))
    big = scaled_run(listwise_run(root), root / "big", a.n, unique_prompts=True)
    data = view.load_run(big)
    new = view.write_view(big, root / "new.html", data)
    (root / "old.html.j2").write_text(subprocess.run(
        ["git", "show", f"{OLD}:recbench/cli/view_templates/samples.html.j2"], cwd=REPO, check=True,
        capture_output=True, text=True).stdout)
    env = Environment(loader=FileSystemLoader(str(root)), autoescape=select_autoescape(["j2", "html"]))
    old = root / "old.html"
    old.write_text(env.get_template("old.html.j2").render(title="ab", data=view.script_json(data)))
    times: dict[str, list[float]] = {"old": [], "new": []}
    for _ in range(a.reps):
        for name, page in (("old", old), ("new", new)):
            with Chromium(find_chromium(), timeout_s=300) as c:
                s = c.open(page)
                times[name].append(round(c.evaluate(s, "window.recbenchView.firstRowsMs || performance.now()") / 1e3, 2))
            print(name, times[name][-1], flush=True)
    res = {"command": f"python benchmarks/bench_view_ab.py --reps {a.reps} --n {a.n}", "load_avg": os.getloadavg(),
           "page_mb": {"old": round(old.stat().st_size / 1e6, 1), "new": round(new.stat().st_size / 1e6, 1)},
           "first_rows_s": {k: {"runs": v, "median": statistics.median(v)} for k, v in times.items()}}
    res["median_ratio_new_to_old"] = round(res["first_rows_s"]["new"]["median"] / res["first_rows_s"]["old"]["median"], 2)
    print(json.dumps(res, indent=1))
    (REPO / "benchmarks" / "results" / "bench_view_ab.json").write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
