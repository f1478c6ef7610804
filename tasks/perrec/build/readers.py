"""PerRecBench build inputs read with pandas (the `pandas` engine): every source -> (ratings[user_id, item_id, rating,
timestamp], items[item_id, title, author])."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pandas as pd

from recbench.api.datafiles import finite, jsonl_records, numeric_columns, read_csv, read_json, require_columns
from recbench.api.errors import DataError
from recbench.tasks.perrec.build.checks import check_ratings

#: a scale (LO, HI) to check every rating against, or None (no check: item metadata read for its titles)
Scale = Optional[tuple[float, float]]

RATING_COLS = ["user_id", "item_id", "rating", "timestamp"]


def _items_frame(df: pd.DataFrame, id_col: str, title_col: str = "title") -> pd.DataFrame:
    out = pd.DataFrame({"item_id": df[id_col].astype(str), "title": df[title_col].fillna("").astype(str)})
    if "author" in df.columns:  # Amazon 2023 metadata: author is a dict with a name
        out["author"] = df["author"].map(lambda a: a.get("name") if isinstance(a, dict) else (a if isinstance(a, str) else None))
    return out.drop_duplicates("item_id")


def _read_ratings_csv(path: Path, ids: tuple[str, str]) -> pd.DataFrame:
    """A ratings CSV with the id columns as text and only an empty field missing: a rating written 'NaN' (or an id
    written 'NA') stays as written, so a refusal shows the value as it is in the file."""
    return read_csv(path, dtype={c: str for c in ids}, keep_default_na=False, na_values=[""])


def _checked(df: pd.DataFrame, path: Path, names: dict[str, str], scale: Scale, source: str) -> pd.DataFrame:
    """The rating columns of a CSV-read table as numbers, after refusing a missing column, a rating or timestamp that
    is not a finite number, or a rating outside the scale (DataError naming the line: a row the builder would drop,
    fail on or misread)."""
    require_columns(df, list(names), path)
    numeric = [c for c, new in names.items() if new in ("rating", "timestamp")]
    numeric_columns(df, numeric, path, convert=False)
    df = df.rename(columns=names)[RATING_COLS]
    df = df.assign(rating=pd.to_numeric(df["rating"]), timestamp=pd.to_numeric(df["timestamp"]))
    check_ratings(df["rating"].to_numpy(float), lambda i: f"{path}:{i + 2}", scale, source)
    return df


def _checked_records(rows: list[tuple[str, dict[str, Any]]], fields: tuple[str, ...], scale: Scale,
                     source: str) -> pd.DataFrame:
    """(where, record) pairs as a table, after refusing a missing field, a rating or timestamp that is not a finite
    number, or a rating outside the scale (DataError naming the line or record)."""
    ratings = []
    for where, rec in rows:
        missing = [f for f in fields if f not in rec]
        if missing:
            raise DataError(f"{where}: the review lacks field(s) {missing}. Fix the record")
        ratings.append(finite(rec["rating"], where, "rating"))
        finite(rec["timestamp"], where, "timestamp")
    check_ratings(ratings, lambda i: rows[i][0], scale, source)
    return pd.DataFrame([rec for _, rec in rows])


def read_movielens(folder: str | Path, scale: Scale = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """MovieLens CSV: ratings.csv (userId,movieId,rating,timestamp) + movies.csv (movieId,title,genres)."""
    folder = Path(folder)
    p = folder / "ratings.csv"
    r = _checked(_read_ratings_csv(p, ("userId", "movieId")), p,
                 {"userId": "user_id", "movieId": "item_id", "rating": "rating", "timestamp": "timestamp"}, scale,
                 "movielens")
    movies = read_csv(folder / "movies.csv", dtype={"movieId": str})
    require_columns(movies, ["movieId", "title"], folder / "movies.csv")
    return r, _items_frame(movies, "movieId")


def read_amazon_meta(path: str | Path | None) -> pd.DataFrame:
    """Amazon 2023 item metadata: JSONL (parent_asin, title, author{name}) or CSV with parent_asin,title."""
    if path is None:
        return pd.DataFrame(columns=["item_id", "title"])
    p = Path(path)
    df = pd.DataFrame([r for _, r in jsonl_records(p)]) if ".jsonl" in p.name or p.suffix == ".json" else read_csv(p)
    require_columns(df, ["parent_asin", "title"], p)
    return _items_frame(df, "parent_asin")


def read_amazon_jsonl(reviews: str | Path, meta: str | Path | None = None,
                      scale: Scale = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Amazon Reviews 2023 review JSONL (user_id, parent_asin, rating, timestamp, ...) + metadata JSONL."""
    rows = [(f"{reviews}:{no}", rec) for no, rec in jsonl_records(reviews)]  # values as written: integer ms timestamps
    df = _checked_records(rows, ("user_id", "parent_asin", "rating", "timestamp"), scale, "amazon-jsonl")
    r = df.rename(columns={"parent_asin": "item_id"})[RATING_COLS]
    return r, read_amazon_meta(meta)


