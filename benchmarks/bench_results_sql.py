"""`python -m recbench.results` over 1,000 run dirs: a sweep of model-free methods x seeds x limits on the bundled
PerRecBench sample (cheap runs: no model), then three example questions, each in a fresh process (the first query
includes the interpreter start, DuckDB's import, the run-dir search and the config table), with the load average.

    python benchmarks/bench_results_sql.py [--root DIR] [--seeds 25] [--skip-sweep] [--big 60000] [--out FILE]

--big N also clones one of the runs to N examples (the size of a 60,000-group PerRecBench run's samples.jsonl) and
asks a per-sample question over it.

The sweep is one `python -m recbench -m` multirun (4 methods x --seeds seeds x 10 limits = 1,000 jobs with 25 seeds),
its report turned off; an existing --root with run dirs is reused with --skip-sweep. Results:
benchmarks/results/bench_results_sql.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results" / "bench_results_sql.json"
METHODS = ("bm25_history", "random", "user_avg", "item_avg")
LIMITS = tuple(range(4, 44, 4))
QUESTIONS = {
    "best on long histories": (
        "SELECT method, count(*) AS runs, round(avg(mean), 3) AS mean_ptc, round(min(ci_low), 3) AS lowest_ci_low "
        "FROM metrics WHERE slice = 'history' AND value = 'long' AND metric = 'ptc' GROUP BY method "
        "ORDER BY mean_ptc DESC"),
    "headline by limit, seeds pooled": (
        "SELECT \"limit\", method, count(*) AS seeds, round(avg(headline), 3) AS ptc, round(stddev(headline), 3) AS sd "
        "FROM runs GROUP BY ALL ORDER BY \"limit\", ptc DESC LIMIT 12"),
    "per-sample: hard groups, random vs bm25 by group size": (
        "SELECT r.method, (s.meta->>'group_size')::INT AS group_size, count(*) AS samples, "
        "round(avg(s.metrics['ptc']), 3) AS ptc FROM samples s JOIN runs r USING (run_dir) "
        "WHERE s.meta->>'difficulty' = 'hard' AND r.method IN ('random', 'bm25_history') GROUP BY ALL "
        "ORDER BY group_size, r.method"),
}


def sweep(root: Path, seeds: int) -> float:
    """The multirun of model-free runs under root; its wall seconds."""
    args = [sys.executable, "-m", "recbench", "-m", "task=perrec", f"method={','.join(METHODS)}",
            f"seed=range({seeds})", f"limit={','.join(map(str, LIMITS))}", "run.progress=false",
            "hydra.callbacks.report.enabled=false", f"cache.path={root / 'cache.sqlite'}"]
    t = time.perf_counter()
    proc = subprocess.run(args, cwd=REPO, env={**os.environ, "RECBENCH_RUNS_DIR": str(root)}, capture_output=True,
                          text=True)
    if proc.returncode != 0:
        sys.exit(f"sweep failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return time.perf_counter() - t


def ask(root: Path, sql: str) -> dict:
    """One question in a fresh process: wall seconds, the command's own connect/query split, the rows."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "recbench.results", str(root), "--sql", sql, "--format", "json",
                           "--time"], cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"query failed: {proc.stderr}")
    return {"wall_s": round(wall, 2), "timing": proc.stderr.strip().splitlines()[-1], "rows": json.loads(proc.stdout)}


def big_run(root: Path, n: int) -> dict:
    """One run dir of the sweep cloned to n examples (tests/view/scale.py), then a per-sample question over it."""
    sys.path.insert(0, str(REPO))
    from tests.view.scale import scaled_run

    src = next(p.parent for p in sorted(root.rglob("metrics.json")) if "bm25_history" in str(p))
    big = root.parent / f"{root.name}-{n}" / "perrec" / "none" / "bm25_history" / "scaled"
    if not (big / "samples.jsonl").is_file():
        scaled_run(src, big, n)
    sql = ("SELECT meta->>'difficulty' AS difficulty, meta->>'history' AS history, count(*) AS samples, "
           "round(avg(metrics['ptc']), 3) AS ptc FROM samples GROUP BY ALL ORDER BY difficulty, history")
    return {"examples": n, "samples_mb": round((big / "samples.jsonl").stat().st_size / 1e6, 1), "sql": sql,
            **ask(big.parents[3], sql)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default="/tmp/recbench-bench-results-sql")
    ap.add_argument("--seeds", type=int, default=25)
    ap.add_argument("--skip-sweep", action="store_true")
    ap.add_argument("--big", type=int, default=60000, help="examples of the cloned large run (0: none)")
    ap.add_argument("--out", default=str(RESULTS))
    a = ap.parse_args()
    root = Path(a.root)
    out: dict = {"load_before": [round(x, 2) for x in os.getloadavg()], "cores": os.cpu_count()}
    if not a.skip_sweep:
        out["sweep_s"] = round(sweep(root, a.seeds), 1)
    out["run_dirs"] = sum(1 for _ in root.rglob("metrics.json"))
    out["questions"] = {}
    for name, sql in QUESTIONS.items():
        r = ask(root, sql)
        out["questions"][name] = {"sql": sql, **r}
        print(f"{name}: {r['wall_s']} s ({r['timing']}); first rows: {r['rows'][:3]}")
    if a.big:
        out["large_run"] = big_run(root, a.big)
        print(f"one run of {a.big} examples: {out['large_run']['wall_s']} s ({out['large_run']['timing']})")
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(f"{out['run_dirs']} run dirs; load average before {out['load_before']}, after {out['load_after']} "
          f"({out['cores']} cores)")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
