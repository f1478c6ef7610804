"""Seeded MovieLens- and Amazon-Reviews-2023-like ratings at any size (1M .. 100M+), written in chunks.

    python benchmarks/scale_data.py movielens --ratings 10M --out /tmp/scale/ml-10M [--shape wide]
    python benchmarks/scale_data.py amazon --ratings 1M --out /tmp/scale/az-1M [--categories 4] [--no-parquet]

MovieLens layout (what `python -m recbench.build perrec --source movielens` reads): `ratings.csv`
(userId,movieId,rating,timestamp) + `movies.csv` (movieId,title,genres), with the distribution of
`benchmarks/bench_perrec_build.py:synthetic_movielens` (users with 20-200 ratings, items with long-tailed popularity
(i + 10)^-0.9, ratings soon after the item's release, half-star ratings from user and item effects), generalised to
chunks of users: memory is one chunk (about 1M ratings), whatever the total. Unlike synthetic_movielens, which drops
about 5% duplicates from its target, exactly `--ratings` ratings are written.

Amazon layout (Amazon Reviews 2023: one review JSONL per category, `--source amazon-jsonl`): per category
`<Category>.jsonl.gz` (rating, title, text, asin, parent_asin, user_id, timestamp in ms, helpful_vote,
verified_purchase), `meta_<Category>.jsonl.gz` (main_category, title, average_rating, rating_number, store,
parent_asin) and, unless --no-parquet, `<Category>.parquet` (user_id, parent_asin, rating, timestamp). Users are
shared across categories with power-law activity (most users write a few reviews, a few write hundreds); each
category has its own items with power-law popularity; categories have unequal shares.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd

CHUNK_RATINGS = 1_000_000
T0, SPAN = 1_500_000_000, 3 * 365 * 86400  # MovieLens: three years of releases (seconds)
AZ_T0, AZ_SPAN = 1_420_070_400_000, 8 * 365 * 86400 * 1000  # Amazon: 2015..2023 (milliseconds)
CATEGORIES = ("Books", "Electronics", "Home_and_Kitchen", "Beauty_and_Personal_Care", "Toys_and_Games",
              "Sports_and_Outdoors", "Movies_and_TV", "Grocery_and_Gourmet_Food")


def parse_count(text: str) -> int:
    """'10M' -> 10_000_000, '250K' -> 250_000, '1500' -> 1500."""
    t = text.strip().upper()
    mult = {"K": 1_000, "M": 1_000_000, "G": 1_000_000_000}.get(t[-1:], 1)
    return int(float(t[:-1] if mult > 1 else t) * mult)


# ---- MovieLens ------------------------------------------------------------------------------------------------------
#: MovieLens shapes: ratings per item (the catalogue is n_ratings // this) and the per-user rating counts. default:
#: uniform 20..199 per user (mean 110: 227K users and 500K items at 25M). wide: 2.5x the users and items at the same
#: rating count and a heavier activity skew: per-user counts from a Pareto law (15 * (1 + Lomax(1.5)), capped at
#: 20,000: median 23, mean about 44, so about 40% of users have too few ratings ever to be eligible and about 1,100
#: users at 25M have more than 1,000 ratings) over 1.25M items at 25M
SHAPES = {"default": {"ratings_per_item": 50}, "wide": {"ratings_per_item": 20, "xmin": 15, "alpha": 1.5,
                                                        "cap": 20_000, "mean": 44}}


def shape_items(n_ratings: int, shape: str = "default") -> int:
    """The catalogue size of a MovieLens shape."""
    return max(1000, n_ratings // SHAPES[shape]["ratings_per_item"])


def per_user_counts(rng: np.random.Generator, n_ratings: int, shape: str) -> np.ndarray:
    """Ratings per user for a chunk of about n_ratings (the shape's activity law)."""
    if shape == "default":
        return rng.integers(20, 200, size=max(1, n_ratings // 100))
    p = SHAPES[shape]
    n = max(1, n_ratings // p["mean"])
    return np.minimum((p["xmin"] * (1.0 + rng.pareto(p["alpha"], size=n))).astype(np.int64), p["cap"])


def movielens_chunks(n_ratings: int, seed: int = 0, chunk: int = CHUNK_RATINGS,
                     shape: str = "default") -> Iterator[pd.DataFrame]:
    """Exactly n_ratings MovieLens-like ratings (userId, movieId, rating, timestamp), one user-chunk at a time."""
    rng = np.random.default_rng(seed)
    n_items = shape_items(n_ratings, shape)
    pop = rng.permutation((np.arange(n_items) + 10.0) ** -0.9)
    cdf = np.cumsum(pop / pop.sum())
    release = rng.integers(T0, T0 + SPAN, size=n_items)
    item_bias = rng.normal(0, 0.4, n_items)
    left, next_user = n_ratings, 0
    while left > 0:
        per_user = per_user_counts(rng, min(chunk, left), shape)
        user = np.repeat(np.arange(next_user, next_user + len(per_user)), per_user)
        next_user += len(per_user)
        item = np.minimum(np.searchsorted(cdf, rng.random(len(user)), side="right"), n_items - 1)
        ts = np.minimum(release[item] + rng.exponential(40 * 86400, size=len(user)).astype(np.int64),
                        T0 + SPAN + 86400 * 365)
        user_bias = rng.normal(0, 0.5, len(per_user))[user - user[0]]
        score = 3.4 + user_bias + item_bias[item] + rng.normal(0, 0.9, len(user))
        df = pd.DataFrame({"userId": user, "movieId": item, "rating": np.clip(np.round(score * 2) / 2, 0.5, 5.0),
                           "timestamp": ts}).drop_duplicates(["userId", "movieId"])
        df = df.head(left)  # the last chunk stops at exactly n_ratings
        left -= len(df)
        yield df


def write_movielens(folder: str | Path, n_ratings: int, seed: int = 0, chunk: int = CHUNK_RATINGS,
                    shape: str = "default") -> dict:
    """Write ratings.csv + movies.csv to folder; returns counts and bytes."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    n, users, items = 0, 0, set()
    with open(folder / "ratings.csv", "w", newline="") as f:
        for i, df in enumerate(movielens_chunks(n_ratings, seed, chunk, shape)):
            df.to_csv(f, header=i == 0, index=False)
            n, users = n + len(df), int(df["userId"].iloc[-1]) + 1
            items.update(np.unique(df["movieId"]).tolist())
    n_items = shape_items(n_ratings, shape)
    ids = np.arange(n_items)
    pd.DataFrame({"movieId": ids, "title": [f"Movie {i} ({1990 + i % 30})" for i in ids],
                  "genres": "Drama"}).to_csv(folder / "movies.csv", index=False)
    return {"layout": "movielens", "shape": shape, "ratings": n, "users": users, "items_rated": len(items),
            "items": n_items, "bytes": sum(p.stat().st_size for p in folder.iterdir())}


# ---- Amazon Reviews 2023 --------------------------------------------------------------------------------------------
def category_shares(k: int) -> np.ndarray:
    """Unequal category shares, largest first: proportional to 1/(rank+1)."""
    w = 1.0 / (np.arange(k) + 2.0)
    return w / w.sum()


def user_activity(rng: np.random.Generator, n_users: int) -> np.ndarray:
    """Reviews per user: a discrete power law (Zipf, exponent 2) from 1, capped at 2,000."""
    return np.minimum(rng.zipf(2.0, size=n_users), 2000)


def items_per_category(n_ratings: int, k: int) -> np.ndarray:
    """Catalogue size of each category: about 20 reviews per item, at least 200 items."""
    return np.maximum(200, (n_ratings * category_shares(k) / 20).astype(np.int64))


def amazon_chunks(n_ratings: int, categories: tuple[str, ...], seed: int = 0,
                  chunk: int = CHUNK_RATINGS) -> Iterator[pd.DataFrame]:
    """Exactly n_ratings Amazon-like reviews (user_id, parent_asin, rating, timestamp ms, category code), by user chunk."""
    rng = np.random.default_rng(seed)
    shares = category_shares(len(categories))
    n_items = items_per_category(n_ratings, len(categories))
    offsets = np.concatenate([[0], np.cumsum(n_items)])
    cdfs = []
    for n in n_items:
        pop = rng.permutation((np.arange(n) + 5.0) ** -1.0)
        cdfs.append(np.cumsum(pop / pop.sum()))
    release = rng.integers(AZ_T0, AZ_T0 + AZ_SPAN, size=int(offsets[-1]))
    item_bias = rng.normal(0, 0.5, int(offsets[-1]))
    left, next_user = n_ratings, 0
    while left > 0:
        per_user = user_activity(rng, max(1, min(chunk, left) // 3))  # mean of the capped Zipf(2) is about 3
        user = np.repeat(np.arange(next_user, next_user + len(per_user)), per_user)
        next_user += len(per_user)
        cat = np.searchsorted(np.cumsum(shares), rng.random(len(user)), side="right").clip(0, len(shares) - 1)
        item = np.empty(len(user), dtype=np.int64)
        for c in range(len(categories)):
            m = cat == c
            item[m] = offsets[c] + np.minimum(np.searchsorted(cdfs[c], rng.random(m.sum()), side="right"), n_items[c] - 1)
        lag = rng.exponential(60 * 86400 * 1000, size=len(user)).astype(np.int64)
        ts = np.minimum(release[item] + lag, AZ_T0 + AZ_SPAN + 365 * 86400 * 1000)
        score = 4.3 + rng.normal(0, 0.6, len(per_user))[user - user[0]] + item_bias[item] + rng.normal(0, 1.0, len(user))
        df = pd.DataFrame({"user": user, "item": item, "rating": np.clip(np.round(score), 1, 5).astype(float),
                           "timestamp": ts, "category": cat}).drop_duplicates(["user", "item"])
        df = df.head(left)
        left -= len(df)
        yield df


def user_ids(user: np.ndarray) -> pd.Series:
    """Amazon-looking user ids (28 characters)."""
    return "AG" + pd.Series(user).astype(str).str.zfill(26)


def asins(item: np.ndarray) -> pd.Series:
    """Amazon-looking parent ASINs (10 characters)."""
    return "B0" + pd.Series(item).astype(str).str.zfill(8)


def review_lines(df: pd.DataFrame) -> str:
    """One chunk of reviews as Amazon 2023 JSONL text (fields in the dataset's order)."""
    a = asins(df["item"].to_numpy())
    out = pd.DataFrame({"rating": df["rating"].to_numpy(), "title": "Review title",
                        "text": "Synthetic review text.", "asin": a, "parent_asin": a,
                        "user_id": user_ids(df["user"].to_numpy()), "timestamp": df["timestamp"].to_numpy(),
                        "helpful_vote": 0, "verified_purchase": True})
    return out.to_json(orient="records", lines=True)


def write_amazon(folder: str | Path, n_ratings: int, n_categories: int = 4, seed: int = 0,
                 parquet: bool = True, chunk: int = CHUNK_RATINGS) -> dict:
    """Write per-category review JSONL.gz, meta JSONL.gz and (parquet=True) parquet files; returns counts and bytes."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cats = CATEGORIES[:n_categories]
    pq = _parquet_writers(folder, cats) if parquet else None
    outs = [gzip.open(folder / f"{c}.jsonl.gz", "wt", compresslevel=1) for c in cats]
    counts = np.zeros(len(cats), dtype=np.int64)
    n_items = int(items_per_category(n_ratings, len(cats)).sum())
    rated, rating_sum = np.zeros(n_items, dtype=np.int64), np.zeros(n_items)
    users = 0
    try:
        for df in amazon_chunks(n_ratings, cats, seed, chunk):
            users = int(df["user"].iloc[-1]) + 1
            for c, part in df.groupby("category", sort=True):
                outs[c].write(review_lines(part))
                counts[c] += len(part)
                if pq is not None:
                    pq[c].write_table(_arrow_table(part))
            rated += np.bincount(df["item"].to_numpy(), minlength=n_items)
            rating_sum += np.bincount(df["item"].to_numpy(), weights=df["rating"].to_numpy(), minlength=n_items)
    finally:
        for f in outs:
            f.close()
        for w in pq or []:
            w.close()
    _write_meta(folder, cats, n_ratings, rated, rating_sum)
    return {"layout": "amazon2023", "ratings": int(counts.sum()), "users": users, "items_rated": int((rated > 0).sum()),
            "categories": dict(zip(cats, counts.tolist())), "parquet": parquet,
            "bytes": sum(p.stat().st_size for p in folder.iterdir())}


def _parquet_writers(folder: Path, cats: tuple[str, ...]) -> list:
    import pyarrow.parquet as papq  # only the parquet output needs pyarrow

    return [papq.ParquetWriter(folder / f"{c}.parquet", _arrow_table(pd.DataFrame(
        {"user": [0], "item": [0], "rating": [1.0], "timestamp": [0]})).schema) for c in cats]


def _arrow_table(part: pd.DataFrame):
    import pyarrow as pa

    return pa.table({"user_id": user_ids(part["user"].to_numpy()), "parent_asin": asins(part["item"].to_numpy()),
                     "rating": part["rating"].to_numpy(), "timestamp": part["timestamp"].to_numpy(np.int64)})


def _write_meta(folder: Path, cats: tuple[str, ...], n_ratings: int, rated: np.ndarray, rating_sum: np.ndarray) -> None:
    """meta_<Category>.jsonl.gz: one line per rated item of the category (items are numbered by category)."""
    bounds = np.concatenate([[0], np.cumsum(items_per_category(n_ratings, len(cats)))])
    for c, name in enumerate(cats):
        items = bounds[c] + np.flatnonzero(rated[bounds[c]:bounds[c + 1]] > 0)
        meta = pd.DataFrame({"main_category": name.replace("_", " "),
                             "title": [f"{name.replace('_', ' ')} product {i}" for i in items],
                             "average_rating": np.round(rating_sum[items] / rated[items], 1),
                             "rating_number": rated[items], "store": "Synthetic", "parent_asin": asins(items).to_numpy()})
        with gzip.open(folder / f"meta_{name}.jsonl.gz", "wt", compresslevel=1) as f:
            f.write(meta.to_json(orient="records", lines=True))


def main(argv: list[str] | None = None) -> None:
    """CLI: write one generated data set and print its counts as JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("layout", choices=["movielens", "amazon"])
    ap.add_argument("--ratings", required=True, help="e.g. 1M, 10M, 25M, 100M, 250K")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--categories", type=int, default=4, help=f"Amazon: 1..{len(CATEGORIES)}")
    ap.add_argument("--no-parquet", action="store_true", help="Amazon: JSONL only")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="default",
                    help="MovieLens: default (20-199 ratings per user) or wide (2.5x users and items, power-law activity)")
    a = ap.parse_args(argv)
    n = parse_count(a.ratings)
    if not 1 <= a.categories <= len(CATEGORIES):
        ap.error(f"--categories must be 1..{len(CATEGORIES)}")
    info = (write_movielens(a.out, n, a.seed, shape=a.shape) if a.layout == "movielens"
            else write_amazon(a.out, n, a.categories, a.seed, parquet=not a.no_parquet))
    json.dump(info, sys.stdout)
    print()


if __name__ == "__main__":
    main()
