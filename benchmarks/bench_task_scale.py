"""Benchmark: the benchmarks' loaders at scale, each load/run its own process under `/usr/bin/time -v` and a memory
limit (`prlimit --as`), printing wall time, peak RSS and the load average as they are measured.

    python benchmarks/bench_task_scale.py [--groups 60000] [--ratings 9600000] [--llmrec-users 100000]
        [--kg-triples 1000000] [--trees after=. before=/tmp/rb_base] [--only perrec,llmrec,kg]

Inputs are generated (seeded) once into --work: a PerRecBench data dir written in the data-dir format directly
(items.jsonl, ratings.csv, groups.jsonl with the builder's fields), a P5-format LLMRec folder, and a RecBench+ KG TSV.
Each `--trees NAME=PATH` is a source tree run on the same inputs (PYTHONPATH=PATH): `before` is this branch's base
commit unpacked with `git archive <base> | tar -x -C /tmp/rb_base` (plus the conf/data symlinks under recbench/).
Steps: perrec model-free run, first load (empty derived-data cache) then a second method on the cached data;
LLMRec sequential model-free run; RecBench+ KG load + condition mining + query generation (the queries' sha256
printed, so trees can be checked equal), then a model-free run (popular_match) over the KG with those queries. Results are appended to
benchmarks/results/bench_task_scale.json (figures of each run too, so before/after can be checked equal).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
WORDS = ("night love story dark war city river secret last home road star king girl man house blood game world "
         "summer winter fire moon shadow heart time life dream island ghost journey silent red blue black lost "
         "wild little great golden broken empty hidden final first new old green white deep cold long").split()
GENRES = ("Drama", "Comedy", "Horror", "Romance", "Thriller", "Documentary", "Animation", "Action")


def titles(n: int, rng: np.random.Generator) -> list[str]:
    """Movie-like titles: 1-4 words and a genre in parentheses."""
    k = rng.integers(1, 5, size=n)
    w = rng.integers(0, len(WORDS), size=(n, 4))
    g = rng.integers(0, len(GENRES), size=n)
    return [" ".join(WORDS[j].title() for j in w[i, :k[i]]) + f" ({GENRES[g[i]]}) {i}" for i in range(n)]


def power_ratings(n_ratings: int, n_users: int, n_items: int, rng: np.random.Generator) -> pd.DataFrame:
    """Ratings with long-tailed users and items, unique (user, item), timestamps over three years."""
    act = rng.pareto(1.2, n_users) + 1.0
    per = np.maximum(2, np.round(act / act.sum() * n_ratings * 1.08)).astype(np.int64)
    user = np.repeat(np.arange(n_users), per)
    pop = (np.arange(n_items) + 10.0) ** -0.8
    item = rng.choice(n_items, size=len(user), p=pop / pop.sum())
    df = pd.DataFrame({"user": user, "item": item}).drop_duplicates().head(n_ratings)
    t0 = 1_500_000_000
    df["timestamp"] = rng.integers(t0, t0 + 3 * 365 * 86400, size=len(df))
    df["rating"] = np.clip(np.round(3.5 + rng.normal(0, 1.1, len(df))), 1, 5)
    return df.sort_values(["user", "timestamp"], kind="stable").reset_index(drop=True)


def make_perrec(out: Path, n_groups: int, n_ratings: int, seed: int) -> None:
    """A PerRecBench data dir: groups of 2, 3 and 4 users (a third each) who rated the same item, members with a
    prior history, and the fields the builder writes (avg_rating, relative_rating, item_avg_rating)."""
    rng = np.random.default_rng(seed)
    n_users, n_items = max(100, n_ratings // 160), max(50, n_ratings // 480)
    df = power_ratings(n_ratings, n_users, n_items, rng)
    pos = df.groupby("user").cumcount().to_numpy()
    csum = df.groupby("user")["rating"].cumsum().to_numpy() - df["rating"].to_numpy()
    avg_prior = np.where(pos > 0, csum / np.maximum(pos, 1), np.nan)
    item_mean = df.groupby("item")["rating"].mean()
    elig = np.flatnonzero(pos > 0)
    by_item = pd.Series(elig).groupby(df["item"].to_numpy()[elig]).apply(np.asarray)
    pool = [a for a in by_item.to_numpy() if len(a) >= 4]
    out.mkdir(parents=True, exist_ok=True)
    names = titles(n_items, rng)
    with open(out / "items.jsonl", "w") as f:
        for i in range(n_items):
            f.write(json.dumps({"item_id": f"i{i}", "title": names[i]}) + "\n")
    pd.DataFrame({"user_id": "u" + df["user"].astype(str), "item_id": "i" + df["item"].astype(str),
                  "rating": df["rating"], "timestamp": df["timestamp"]}).to_csv(out / "ratings.csv", index=False)
    u, it, r, ts = (df[c].to_numpy() for c in ("user", "item", "rating", "timestamp"))
    with open(out / "groups.jsonl", "w") as f:
        for g in range(n_groups):
            size = 2 + g % 3
            rows = rng.choice(pool[int(rng.integers(len(pool)))], size=size, replace=False)
            members = [{"user_id": f"u{u[j]}", "rating": float(r[j]), "timestamp": int(ts[j]),
                        "avg_rating": round(float(avg_prior[j]), 4),
                        "relative_rating": round(float(r[j] - avg_prior[j]), 4)} for j in rows]
            f.write(json.dumps({"group_id": f"g{g:06d}", "difficulty": ("easy", "medium", "hard")[size - 2],
                                "query_item": f"i{it[rows[0]]}", "timestamp": int(ts[rows[0]]),
                                "item_avg_rating": round(float(item_mean[it[rows[0]]]), 4), "users": members}) + "\n")


def make_p5(out: Path, n_users: int, seed: int) -> None:
    """A P5-format folder: sequential_data.txt (users with 5-30 items, long-tailed items) and items.tsv titles."""
    rng = np.random.default_rng(seed)
    n_items = max(200, n_users // 4)
    pop = (np.arange(n_items) + 10.0) ** -0.8
    out.mkdir(parents=True, exist_ok=True)
    lens = rng.integers(5, 31, size=n_users)
    seq = rng.choice(n_items, size=int(lens.sum()), p=pop / pop.sum()) + 1
    with open(out / "sequential_data.txt", "w") as f:
        at = 0
        for uid, n in enumerate(lens, start=1):
            f.write(f"{uid} " + " ".join(str(i) for i in dict.fromkeys(seq[at:at + n].tolist())) + "\n")
            at += n
    names = titles(n_items, rng)
    pd.DataFrame({"p5_item_id": np.arange(1, n_items + 1), "title": names}).to_csv(out / "items.tsv", sep="\t",
                                                                                      index=False)


def make_kg(out: Path, n_triples: int, seed: int) -> None:
    """A RecBench+ bundle scaled up: items.csv, kg.tsv with about n_triples facts, users.csv and ratings.csv."""
    rng = np.random.default_rng(seed)
    n_items = max(240, n_triples // 12)
    n_people = max(150, n_items // 3)
    out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"item_id": np.arange(1, n_items + 1), "title": titles(n_items, rng),
                  "year": rng.integers(1950, 2024, size=n_items)}).to_csv(out / "items.csv", index=False)
    rels = rng.choice(["Genre", "Directed_by", "Written_by", "Starring"], size=n_triples, p=[0.15, 0.1, 0.15, 0.6])
    pop = (np.arange(n_people) + 5.0) ** -0.9
    people = rng.choice(n_people, size=n_triples, p=pop / pop.sum())
    target = np.where(rels == "Genre", np.array(GENRES)[people % len(GENRES)],
                      np.char.add("Person ", people.astype(str)))
    kg = pd.DataFrame({"item_id": rng.integers(1, n_items + 1, size=n_triples), "relation": rels, "target": target})
    kg.drop_duplicates().to_csv(out / "kg.tsv", sep="\t", index=False)
    n_users = max(80, n_items // 20)
    pd.DataFrame({"user_id": np.arange(1, n_users + 1), "age": rng.integers(15, 70, size=n_users),
                  "gender": rng.choice(["M", "F"], size=n_users),
                  "occupation": rng.choice(["student", "engineer", "artist", "writer"], size=n_users)}
                 ).to_csv(out / "users.csv", index=False)
    per = 30
    pd.DataFrame({"user_id": np.repeat(np.arange(1, n_users + 1), per),
                  "item_id": rng.integers(1, n_items + 1, size=n_users * per),
                  "rating": rng.integers(1, 6, size=n_users * per),
                  "timestamp": 1_500_000_000 + np.tile(np.arange(per) * 86400, n_users)}
                 ).drop_duplicates(["user_id", "item_id"]).to_csv(out / "ratings.csv", index=False)


def measure(name: str, tree: str, argv: list[str], env: dict[str, str], limit: int) -> dict:
    """Run argv (a python command) under /usr/bin/time -v and prlimit; wall and CPU (user + system) seconds, peak RSS
    (MB), load average before and after, rc. On a shared machine CPU seconds are the steadier figure."""
    cmd = ["/usr/bin/time", "-v", "prlimit", f"--as={limit}", "--", sys.executable, *argv]
    load = os.getloadavg()[0]
    t = time.perf_counter()
    # cwd=tree: `python -m` and `-c` put the working directory first on sys.path, ahead of PYTHONPATH
    p = subprocess.run(cmd, env={**os.environ, **env, "PYTHONPATH": tree}, capture_output=True, text=True, cwd=tree)
    wall = time.perf_counter() - t
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    cpu = sum(float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", p.stderr))
    row = {"step": name, "tree": tree, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
           "peak_rss_mb": round(int(rss.group(1)) / 1024) if rss else None, "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2),
           "rc": p.returncode, "cmd": " ".join(argv)}
    if p.returncode:
        row["stderr_tail"] = p.stderr[-1500:]
    if argv[0] == "-c":  # a script of this benchmark: its own JSON line of figures
        row["output"] = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    print(json.dumps(row), flush=True)
    return row


def metrics_of(runs: Path) -> dict:
    """The headline figures of the run under `runs` (metrics.json), for the before/after identity check."""
    files = sorted(runs.rglob("metrics.json"))
    if not files:
        return {}
    m = json.loads(files[-1].read_text())
    return {k: v.get("mean") if isinstance(v, dict) else v for k, v in (m.get("metrics") or {}).items()}


def perrec_steps(work: Path, name: str, tree: str, limit: int) -> list[dict]:
    """A model-free run on the generated groups: first load (cold derived-data cache), then cached."""
    rows, cache = [], work / f"cache-{name}"
    for i, method in enumerate(("user_avg", "bm25_history")):
        runs = work / f"runs-{name}-perrec-{method}"
        env = {"RECBENCH_CACHE_DIR": str(cache), "RECBENCH_RUNS_DIR": str(runs)}
        row = measure(f"perrec {method} ({'first load' if i == 0 else 'cached'})", tree,
                      ["-m", "recbench", "task=perrec", f"task.data_dir={work / 'perrec'}", f"method={method}"],
                      env, limit)
        row["metrics"] = metrics_of(runs)
        rows.append(row)
    return rows


def llmrec_steps(work: Path, name: str, tree: str, limit: int) -> list[dict]:
    """LLMRec sequential, model-free (popularity), candidates frozen by the first run."""
    rows = []
    for i in range(2):
        runs = work / f"runs-{name}-llmrec-{i}"
        env = {"RECBENCH_CACHE_DIR": str(work / f"cache-{name}"), "RECBENCH_RUNS_DIR": str(runs)}
        cands = work / f"cands-{name}.jsonl.gz"
        row = measure(f"llmrec sequential popularity ({'freezes candidates' if i == 0 else 'frozen'})", tree,
                      ["-m", "recbench", "task=llmrec_sequential", f"task.data_dir={work / 'p5'}", "method=popularity",
                       f"task.candidates.path={cands}", "task.candidates.sha256=null", "task.candidates.progress=false"],
                      env, limit)
        row["metrics"] = metrics_of(runs)
        rows.append(row)
    return rows


KG_SCRIPT = """
import hashlib, json, os, sys, time
from pathlib import Path
import pandas as pd
from recbench.kg.queries import RELEASED_NAMES, BuildConfig, QueryBuilder
from recbench.tasks.recbench_plus.data import histories_from_ratings, read_bundle_kg
t = time.perf_counter()
folder = Path(sys.argv[1])
kg = read_bundle_kg(folder)
t_load = time.perf_counter() - t
users = pd.read_csv(folder / "users.csv", dtype={"user_id": str})
hist = histories_from_ratings(pd.read_csv(folder / "ratings.csv", dtype={"user_id": str, "item_id": str}))
built = QueryBuilder(kg, hist, BuildConfig(per_type=50, seed=0), users=users).build()
total = time.perf_counter() - t
if len(sys.argv) > 2:  # the queries as a bundle's released-format files, for the model-free run step
    for qtype, recs in built.items():
        (Path(sys.argv[2]) / f"movie-{RELEASED_NAMES[qtype]}.json").write_text(json.dumps(recs, indent=1) + "\\n")
