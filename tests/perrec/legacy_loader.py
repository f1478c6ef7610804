"""The PerRecBench loader as it was before the columnar rewrite (pandas frames, rank_bm25 per member), kept only
so tests can check the columnar loader builds the very same examples."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from recbench.api.datafiles import check_unique, finite, jsonl_records, numeric_columns, read_csv
from recbench.api.errors import DataError
from recbench.api.types import Example
from recbench.tasks.perrec.bm25 import bm25_top_k
from recbench.tasks.perrec.data import DIFFICULTY_BY_SIZE, group_members


def _read_table(path: Path) -> pd.DataFrame:
    """items.jsonl or ratings.csv(.gz) as a table; ratings and timestamps must be finite numbers on every line."""
    if not path.exists():
        raise FileNotFoundError(f"PerRecBench data file missing: {path}. Fix: set task.data_dir to a folder with "
                                "items.jsonl, ratings.csv(.gz) and groups.jsonl (see data/README.md)")


    if path.suffix == ".jsonl":
        return pd.DataFrame([r for _, r in jsonl_records(path)])
    df = read_csv(path)
    return numeric_columns(df, [c for c in ("rating", "timestamp") if c in df.columns], path)


def _require(df: pd.DataFrame, cols: list[str], path: Path) -> None:
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise DataError(f"{path}: missing field(s) {missing}; present: {list(df.columns)}. "
                         "Fix the file or regenerate it with `python -m recbench.tasks.perrec.build.synth`")


def item_average(ratings: pd.DataFrame, item: str, exclude: set[str], fallback: float) -> float:
    """Mean rating of an item by users outside the group (the item-average reference predictor); fallback if none."""
    r = ratings.loc[(ratings["item_id"] == item) & ~ratings["user_id"].isin(exclude), "rating"]
    return round(float(r.mean()), 4) if len(r) else round(float(fallback), 4)


def _ratings_path(root: Path) -> Path:
    return next((p for p in (root / "ratings.csv.gz", root / "ratings.csv") if p.exists()), root / "ratings.csv")


def _example_inputs(data_dir: str, retrieval_k: int, history_max: int, groups_file: str = "groups.jsonl") -> list[Path]:
    root = Path(data_dir)
    return [root / "items.jsonl", _ratings_path(root), root / groups_file]


def legacy_load_examples(data_dir: str, retrieval_k: int, history_max: int, groups_file: str = "groups.jsonl") -> tuple[Example, ...]:
    """User-group examples with per-user history (before the query time), averages and BM25-retrieved items.

    A member record may carry avg_rating / relative_rating (the builder writes them; with `--avg whole` they
    differ from the prior-history average) and a group record item_avg_rating; otherwise they are computed."""
    root = Path(data_dir)
    items_p = root / "items.jsonl"
    ratings_p = _ratings_path(root)
    groups_p = root / groups_file
    items = _read_table(items_p)
    _require(items, ["item_id", "title"], items_p)
    ratings = _read_table(ratings_p)
    _require(ratings, ["user_id", "item_id", "rating", "timestamp"], ratings_p)
    titles = dict(zip(items["item_id"].astype(str), items["title"].astype(str)))
    ratings = ratings.astype({"user_id": str, "item_id": str}).sort_values(["user_id", "timestamp"], kind="stable")
    by_user = {u: g for u, g in ratings.groupby("user_id", sort=False)}
    global_mean = float(ratings["rating"].mean())

    examples = []
    records = list(jsonl_records(groups_p))
    check_unique(((str(g.get("group_id")), f"{groups_p}:{no}") for no, g in records), "group_id",
                 "give every group its own group_id (or rebuild the groups: python -m recbench.build perrec)")
    for line_no, g in records:
        where = f"{groups_p}:{line_no}"
        for field in ("group_id", "query_item", "timestamp", "users"):
            if field not in g:
                raise DataError(f"{where}: the group has no field '{field}'. Fix the line or rebuild the groups "
                                "(python -m recbench.build perrec)")
        q_title = titles.get(str(g["query_item"]))
        if q_title is None:
            raise DataError(f"{where}: query_item {g['query_item']} not in {items_p}")
        members = group_members(g, where)
        finite(g["timestamp"], where, "timestamp")
        users = []
        for m in members:
            uid = str(m["user_id"])
            hist = by_user.get(uid)
            if hist is None:
                raise DataError(f"{where}: user {uid} has no ratings in {ratings_p}")
            t_query = m.get("timestamp", g["timestamp"])  # the user's own rating time of the query item
            before = hist[hist["timestamp"] < t_query]
            if before.empty:
                raise DataError(f"{where}: user {uid} has no history before the query time")
            hist_items = [{"item_id": i, "title": titles.get(i, i), "rating": float(r)}
                          for i, r in zip(before["item_id"], before["rating"])][-history_max:]
            avg = m["avg_rating"] if m.get("avg_rating") is not None else float(np.mean(before["rating"]))
            rel = m["relative_rating"] if m.get("relative_rating") is not None else m["rating"] - avg
            users.append(user_record(uid, m["rating"], avg, rel, before["rating"].tolist(), int(len(before)),
                                     hist_items, q_title, retrieval_k))
        difficulty = g.get("difficulty") or DIFFICULTY_BY_SIZE.get(len(users), f"size{len(users)}")
        item_avg = g.get("item_avg_rating")
        if item_avg is None:
            item_avg = item_average(ratings, str(g["query_item"]), {u["user_id"] for u in users}, global_mean)
        examples.append(group_example(str(g["group_id"]), str(g["query_item"]), q_title, g["timestamp"],
                                      finite(item_avg, where, "item_avg_rating"), users, difficulty))
    return tuple(examples)


def user_record(uid: str, rating: float, avg: float, rel: float, all_ratings: list[float], history_len: int,
                shown: list[dict[str, Any]], query_title: str, retrieval_k: int) -> dict[str, Any]:
    """One group member as every loader builds it: rating, average, relative rating, most common rating, the
    shown history and its BM25 top-k for the query title."""
    top = bm25_top_k(query_title, [h["title"] for h in shown], retrieval_k)
    return {"user_id": uid, "rating": rating, "avg_rating": round(avg, 4), "relative_rating": round(rel, 4),
            "most_common_rating": float(Counter(all_ratings).most_common(1)[0][0]), "history_len": history_len,
            "history": shown, "retrieved": [shown[i] for i in top]}


def group_example(group_id: str, query_item: str, query_title: str, timestamp: Any, item_avg: float,
                  users: list[dict[str, Any]], difficulty: str) -> Example:
    """A PerRecBench example (one user group) from its members."""
    return Example(id=group_id, data={"query_item": query_item, "query_title": query_title, "timestamp": timestamp,
                                      "item_avg_rating": item_avg, "users": users},
                   meta={"difficulty": difficulty, "group_size": len(users)})


