"""Generate the bundled SYNTHETIC explanation-judging sample in the released LLMasEvaluator format
(df_explanation_selected.csv: user_id, movie_id, movie_title, explanation_type, explanation, and the user's 1-5
rating on each aspect).

Nothing here is real: users, movies, titles, people and ratings are made up. Planted structure, so that a judge
that reads the explanation can beat chance: a personal explanation type is rated higher than a popularity one, every
user has a bias, the aspects move together, and some explanations carry the HTML tooltips of the real data.

    python -m recbench.tasks.explanation_judging.synth --out data/explanation_judging_sample
"""
from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path

import numpy as np

from recbench.tasks.explanation_judging.settings import ASPECTS

MOVIES = ["The Glass Harbor", "Midnight Orchard", "Paper Lanterns", "A River of Clocks", "Northern Static",
          "The Last Cartographer", "Velvet Thunder", "Seven Quiet Rooms"]
PEOPLE = ["Mara Quill", "Tomas Breck", "Ilse Vantor", "Rafe Okoro", "June Halvard", "Pell Ardent"]
GENRES = ["drama", "mystery", "comedy", "science fiction", "romance", "thriller"]
#: explanation type -> (text template, planted quality in rating steps)
TYPES = {
    "attr_personal": ("You like films by {tip}; this movie is directed by {tip}.", 0.9),
    "attr_peer": ("Users like you enjoyed the work of {tip}, who stars in this movie.", 0.5),
    "attr_nonpersonal": ("This movie's writer is {tip}.", 0.0),
    "attr_random": ("One of this movie's actors is {tip}.", -0.5),
    "item": ("You rated {other} highly; this movie is a {genre} like it.", 0.7),
    "item_peer": ("Users who liked {other} also liked this movie.", 0.4),
    "user": ("Among users with tastes like yours, {pct}% liked this movie.", 0.3),
    "peer": ("{pct}% of the people who watched this movie liked it.", -0.1),
    "pop": ("This movie is popular on the platform this week.", -0.8),
}
#: how much each aspect follows the explanation's quality (the rest is the user's own noise)
ASPECT_WEIGHT = {"persuasiveness": 1.0, "transparency": 0.8, "satisfaction": 0.9, "interest_accuracy": 0.7}


def _tooltip(name: str, k: int) -> str:
    """A name underlined with an image tooltip, as the real explanations mark people."""
    return (f'<span style="text-decoration:underline" data-toggle="tooltip" data-html="true" '
            f"title='<img src=\"/static/figures/attribute/p_{k}.jpg\" style=\"height:200px\"/>'>{name} </span>")


def make_rows(rng: np.random.Generator, n_users: int, movies_per_user: int) -> list[dict]:
    """One row per (user, movie, explanation type); 6-9 types per (user, movie)."""
    rows = []
    for u in range(n_users):
        user_id = str(int(rng.integers(10**17, 10**18)))
        bias = rng.normal(0, 0.5)
        for mi in rng.choice(len(MOVIES), movies_per_user, replace=False):
            movie_bias = rng.normal(0, 0.3)
            kinds = list(TYPES)
            keep = sorted(rng.choice(len(kinds), int(rng.integers(6, 10)), replace=False))
            for t in (kinds[k] for k in keep):
                template, quality = TYPES[t]
                k = int(rng.integers(len(PEOPLE)))
                text = template.format(tip=_tooltip(PEOPLE[k], k), other=MOVIES[(mi + 1) % len(MOVIES)],
                                       genre=GENRES[mi % len(GENRES)], pct=f"{rng.uniform(55, 95):.1f}")
                base = 3.2 + bias + movie_bias
                ratings = {a: int(np.clip(np.rint(base + w * quality + rng.normal(0, 0.6)), 1, 5))
                           for a, w in ASPECT_WEIGHT.items()}
                rows.append({"user_id": user_id, "movie_id": str(100 + int(mi)), "movie_title": MOVIES[mi],
                             "explanation_type": t, "explanation": text, **ratings})
    return rows


def write(out: Path, rows: list[dict], seed: int) -> None:
    """The CSV (the released column order) and stats.json."""
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["user_id", "movie_id", "movie_title", "explanation_type", "explanation",
                                        *ASPECTS], lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    (out / "df_explanation_selected.csv").write_text(buf.getvalue(), encoding="utf-8")
    stats = {"generator": "recbench.tasks.explanation_judging.synth", "seed": seed,
             "rows": len(rows), "users": len({r["user_id"] for r in rows}),
             "user_movie_pairs": len({(r["user_id"], r["movie_id"]) for r in rows}),
             "examples": len(rows) * len(ASPECTS)}
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    """Write the sample into --out."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--users", type=int, default=5)
    ap.add_argument("--movies-per-user", type=int, default=4)
    a = ap.parse_args(argv)
    write(a.out, make_rows(np.random.default_rng(a.seed), a.users, a.movies_per_user), a.seed)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
