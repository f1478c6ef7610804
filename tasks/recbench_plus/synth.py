"""Generate the bundled SYNTHETIC RecBench+ sample: a small movie KG, users with demographics, ratings, and
queries of every type built from them (template texts, no LLM).

Planted structure: each user follows a few favourite people (directors, writers, actors) and genres, so their
histories share (relation, target) pairs - exactly what RecBench+ condition extraction looks for. All titles and
names are made up.

    python -m recbench.tasks.recbench_plus.synth --out data/recbench_plus_sample
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from recbench.kg.conditions import ExtractionConfig
from recbench.kg.graph import KnowledgeGraph
from recbench.kg.queries import BuildConfig, QueryBuilder
from recbench.tasks.recbench_plus.data import histories_from_ratings, write_bundle

GENRES = ["Action", "Comedy", "Drama", "Horror", "Romance", "Sci-Fi", "Thriller", "Animation", "Western", "Documentary"]
ADJ = ["Silent", "Crimson", "Last", "Hidden", "Broken", "Golden", "Midnight", "Frozen", "Wild", "Electric", "Lonely",
       "Savage", "Quiet", "Burning", "Lost", "Velvet", "Iron", "Paper", "Neon", "Hollow"]
NOUN = ["River", "Empire", "Garden", "Signal", "Harbor", "Machine", "Orchard", "Frontier", "Mirror", "Kingdom",
        "Voyage", "Station", "Lantern", "Canyon", "Carnival", "Compass", "Tide", "Citadel", "Parade", "Echo"]
FIRST = ["Ada", "Bruno", "Clara", "Dmitri", "Elena", "Felix", "Greta", "Hugo", "Iris", "Jonas", "Katya", "Luca",
         "Mira", "Nils", "Olga", "Pavel", "Quinn", "Rosa", "Sven", "Tara", "Umar", "Vera", "Wim", "Xenia", "Yusuf", "Zora"]
LAST = ["Albright", "Bergstrom", "Castellano", "Dunmore", "Eastwick", "Fairbanks", "Galloway", "Hartigan", "Ivanova",
        "Jaramillo", "Kowalski", "Lindqvist", "Marchetti", "Novak", "Okafor", "Pellegrini", "Quist", "Rasmussen",
        "Sorensen", "Tremblay", "Underhill", "Valdivia", "Whitcombe", "Yamamoto", "Zeller"]
OCCUPATIONS = ["student", "engineer", "educator", "artist", "doctor", "writer", "programmer", "retired"]


def make_people(rng: np.random.Generator, n: int) -> list[str]:
    """n distinct made-up person names."""
    names: list[str] = []
    while len(names) < n:
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        if name not in names:
            names.append(name)
    return names


def make_kg(rng: np.random.Generator, n_items: int, n_people: int) -> KnowledgeGraph:
    """Items with made-up titles/years, 1-2 genres, a director, 1-2 writers and 3 actors drawn from a shared pool."""
    kg = KnowledgeGraph("movie")
    people = make_people(rng, n_people)
    directors, writers, actors = people[: n_people // 5], people[n_people // 5: 2 * n_people // 5], people[2 * n_people // 5:]
    titles: set[str] = set()
    for i in range(1, n_items + 1):
        while True:
            title = f"The {rng.choice(ADJ)} {rng.choice(NOUN)}" if rng.random() < 0.5 else f"{rng.choice(ADJ)} {rng.choice(NOUN)}"
            if title not in titles:
                titles.add(title)
                break
        kg.add_item(i, title, int(rng.integers(1950, 2020)))
        for g in rng.choice(GENRES, size=int(rng.integers(1, 3)), replace=False):
            kg.add_fact(i, "Genre", str(g))
        kg.add_fact(i, "Directed_by", str(rng.choice(directors)))
        for w in rng.choice(writers, size=int(rng.integers(1, 3)), replace=False):
            kg.add_fact(i, "Written_by", str(w))
        for a in rng.choice(actors, size=3, replace=False):
            kg.add_fact(i, "Starring", str(a))
    return kg


def make_users_ratings(rng: np.random.Generator, kg: KnowledgeGraph, n_users: int, per_user: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Users (age, gender, occupation) whose histories favour a few people and genres; 1-5 star ratings."""
    items = kg.items()
    users, rows = [], []
    for u in range(1, n_users + 1):
        users.append({"user_id": str(u), "age": int(rng.integers(15, 70)), "gender": str(rng.choice(["M", "F"])),
                      "occupation": str(rng.choice(OCCUPATIONS))})
        fav_people = {p for i in rng.choice(items, size=3, replace=False) for _, p in kg.facts(i)[:3]}
        fav_genres = set(rng.choice(GENRES, size=2, replace=False))
        w = np.array([1.0 + 4.0 * sum(t in fav_people for _, t in kg.facts(i)) + 1.5 * sum(t in fav_genres for _, t in kg.facts(i))
                      for i in items])
        chosen = rng.choice(items, size=per_user, replace=False, p=w / w.sum())
        t0 = 1_500_000_000 + int(rng.integers(0, 10**7))
        for n, i in enumerate(chosen):
            liked = sum(t in fav_people or t in fav_genres for _, t in kg.facts(i))
            rating = int(np.clip(round(3 + 0.6 * liked + rng.normal(0, 0.8)), 1, 5))
            rows.append({"user_id": str(u), "item_id": str(i), "rating": rating, "timestamp": t0 + n * 86400})
    return pd.DataFrame(users), pd.DataFrame(rows)


def build(out: str | Path, seed: int = 11, n_items: int = 240, n_people: int = 150, n_users: int = 80,
          per_user: int = 30, per_type: int = 12) -> dict:
    """Generate and write the sample bundle; returns its stats."""
    rng = np.random.default_rng(seed)
    kg = make_kg(rng, n_items, n_people)
    users, ratings = make_users_ratings(rng, kg, n_users, per_user)
    cfg = BuildConfig(per_type=per_type, seed=seed, max_users=None, demo_min_users=8, demo_top_n=16,
                      extraction=ExtractionConfig(min_subset=2, max_subset=8))
    queries = QueryBuilder(kg, histories_from_ratings(ratings), cfg, users=users).build()
    stats = {"synthetic": True, "generator": "python -m recbench.tasks.recbench_plus.synth", "seed": seed,
             "items": n_items, "users": n_users, "ratings": len(ratings), "kg": kg.stats(),
             "queries": {t: (len(r) if t not in ("interest", "demographics") else sum(len(x["query & ground true"]) for x in r))
                         for t, r in queries.items()}}
    write_bundle(out, kg, ratings, users, queries, meta=stats)
    return stats


def main(argv: list[str] | None = None) -> None:
    """CLI: write the bundle to --out."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args(argv)
    print(json.dumps(build(args.out, seed=args.seed), indent=1))


if __name__ == "__main__":
    main()