def read_amazon_csv(ratings: str | Path, meta: str | Path | None = None,
                    scale: Scale = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Amazon 2023 benchmark CSV (user_id,parent_asin,rating,timestamp; e.g. the 5-core files) + metadata."""
    p = Path(ratings)
    df = _read_ratings_csv(p, ("user_id", "parent_asin"))
    names = {"user_id": "user_id", "parent_asin": "item_id", "rating": "rating", "timestamp": "timestamp"}
    return _checked(df, p, names, scale, "amazon-csv"), read_amazon_meta(meta)


def read_amazon_user_json(path: str | Path, meta: str | Path | None = None,
                          scale: Scale = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-user Amazon 2023 reviews as one JSON list [{user_id, reviews: [{parent_asin, product_name, rating, timestamp}]}]."""
    users = read_json(path)
    if not isinstance(users, list) or not all(isinstance(u, dict) and isinstance(u.get("reviews"), list) for u in users):
        raise DataError(f"{path}: expected a JSON list of {{user_id, reviews: [...]}} objects. Fix the file")
    _checked_records([(f"{path}: user {u.get('user_id')} review {j + 1}", r if isinstance(r, dict) else {})
                      for u in users for j, r in enumerate(u["reviews"])], ("parent_asin", "rating", "timestamp"),
                     scale, "amazon-user-json")
    df = pd.json_normalize(users, "reviews", ["user_id"])
    df = df.astype({"user_id": str, "parent_asin": str})
    items = _items_frame(df.rename(columns={"product_name": "name"}), "parent_asin", "name")
    m = read_amazon_meta(meta)
    if len(m):  # metadata titles win where present
        items = pd.concat([m, items]).drop_duplicates("item_id")
    return df.rename(columns={"parent_asin": "item_id"})[RATING_COLS], items


READERS = {"movielens": read_movielens, "amazon-jsonl": read_amazon_jsonl, "amazon-csv": read_amazon_csv,
           "amazon-user-json": read_amazon_user_json}


def read_source(source: str, input: str, meta: Optional[str] = None,
                scale: Scale = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Dispatch to a reader by name (movielens, amazon-jsonl, amazon-csv, amazon-user-json); with a scale, a rating
    outside it is refused."""
    if source not in READERS:
        raise ValueError(f"unknown source '{source}'; valid: {', '.join(READERS)}")
    return READERS[source](input, scale=scale) if source == "movielens" else READERS[source](input, meta, scale=scale)



def category_items(cats: list[Any]) -> pd.DataFrame:
    """The items (item_id, title[, author]) of every category, first category first (a later duplicate id is dropped
    when written): MovieLens movies.csv, --meta (JSONL or CSV), or the user-JSON file's product names."""
    frames = []
    for c in cats:
        if c.source == "movielens":
            folder = Path(c.input)
            movies = read_csv(folder / "movies.csv", dtype={"movieId": str})
            require_columns(movies, ["movieId", "title"], folder / "movies.csv")
            frames.append(_items_frame(movies, "movieId"))
        elif c.source == "amazon-user-json":
            frames.append(read_amazon_user_json(c.input, c.meta)[1])
        else:
            frames.append(read_amazon_meta(c.meta))
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