print(json.dumps({"kg_load_s": round(t_load, 1), "total_s": round(total, 1), "kg": kg.stats(),
                  "queries": {k: len(v) for k, v in built.items()},
                  "queries_sha256": hashlib.sha256(json.dumps(built, sort_keys=True).encode()).hexdigest()}))
"""


def kg_steps(work: Path, name: str, tree: str, limit: int) -> list[dict]:
    """RecBench+: load the generated KG, mine conditions and generate queries (their sha256 in the row's output); then
    a model-free run (popular_match) over the KG as a bundle with those queries."""
    bundle = work / f"kg-bundle-{name}"
    bundle.mkdir(exist_ok=True)
    for f in ("items.csv", "kg.tsv", "users.csv", "ratings.csv"):
        if not (bundle / f).exists():
            (bundle / f).symlink_to(work / "kg" / f)
    rows = [measure("recbench_plus kg load + conditions + queries", tree,
                    ["-c", KG_SCRIPT, str(work / "kg"), str(bundle)], {}, limit)]
    runs = work / f"runs-{name}-kg"
    env = {"RECBENCH_CACHE_DIR": str(work / f"cache-{name}"), "RECBENCH_RUNS_DIR": str(runs)}
    row = measure("recbench_plus popular_match run (1 M-fact bundle)", tree,
                  ["-m", "recbench", "task=recbench_plus", f"task.data.path={bundle}", "method=popular_match"], env, limit)
    row["metrics"] = metrics_of(runs)
    return rows + [row]


def main() -> None:
    """Generate the inputs, run every step on every tree, append the rows to the results file."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/rb_task_scale"))
    ap.add_argument("--groups", type=int, default=60_000)
    ap.add_argument("--ratings", type=int, default=9_600_000)
    ap.add_argument("--llmrec-users", type=int, default=100_000)
    ap.add_argument("--kg-triples", type=int, default=1_000_000)
    ap.add_argument("--trees", nargs="+", default=[f"after={HERE.parent}"])
    ap.add_argument("--only", default="perrec,llmrec,kg")
    ap.add_argument("--limit", type=int, default=8_000_000_000, help="prlimit --as bytes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "bench_task_scale.json")
    a = ap.parse_args()
    only = set(a.only.split(","))
    makers = {"perrec": (a.work / "perrec", lambda p: make_perrec(p, a.groups, a.ratings, a.seed)),
              "llmrec": (a.work / "p5", lambda p: make_p5(p, a.llmrec_users, a.seed)),
              "kg": (a.work / "kg", lambda p: make_kg(p, a.kg_triples, a.seed))}
    for key, (path, make) in makers.items():
        if key in only and not path.exists():
            t = time.perf_counter()
            make(path)
            print(f"generated {path} in {time.perf_counter() - t:.0f} s", flush=True)
    steps = {"perrec": perrec_steps, "llmrec": llmrec_steps, "kg": kg_steps}
    rows = []
    for spec in a.trees:
        name, tree = spec.split("=", 1)
        for key in ("perrec", "llmrec", "kg"):
            if key in only:
                rows += [{**r, "tree_name": name} for r in steps[key](a.work, name, str(Path(tree).resolve()), a.limit)]
    record = {"when": time.strftime("%Y-%m-%d %H:%M:%S"), "argv": sys.argv[1:], "cpus": os.cpu_count(),
              "inputs": {"groups": a.groups, "ratings": a.ratings, "llmrec_users": a.llmrec_users,
                         "kg_triples": a.kg_triples, "seed": a.seed}, "rows": rows}
    old = json.loads(a.out.read_text()) if a.out.exists() else []
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(old + [record], indent=1))


if __name__ == "__main__":
    main()
