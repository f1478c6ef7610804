"""Benchmark: build PerRecBench groups from a synthetic 1M-rating input (MovieLens CSV layout); reports ratings/s.

    python benchmarks/bench_perrec_build.py [--ratings 1000000] [--repeat 3]

Times (1) reading the CSVs + selection + statistics + writing (`build`, the CLI path, pandas engine) and (2) selection
alone (`build_groups` on an in-memory frame), best of --repeat runs; CPU seconds too, since shared machines are noisy.

    python benchmarks/bench_perrec_build.py --engine both --ratings 1000000 [--data DIR] [--memory-gb 16]
    python benchmarks/bench_perrec_build.py --engine duckdb --ratings 25000000 --data /tmp/m25

The engine comparison: each engine's CLI build (`python -m recbench.build perrec --engine E`) in its own process
under `/usr/bin/time -v` and an address-space limit (`prlimit --as`), in the same run: wall seconds, peak RSS, the
ratio duckdb / pandas, whether the two builds are byte-identical (groups, held-out, items, ratings), the load
average; appended to benchmarks/results/bench_perrec_build_duckdb.json.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from recbench.tasks.perrec.build import BuildConfig, build
from recbench.tasks.perrec.build.pandas_engine import build_groups


def synthetic_ratings(n_ratings: int, seed: int = 0) -> tuple[pd.DataFrame, int]:
    """(userId, movieId, rating, timestamp) rows and the number of items: users with 20-200 ratings over three
    years, popular items rated in bursts."""
    rng = np.random.default_rng(seed)
    n_items = max(1000, n_ratings // 50)
    per_user = rng.integers(20, 200, size=n_ratings // 100)
    per_user = per_user[np.cumsum(per_user) <= n_ratings]
    n_users = len(per_user)
    user = np.repeat(np.arange(n_users), per_user)
    pop = rng.permutation((np.arange(n_items) + 10.0) ** -0.9)  # long-tailed popularity
    item = rng.choice(n_items, size=len(user), p=pop / pop.sum())
    t0, span = 1_500_000_000, 3 * 365 * 86400
    release = rng.integers(t0, t0 + span, size=n_items)  # items are rated mostly soon after release: co-rating windows
    ts = np.minimum(release[item] + rng.exponential(40 * 86400, size=len(user)).astype(np.int64), t0 + span + 86400 * 365)
    score = 3.4 + rng.normal(0, 0.5, n_users)[user] + rng.normal(0, 0.4, n_items)[item] + rng.normal(0, 0.9, len(user))
    rating = np.clip(np.round(score * 2) / 2, 0.5, 5.0)
    df = pd.DataFrame({"userId": user, "movieId": item, "rating": rating, "timestamp": ts})
    return df.drop_duplicates(["userId", "movieId"]).head(n_ratings), n_items  # ~5% duplicates dropped


def synthetic_movielens(folder: Path, n_ratings: int, seed: int = 0) -> None:
    """ratings.csv + movies.csv (MovieLens layout) of synthetic_ratings: about 0.95 x n_ratings ratings."""
    df, n_items = synthetic_ratings(n_ratings, seed)
    folder.mkdir(parents=True, exist_ok=True)
    df.to_csv(folder / "ratings.csv", index=False)
    pd.DataFrame({"movieId": np.arange(n_items), "title": [f"Movie {i} ({1990 + i % 30})" for i in range(n_items)],
                  "genres": "Drama"}).to_csv(folder / "movies.csv", index=False)


def synthetic_amazon(path: Path, n_ratings: int, seed: int = 0, prefix: str = "") -> None:
    """Amazon Reviews 2023 review JSONL (gzip when the name ends in .gz) of synthetic_ratings: user ids shared across
    seeds (as Amazon users review in several categories), item ids `<prefix>B<n>`, millisecond timestamps."""
    df, _ = synthetic_ratings(n_ratings, seed)
    out = pd.DataFrame({"rating": df["rating"].round().clip(1, 5), "title": "", "text": "",
                        "asin": prefix + "B" + df["movieId"].astype(str), "parent_asin": prefix + "B" + df["movieId"].astype(str),
                        "user_id": "U" + df["userId"].astype(str), "timestamp": df["timestamp"] * 1000,
                        "verified_purchase": True, "helpful_vote": 0})
    path.parent.mkdir(parents=True, exist_ok=True)
    out.to_json(path, orient="records", lines=True, compression="gzip" if path.suffix == ".gz" else None)


RESULTS = Path(__file__).parent / "results" / "bench_perrec_build_duckdb.json"
FILES = ("groups.jsonl", "heldout.jsonl", "items.jsonl", "ratings.csv.gz")


def timed_build(engine: str, src: Path, out: Path, memory_gb: float) -> dict:
    """One CLI build in its own process: wall seconds and peak RSS from /usr/bin/time -v, its exit code."""
    cmd = ["prlimit", f"--as={int(memory_gb * 2**30)}", "--", "/usr/bin/time", "-v", sys.executable, "-m",
           "recbench.build", "perrec", "--source", "movielens", "--input", str(src), "--out", str(out), "--engine", engine]
    p = subprocess.run(cmd, capture_output=True, text=True)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", p.stderr)
    secs = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall.group(1).split(":")))) if wall else None
    row = {"engine": engine, "exit": p.returncode, "wall_s": round(secs, 2) if secs else None,
           "peak_rss_mb": round(int(rss.group(1)) / 1024, 1) if rss else None, "load_after": os.getloadavg()[0]}
    if p.returncode:
        row["error_tail"] = p.stderr[-600:]
    print(json.dumps(row), flush=True)
    return row


def compare_engines(a: argparse.Namespace) -> None:
    """Build with each engine in its own process (same run, same input); record time, peak RSS, identity."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(a.data) if a.data else Path(tmp) / "ml"
        if not (src / "ratings.csv").is_file():
            synthetic_movielens(src, a.ratings)
        n = sum(1 for _ in open(src / "ratings.csv")) - 1
        engines = ["pandas", "duckdb"] if a.engine == "both" else [a.engine]
        row = {"ratings": n, "command": " ".join(["python", "benchmarks/bench_perrec_build.py", *sys.argv[1:]]),
               "load_before": os.getloadavg(), "runs": [timed_build(e, src, Path(tmp) / e, a.memory_gb) for e in engines]}
        row["load_after"] = os.getloadavg()
        ok = [r for r in row["runs"] if r["exit"] == 0]
        if len(ok) == 2:
            row["identical"] = all((Path(tmp) / "pandas" / f).read_bytes() == (Path(tmp) / "duckdb" / f).read_bytes()
                                   for f in FILES)
            row["duckdb_over_pandas"] = {"wall": round(ok[1]["wall_s"] / ok[0]["wall_s"], 3),
                                         "peak_rss": round(ok[1]["peak_rss_mb"] / ok[0]["peak_rss_mb"], 3)}
    print(json.dumps(row, indent=2))
    old = json.loads(RESULTS.read_text()) if RESULTS.is_file() else []
    RESULTS.write_text(json.dumps(old + [row], indent=2) + "\n")


