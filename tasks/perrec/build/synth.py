"""Generate the bundled SYNTHETIC PerRecBench sample: a catalogue, rating histories and easy/medium/hard groups.

Planted structure: each user has latent tastes over genres that drive their RELATIVE ratings, plus a
personal rating bias and each item a quality level - both shift ratings but are invisible to PTC, which
is computed on ratings relative to each user's own average.

    python -m recbench.tasks.perrec.build.synth --out data/perrec_sample
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from recbench.tasks.perrec.build.groups import GroupCriteria, select_groups

GENRES = {
    "sci-fi": ["Starship", "Nebula", "Android", "Galaxy", "Quantum", "Orbit", "Cyborg", "Warp"],
    "romance": ["Love", "Kiss", "Heart", "Wedding", "Sweetheart", "Valentine", "Romance", "Honeymoon"],
    "horror": ["Haunted", "Blood", "Ghost", "Nightmare", "Zombie", "Curse", "Crypt", "Scream"],
    "comedy": ["Laughing", "Goofy", "Prank", "Silly", "Funny", "Clown", "Jokes", "Blunder"],
    "documentary": ["History", "Nature", "Planet", "Ocean", "Wildlife", "Science", "Ancient", "Truth"],
    "animation": ["Cartoon", "Puppy", "Dragon", "Kingdom", "Toy", "Bunny", "Magic", "Fairy"],
    "thriller": ["Conspiracy", "Spy", "Heist", "Hostage", "Assassin", "Chase", "Witness", "Agent"],
    "western": ["Cowboy", "Outlaw", "Sheriff", "Frontier", "Saloon", "Ranch", "Gunslinger", "Desert"],
}
NOUNS = ["Chronicles", "Story", "Affair", "Legacy", "Returns", "Night", "Road", "Secret", "Game", "Journey"]


def make_catalogue(rng: np.random.Generator, n_items: int) -> pd.DataFrame:
    """Items with a title built from its genres' words, 1-2 genres and a quality level."""
    names = list(GENRES)
    rows = []
    for i in range(n_items):
        gs = list(rng.choice(names, size=int(rng.integers(1, 3)), replace=False))
        words = [str(rng.choice(GENRES[g])) for g in gs]
        title = f"{' '.join(words)} {rng.choice(NOUNS)} ({gs[0].title()}{' / ' + gs[1].title() if len(gs) > 1 else ''})"
        rows.append({"item_id": f"i{i:04d}", "title": title, "genres": gs,
                     "quality": round(float(rng.normal(0, 0.5)), 3)})
    return pd.DataFrame(rows)


def make_ratings(rng: np.random.Generator, items: pd.DataFrame, n_users: int, per_user: int, n_queries: int,
                 raters_per_query: int, window_days: int) -> pd.DataFrame:
    """Rating histories over two years, with query items co-rated by many users inside a short window at the end."""
    names = list(GENRES)
    gvec = np.array([[1.0 if g in gs else 0.0 for g in names] for gs in items["genres"]])
    taste = rng.normal(0, 1.0, size=(n_users, len(names)))
    bias = rng.normal(0, 0.5, size=n_users)
    quality = items["quality"].to_numpy()
    n_items = len(items)
    t_start, span = 1_600_000_000, 2 * 365 * 86400
    queries = rng.choice(n_items, size=n_queries, replace=False)
    regular = np.setdiff1d(np.arange(n_items), queries)

    def rate(u: int, i: int) -> int:
        score = 3.3 + bias[u] + quality[i] + 0.9 * taste[u] @ gvec[i] / max(gvec[i].sum(), 1) + rng.normal(0, 0.35)
        return int(np.clip(np.rint(score), 1, 5))

    rows = []
    for u in range(n_users):
        hist = rng.choice(regular, size=per_user, replace=False)
        times = np.sort(rng.integers(t_start, t_start + span, size=per_user))
        rows += [(f"u{u:04d}", items["item_id"].iat[i], rate(u, i), int(t)) for i, t in zip(hist, times)]
    for q in queries:
        t_q = t_start + span + int(rng.integers(0, 60)) * 86400
        for u in rng.choice(n_users, size=raters_per_query, replace=False):
            rows.append((f"u{u:04d}", items["item_id"].iat[q], rate(u, q), t_q + int(rng.integers(0, window_days * 86400))))
    return pd.DataFrame(rows, columns=["user_id", "item_id", "rating", "timestamp"])


def main(argv: list[str] | None = None) -> None:
    """Write items.jsonl, ratings.csv.gz, groups.jsonl and stats.json into --out."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--items", type=int, default=240)
    ap.add_argument("--users", type=int, default=220)
    ap.add_argument("--per-user", type=int, default=32)
    ap.add_argument("--queries", type=int, default=160)
    ap.add_argument("--raters-per-query", type=int, default=12)
    ap.add_argument("--per-size", type=int, default=40, help="groups per difficulty")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    items = make_catalogue(rng, args.items)
    ratings = make_ratings(rng, items, args.users, args.per_user, args.queries, args.raters_per_query, window_days=20)
    groups = select_groups(ratings, GroupCriteria(gamma=20, lam=0.6, window_s=30 * 86400, per_size=args.per_size,
                                                  seed=args.seed))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    items.to_json(out / "items.jsonl", orient="records", lines=True)
    ratings.to_csv(out / "ratings.csv.gz", index=False, compression={"method": "gzip", "mtime": 0})
    with open(out / "groups.jsonl", "w", encoding="utf-8") as f:
        for g in groups:
            f.write(json.dumps(g) + "\n")
    stats = {"synthetic": True, "generator": "recbench.tasks.perrec.build.synth", "args": vars(args),
             "items": len(items), "users": int(ratings["user_id"].nunique()), "ratings": len(ratings),
             "groups": pd.Series([g["difficulty"] for g in groups]).value_counts().to_dict()}
    (out / "stats.json").write_text(json.dumps(stats, indent=2))
    print(json.dumps(stats, indent=2))


if __name__ == "__main__":
    main()
