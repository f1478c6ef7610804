"""Benchmark: loading a multi-category PerRecBench build with per-domain histories (ratings.csv.gz with a `domain`
column) against the same build with the column removed (every member's history mixes its categories, as before).

    PYTHONPATH=$PWD python benchmarks/bench_perrec_domains.py --per-category 1000000 --per-size 5000

Generates `--categories` Amazon-style categories (benchmarks/bench_perrec_build.synthetic_amazon: user ids shared
across categories), builds them in one multi-category build, writes a copy whose ratings.csv.gz lacks the domain
column, then runs `python -m recbench task=perrec_built method=user_avg` on each (a first load: fresh derived-data
cache), alternating, `--reps` times, each in its own process under /usr/bin/time -v. Reports wall seconds, peak RSS,
the load average and the ratios (domain / mixed) of the medians; results in benchmarks/results/bench_perrec_domains.json.
"""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "bench_perrec_domains.json"


def _timed(cmd: list[str], env: dict) -> dict:
    """One command under /usr/bin/time -v (8 GB address-space limit): exit code, wall seconds, peak RSS (MB)."""
    p = subprocess.run(["prlimit", "--as=8000000000", "--", "/usr/bin/time", "-v", *cmd], capture_output=True,
                       text=True, env=env)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", p.stderr)
    secs = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall.group(1).split(":")))) if wall else None
    if p.returncode:
        print(p.stderr[-2000:], file=sys.stderr)
    return {"exit": p.returncode, "wall_s": round(secs, 2) if secs else None,
            "peak_rss_mb": round(int(rss.group(1)) / 1024, 1) if rss else None, "load": round(os.getloadavg()[0], 2)}


def _without_domain(src: Path, dst: Path) -> int:
    """dst: the build at src with ratings.csv.gz's last column (domain) removed; returns its ratings."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.name != "ratings.csv.gz":
            shutil.copy(f, dst / f.name)
    with gzip.open(src / "ratings.csv.gz", "rt", newline="") as fi, gzip.open(dst / "ratings.csv.gz", "wt",
                                                                              newline="", compresslevel=1) as fo:
        n = -1
        for n, line in enumerate(fi):
            fo.write(line.rsplit(",", 1)[0] + "\n")
    return n


def main() -> None:
    """CLI entry."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--categories", type=int, default=4)
    ap.add_argument("--per-category", type=int, default=1_000_000, help="synthetic ratings per category")
    ap.add_argument("--per-size", type=int, default=5000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--work", default="/tmp/bench_perrec_domains")
    a = ap.parse_args()
    work = Path(a.work)
    spec = importlib.util.spec_from_file_location("bench_perrec_build", HERE / "bench_perrec_build.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    cats = []
    for k in range(a.categories):
        p = work / "src" / f"C{k}.jsonl.gz"
        if not p.exists():
            gen.synthetic_amazon(p, a.per_category, seed=k, prefix=f"C{k}")
        cats += ["--category", f"C{k}={p}"]
    env = {**os.environ}
    built, mixed = work / "built", work / "mixed"
    shutil.rmtree(built, ignore_errors=True)
    shutil.rmtree(mixed, ignore_errors=True)
    build = _timed([sys.executable, "-m", "recbench.build", "perrec", "--source", "amazon-jsonl", *cats, "--out",
                    str(built), "--per-size", str(a.per_size)], env)
    print("build", build, flush=True)
    n_ratings = _without_domain(built, mixed)
    rows = []
    for rep in range(a.reps):
        for name, d in (("domain", built), ("mixed", mixed)):
            run = work / f"run-{name}-{rep}"
            shutil.rmtree(run, ignore_errors=True)
            e = {**env, "RECBENCH_RUNS_DIR": str(run / "runs"), "RECBENCH_CACHE_DIR": str(run / "cache")}
            row = {"layout": name, "rep": rep, **_timed([sys.executable, "-m", "recbench", "task=perrec_built",
                                                         f"task.data_dir={d}", "method=user_avg",
                                                         "run.progress=false"], e)}
            print(row, flush=True)
            rows.append(row)

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in rows if r["layout"] == name)

    ratios = {k: round(med("domain", k) / med("mixed", k), 3) for k in ("wall_s", "peak_rss_mb")}
    stats = json.loads((built / "stats.json").read_text())
    out = {"command": " ".join(sys.argv), "categories": a.categories, "per_category": a.per_category,
           "groups": sum(stats["groups"].values()), "ratings_in_file": n_ratings, "build": build,
           "loads": rows, "ratio_domain_over_mixed": ratios}
    print(json.dumps(out["ratio_domain_over_mixed"]))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