def main() -> None:
    """Run the benchmark and print a JSON summary."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ratings", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--engine", choices=["pandas", "duckdb", "both"], default=None,
                    help="compare engines' CLI builds (time, peak RSS, identity) instead of the in-process timing")
    ap.add_argument("--data", default=None, help="a MovieLens-layout folder to build from (made with --ratings if empty)")
    ap.add_argument("--memory-gb", type=float, default=16.0, help="address-space limit of each build process")
    a = ap.parse_args()
    if a.engine:
        return compare_engines(a)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "ml"
        synthetic_movielens(src, a.ratings)
        n = sum(1 for _ in open(src / "ratings.csv")) - 1
        cfg = BuildConfig()
        full, full_cpu, sel, sel_cpu, stats = [], [], [], [], None
        frame = pd.read_csv(src / "ratings.csv", dtype={"userId": str, "movieId": str}).rename(
            columns={"userId": "user_id", "movieId": "item_id"})
        for i in range(a.repeat):
            t, c = time.perf_counter(), time.process_time()
            stats = build("movielens", str(src), str(Path(tmp) / f"out{i}"), None, cfg, engine="pandas")
            full.append(time.perf_counter() - t)
            full_cpu.append(time.process_time() - c)
            t, c = time.perf_counter(), time.process_time()
            build_groups(frame, cfg)
            sel.append(time.perf_counter() - t)
            sel_cpu.append(time.process_time() - c)
    out = {"ratings": n, "users": stats["input"]["users"], "items": stats["input"]["items"], "groups": stats["groups"],
           "heldout_groups": stats["heldout_groups"], "candidate_windows": stats["candidate_windows"],
           "build_seconds_best": round(min(full), 3), "build_ratings_per_s": round(n / min(full)),
           "build_cpu_seconds_best": round(min(full_cpu), 3), "build_ratings_per_cpu_s": round(n / min(full_cpu)),
           "selection_seconds_best": round(min(sel), 3), "selection_ratings_per_s": round(n / min(sel)),
           "selection_cpu_seconds_best": round(min(sel_cpu), 3), "selection_ratings_per_cpu_s": round(n / min(sel_cpu)),
           "load_average_1min": round(__import__("os").getloadavg()[0], 2)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
