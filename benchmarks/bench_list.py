"""Start-up cost of `python -m recbench list methods --task recbench_plus` and `list metrics`, against the baseline
of what the command used to import (the task class: `import recbench.tasks.recbench_plus.task`), same run, each the
best and median of --reps fresh interpreters.

    python benchmarks/bench_list.py [--reps 5]

Results: benchmarks/results/bench_list.json (with the load average: on a busy machine every figure grows).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMANDS = {
    "baseline: import the task class": [sys.executable, "-c", "import recbench.tasks.recbench_plus.task"],
    "list methods --task recbench_plus": [sys.executable, "-m", "recbench", "list", "methods", "--task",
                                          "recbench_plus"],
    "list metrics": [sys.executable, "-m", "recbench", "list", "metrics"],
}


def main() -> None:
    """Time each command in fresh interpreters, interleaved, and print/write best and median wall seconds."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    times: dict[str, list[float]] = {k: [] for k in COMMANDS}
    load0 = os.getloadavg()
    for _ in range(a.reps):
        for name, cmd in COMMANDS.items():
            t = time.perf_counter()
            subprocess.run(cmd, cwd=REPO, check=True, capture_output=True)
            times[name].append(time.perf_counter() - t)
    res = {"command": "python benchmarks/bench_list.py --reps %d" % a.reps, "load_avg_before": load0,
           "load_avg_after": os.getloadavg(),
           "seconds": {k: {"best": round(min(v), 3), "median": round(statistics.median(v), 3)} for k, v in times.items()}}
    base = res["seconds"]["baseline: import the task class"]["median"]
    res["median_ratio_to_baseline"] = {k: round(v["median"] / base, 2) for k, v in res["seconds"].items()}
    print(json.dumps(res, indent=1))
    out = Path(__file__).resolve().parent / "results" / "bench_list.json"
    out.write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
