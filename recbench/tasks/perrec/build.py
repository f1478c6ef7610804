"""Build PerRecBench groups from raw ratings (Amazon Reviews 2023 JSONL/CSV, MovieLens CSV), vectorised with pandas.

    python -m recbench.build perrec --source movielens --input ../shared/data/ml-latest-small --out built/ml
    python -m recbench.build perrec --source amazon-csv --input All_Beauty.5core.csv.gz --meta meta.jsonl --out built/beauty --gamma 10

Selection (Tan et al. 2025, PerRecBench): for every query item, the raters who rated it within one co-rating
window of `window_days` (tumbling windows anchored at the item's first eligible rating), who are ACTIVE (more
than `gamma` ratings strictly before their own rating of the item), and whose relative ratings (rating minus the
user's average over the history strictly before the query; `--avg whole` reproduces the released data's
whole-history average) differ pairwise by more than `lam`. Groups of 2/3/4 users = easy/medium/hard, `per_size`
each, sampled with `seed`. Each difficulty is its own test set (as in the released per-level files
item2group_avg_diff_sample-{easy,medium,hard}.json): within a difficulty every group comes from a different
(item, window); one window may give groups of several difficulties, which then share users; a held-out split (`heldout_per_size` per size) drawn from a seeded share of the query
items (`heldout_item_fraction`) disjoint from the test groups' items feeds few-shot prompts and fine-tuning. Output layout: see docs/perrec.md ("recbench group format").
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd

from recbench.api.datafiles import finite, jsonl_records, numeric_columns, read_csv, read_json, require_columns
from recbench.api.errors import DataError
from recbench.tasks.perrec.data import DIFFICULTY_BY_SIZE

RATING_COLS = ["user_id", "item_id", "rating", "timestamp"]


@dataclass
class BuildConfig:
    """Selection parameters (paper defaults) and split sizes."""

    gamma: int = 20  # a member needs MORE than gamma ratings strictly before the query rating
    lam: float = 0.6  # every pair's relative-rating gap must exceed lambda
    window_days: float = 30.0  # co-rating window (delta-t)
    sizes: tuple[int, ...] = (2, 3, 4)
    per_size: int = 200
    heldout_per_size: int = 50
    heldout_item_fraction: float = 0.2  # share of query items reserved for the held-out split (disjoint items)
    seed: int = 0
    avg: str = "prior"  # "prior" (no leakage) | "whole" (released data: average over the whole history)
    min_rating: Optional[float] = None
    max_rating: Optional[float] = None
    time_unit: str = field(default="auto")  # "s" | "ms" | "auto" (ms when timestamps exceed 1e11)


# ---- readers: every source -> (ratings[user_id, item_id, rating, timestamp], items[item_id, title, author]) --------
def _items_frame(df: pd.DataFrame, id_col: str, title_col: str = "title") -> pd.DataFrame:
    out = pd.DataFrame({"item_id": df[id_col].astype(str), "title": df[title_col].fillna("").astype(str)})
    if "author" in df.columns:  # Amazon 2023 metadata: author is a dict with a name
        out["author"] = df["author"].map(lambda a: a.get("name") if isinstance(a, dict) else (a if isinstance(a, str) else None))
    return out.drop_duplicates("item_id")


def _checked(df: pd.DataFrame, path: Path, names: dict[str, str]) -> pd.DataFrame:
    """The rating columns of a CSV-read table, after refusing a missing column or a rating or timestamp that is not a
    finite number (DataError naming the line: a row the builder would drop or fail on)."""
    require_columns(df, list(names), path)
    numeric_columns(df, [c for c, new in names.items() if new in ("rating", "timestamp")], path, convert=False)
    return df.rename(columns=names)[RATING_COLS]


def _checked_records(rows: list[tuple[str, dict[str, Any]]], fields: tuple[str, ...]) -> pd.DataFrame:
    """(where, record) pairs as a table, after refusing a missing field or a rating or timestamp that is not a finite
    number (DataError naming the line or record)."""
    for where, rec in rows:
        missing = [f for f in fields if f not in rec]
        if missing:
            raise DataError(f"{where}: the review lacks field(s) {missing}. Fix the record")
        finite(rec["rating"], where, "rating")
        finite(rec["timestamp"], where, "timestamp")
    return pd.DataFrame([rec for _, rec in rows])


def read_movielens(folder: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """MovieLens CSV: ratings.csv (userId,movieId,rating,timestamp) + movies.csv (movieId,title,genres)."""
    folder = Path(folder)
    p = folder / "ratings.csv"
    r = _checked(read_csv(p, dtype={"userId": str, "movieId": str}), p,
                 {"userId": "user_id", "movieId": "item_id", "rating": "rating", "timestamp": "timestamp"})
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


def read_amazon_jsonl(reviews: str | Path, meta: str | Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Amazon Reviews 2023 review JSONL (user_id, parent_asin, rating, timestamp, ...) + metadata JSONL."""
    rows = [(f"{reviews}:{no}", rec) for no, rec in jsonl_records(reviews)]  # values as written: integer ms timestamps
    df = _checked_records(rows, ("user_id", "parent_asin", "rating", "timestamp"))
    r = df.rename(columns={"parent_asin": "item_id"})[RATING_COLS]
    return r, read_amazon_meta(meta)


def read_amazon_csv(ratings: str | Path, meta: str | Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Amazon 2023 benchmark CSV (user_id,parent_asin,rating,timestamp; e.g. the 5-core files) + metadata."""
    p = Path(ratings)
    df = read_csv(p, dtype={"user_id": str, "parent_asin": str})
    names = {"user_id": "user_id", "parent_asin": "item_id", "rating": "rating", "timestamp": "timestamp"}
    return _checked(df, p, names), read_amazon_meta(meta)


def read_amazon_user_json(path: str | Path, meta: str | Path | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-user Amazon 2023 reviews as one JSON list [{user_id, reviews: [{parent_asin, product_name, rating, timestamp}]}]."""
    users = read_json(path)
    if not isinstance(users, list) or not all(isinstance(u, dict) and isinstance(u.get("reviews"), list) for u in users):
        raise DataError(f"{path}: expected a JSON list of {{user_id, reviews: [...]}} objects. Fix the file")
    _checked_records([(f"{path}: user {u.get('user_id')} review {j + 1}", r if isinstance(r, dict) else {})
                      for u in users for j, r in enumerate(u["reviews"])], ("parent_asin", "rating", "timestamp"))
    df = pd.json_normalize(users, "reviews", ["user_id"])
    df = df.astype({"user_id": str, "parent_asin": str})
    items = _items_frame(df.rename(columns={"product_name": "name"}), "parent_asin", "name")
    m = read_amazon_meta(meta)
    if len(m):  # metadata titles win where present
        items = pd.concat([m, items]).drop_duplicates("item_id")
    return df.rename(columns={"parent_asin": "item_id"})[RATING_COLS], items


READERS = {"movielens": read_movielens, "amazon-jsonl": read_amazon_jsonl, "amazon-csv": read_amazon_csv,
           "amazon-user-json": read_amazon_user_json}


def read_source(source: str, input: str, meta: Optional[str] = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Dispatch to a reader by name (movielens, amazon-jsonl, amazon-csv, amazon-user-json)."""
    if source not in READERS:
        raise ValueError(f"unknown source '{source}'; valid: {', '.join(READERS)}")
    return READERS[source](input) if source == "movielens" else READERS[source](input, meta)


# ---- selection ------------------------------------------------------------------------------------------------------
def clean_ratings(ratings: pd.DataFrame) -> pd.DataFrame:
    """Typed ratings with one (earliest) rating per user and item, sorted by user, time and item; integer codes
    `u` / `i` (in the ids' sorted order) carry the heavy grouping work."""
    r = ratings[RATING_COLS].dropna()
    as_str = lambda c: c if pd.api.types.is_string_dtype(c) else c.astype(str)  # noqa: E731
    r = pd.DataFrame({"user_id": as_str(r["user_id"]).to_numpy(), "item_id": as_str(r["item_id"]).to_numpy(),
                      "rating": r["rating"].astype(float).to_numpy(), "timestamp": r["timestamp"].astype(np.int64).to_numpy()})
    r["u"] = pd.factorize(r["user_id"], sort=True)[0]
    r["i"] = pd.factorize(r["item_id"], sort=True)[0]
    r = r.iloc[np.lexsort((r["i"].to_numpy(), r["timestamp"].to_numpy(), r["u"].to_numpy()))]
    return r.drop_duplicates(["u", "i"], keep="first").reset_index(drop=True)


def units_per_second(ts: pd.Series, unit: str) -> int:
    """1 for second timestamps, 1000 for milliseconds ('auto': ms when values exceed 1e11)."""
    if unit == "auto":
        return 1000 if len(ts) and ts.max() > 1e11 else 1
    return {"s": 1, "ms": 1000}[unit]


def annotate(r: pd.DataFrame, avg: str = "prior") -> pd.DataFrame:
    """Add n_prior (ratings strictly before), avg (prior or whole-history mean) and relative_rating per rating."""
    r = r.copy()
    if "u" not in r.columns:
        r["u"] = pd.factorize(r["user_id"], sort=True)[0]
    g = r.groupby("u", sort=False)["rating"]
    r["_cc"] = g.cumcount()
    r["_cs"] = g.cumsum() - r["rating"]
    tie = r.groupby(["u", "timestamp"], sort=False)
    r["n_prior"] = tie["_cc"].transform("first")  # same-second ratings are not "before" each other
    r["avg_prior"] = tie["_cs"].transform("first") / r["n_prior"].replace(0, np.nan)
    r["avg"] = r["avg_prior"] if avg == "prior" else g.transform("mean")
    if avg not in ("prior", "whole"):
        raise ValueError(f"avg must be 'prior' or 'whole', not '{avg}'")
    r["relative_rating"] = r["rating"] - r["avg"]
    return r.drop(columns=["_cc", "_cs"])


def separated_chains(e: pd.DataFrame, lam: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (item, window) block: the greedy chain of raters, ascending by relative rating, each more than lam above
    the previous one. In such a chain every PAIR differs by more than lam (gaps add up), and the greedy scan from the
    lowest value finds a largest such set. Vectorised over all blocks at once: one searchsorted per chain step.

    Returns (members [blocks x steps] row labels of e, -1 padded; chain lengths; block item codes)."""
    block = e.groupby(["i" if "i" in e.columns else "item_id", "window"], sort=True).ngroup().to_numpy()
    order = np.lexsort((e["relative_rating"].to_numpy(), block))
    blk, rel, labels = block[order], e["relative_rating"].to_numpy()[order], e.index.to_numpy()[order]
    items = e["i" if "i" in e.columns else "item_id"].to_numpy()[order]
    starts = np.flatnonzero(np.r_[True, blk[1:] != blk[:-1]])
    ends = np.r_[starts[1:], len(blk)]
    key = blk.astype(np.float64) * 1000.0 + rel  # |relative rating| < 500: blocks never overlap in key space
    cur = starts.copy()
    steps = [labels[cur]]
    alive = np.ones(len(starts), dtype=bool)
    while alive.any():
        nxt = np.searchsorted(key, key[cur] + lam, side="right")  # first row strictly more than lam above
        alive &= nxt < ends
        cur = np.where(alive, nxt, cur)
        steps.append(np.where(alive, labels[np.minimum(cur, len(labels) - 1)], -1))
    members = np.stack(steps, axis=1)
    lengths = (members >= 0).sum(axis=1)
    return members, lengths, items[starts]


def item_prior_means(r: pd.DataFrame, keys: list[tuple[int, int]]) -> list[float]:
    """Mean rating of each (item code `i`, time) over that item's ratings strictly before the time (no leakage of
    the group's own ratings); the mean of ALL ratings before the time when the item has none."""
    codes = r["i"].to_numpy()
    ts, rating = r["timestamp"].to_numpy(np.int64), r["rating"].to_numpy(float)
    o = np.lexsort((ts, codes))
    key = codes[o].astype(np.int64) * (1 << 42) + ts[o]  # (item, time) in one sortable int64
    cs = np.r_[0.0, np.cumsum(rating[o])]
    qc = np.array([k[0] for k in keys], dtype=np.int64)
    qt = np.array([k[1] for k in keys], dtype=np.int64)
    lo, hi = np.searchsorted(key, qc << 42, "left"), np.searchsorted(key, (qc << 42) + qt, "left")
    g = np.argsort(ts, kind="stable")
    all_ts, all_cs = ts[g], np.r_[0.0, np.cumsum(rating[g])]
    m = np.searchsorted(all_ts, qt, "left")
    fallback = np.where(m > 0, all_cs[m] / np.maximum(m, 1), all_cs[-1] / max(len(ts), 1))
    return np.where(hi > lo, (cs[hi] - cs[lo]) / np.maximum(hi - lo, 1), fallback).tolist()


def build_groups(ratings: pd.DataFrame, cfg: BuildConfig) -> dict[str, Any]:
    """Select test and held-out groups; returns {'groups', 'heldout', 'annotated', 'stats'}."""
    t0 = time.perf_counter()
    r = clean_ratings(ratings)
    if cfg.min_rating is not None or cfg.max_rating is not None:
        r = r[r["rating"].between(cfg.min_rating if cfg.min_rating is not None else -np.inf,
                                  cfg.max_rating if cfg.max_rating is not None else np.inf)]
    ups = units_per_second(r["timestamp"], cfg.time_unit)
    r = annotate(r, cfg.avg)
    e = r[r["n_prior"] > cfg.gamma].copy()
    span = int(cfg.window_days * 86400 * ups)
    e["window"] = (e["timestamp"] - e.groupby("i")["timestamp"].transform("min")) // max(span, 1)
    members, chain_len, cand_item = separated_chains(e, cfg.lam)
    keep = chain_len >= 2
    members, chain_len, cand_item = members[keep], chain_len[keep], cand_item[keep]

    rng = np.random.default_rng(cfg.seed)

    # query items are split once (seeded) into a test pool and a disjoint held-out pool
    uniq = np.unique(cand_item)
    n_held = int(round(len(uniq) * cfg.heldout_item_fraction)) if cfg.heldout_per_size > 0 else 0
    in_held = np.isin(cand_item, rng.permutation(uniq)[:n_held])

    windows: dict[str, dict[int, list[int]]] = {"test": {}, "heldout": {}}

    def draw(size: int, n: int, held_pool: bool) -> list[np.ndarray]:
        """n distinct windows (one group each per difficulty; an item may give several windows) with a chain of
        >= size users."""
        pool = np.flatnonzero((chain_len >= size) & (in_held == held_pool))
        picked = rng.permutation(pool)[:n]
        windows["heldout" if held_pool else "test"][size] = picked.tolist()
        # any subset of a chain stays separated: a seeded random subset of `size` members
        return [rng.choice(members[k, :chain_len[k]], size=size, replace=False) for k in picked]

    test = {s: draw(s, cfg.per_size, False) for s in cfg.sizes}
    held = {s: draw(s, cfg.heldout_per_size, True) for s in cfg.sizes}

    col = {c: r[c].to_numpy() for c in ("user_id", "item_id", "i", "rating", "timestamp", "n_prior", "avg")}  # row label = position

    def records(picked: dict[int, list[np.ndarray]], prefix: str) -> list[dict[str, Any]]:
        out, keys = [], []
        for size in cfg.sizes:
            diff = DIFFICULTY_BY_SIZE.get(size, f"size{size}")
            for j, m in enumerate(sorted(picked[size], key=lambda m: (col["item_id"][m[0]], int(col["timestamp"][m].min())))):
                t_group = int(col["timestamp"][m].min())
                item = str(col["item_id"][m[0]])
                keys.append((int(col["i"][m[0]]), t_group))
                out.append({
                    "group_id": f"{prefix}{diff}-{j:04d}", "difficulty": diff, "query_item": item, "timestamp": t_group,
                    "users": [{"user_id": str(col["user_id"][k]), "rating": float(col["rating"][k]),
                               "timestamp": int(col["timestamp"][k]), "history_len": int(col["n_prior"][k]),
                               "avg_rating": round(float(col["avg"][k]), 4),
                               "relative_rating": round(float(col["rating"][k] - col["avg"][k]), 4)} for k in m],
                })
        for g, m in zip(out, item_prior_means(r, keys)):
            g["item_avg_rating"] = round(m, 4)
        return out

    groups, heldout = records(test, ""), records(held, "heldout-")
    build_s = time.perf_counter() - t0
    return {"groups": groups, "heldout": heldout, "annotated": r, "eligible": e, "n_chains": int(len(chain_len)),
            "windows": windows, "units_per_second": ups, "build_seconds": build_s}


def windows_in_several_difficulties(windows: dict[int, list[int]]) -> int:
    """How many co-rating windows gave groups to more than one difficulty (their groups share users)."""
    seen = pd.Series([k for ks in windows.values() for k in ks], dtype=np.int64)
    return int((seen.value_counts() > 1).sum())


# ---- statistics (paper Table 4) ---------------------------------------------------------------------------------------
def statistics(ratings: pd.DataFrame, items: pd.DataFrame, built: dict[str, Any], cfg: BuildConfig) -> dict[str, Any]:
    """Table-4 style statistics plus rating / relative-rating distributions of the test groups' members."""
    r = built["annotated"]
    ups = built["units_per_second"]
    n_words = pd.Series(items["title"].astype(str).str.split().str.len().to_numpy(), index=items["item_id"].to_numpy())
    n_words = n_words[~n_words.index.duplicated()]
    words = r["item_id"].map(n_words).fillna(0).to_numpy()
    r = r.assign(_w=words)
    r["hist_tokens"] = r.groupby("u" if "u" in r.columns else "user_id", sort=False)["_w"].cumsum() - r["_w"]
    members = pd.DataFrame([{**u, "query_item": g["query_item"], "difficulty": g["difficulty"]}
                            for g in built["groups"] for u in g["users"]])
    if members.empty:
        members = pd.DataFrame(columns=["user_id", "query_item", "timestamp", "history_len", "rating",
                                        "relative_rating", "difficulty"])
    tok = members.merge(r[["user_id", "item_id", "hist_tokens"]], left_on=["user_id", "query_item"],
                        right_on=["user_id", "item_id"], how="left")["hist_tokens"] if len(members) else pd.Series(dtype=float)

    def dt(x: float) -> str:
        return pd.Timestamp(int(x) / ups, unit="s").strftime("%Y-%m-%d")

    hl = members["history_len"].astype(float) if len(members) else pd.Series(dtype=float)
    rel_bins = np.arange(-4.5, 4.51, 0.5)
    stats = {
        "config": {**asdict(cfg), "sizes": list(cfg.sizes)},
        "input": {"ratings": int(len(ratings)), "ratings_deduplicated": int(len(r)), "users": int(r["user_id"].nunique()),
                  "items": int(r["item_id"].nunique()),
                  "time_range": [dt(r["timestamp"].min()), dt(r["timestamp"].max())] if len(r) else None},
        "eligible_query_ratings": int(len(built["eligible"])),
        "candidate_windows": int(built["n_chains"]),
        "windows_in_several_difficulties": windows_in_several_difficulties(built.get("windows", {}).get("test", {})),
        "groups": pd.Series([g["difficulty"] for g in built["groups"]], dtype=object).value_counts().to_dict(),
        "heldout_groups": pd.Series([g["difficulty"] for g in built["heldout"]], dtype=object).value_counts().to_dict(),
        "reviews_in_groups": int(len(members)),
        "users_in_groups": int(members["user_id"].nunique()) if len(members) else 0,
        "query_items": int(len({g["query_item"] for g in built["groups"]})),
        "history_size": {"mean": float(hl.mean()) if len(hl) else None, "median": float(hl.median()) if len(hl) else None,
                         "min": int(hl.min()) if len(hl) else None, "max": int(hl.max()) if len(hl) else None},
        "history_tokens_mean": float(tok.mean()) if len(tok) else None,
        "query_time_range": [dt(members["timestamp"].min()), dt(members["timestamp"].max())] if len(members) else None,
        "rating_distribution": {f"{k:g}": int(v) for k, v in members["rating"].value_counts().sort_index().items()} if len(members) else {},
        "relative_rating_histogram": {
            f"[{lo:+.1f},{lo + 0.5:+.1f})": int(n) for lo, n in zip(
                rel_bins[:-1], np.histogram(members["relative_rating"].astype(float), bins=rel_bins)[0])
        } if len(members) else {},
        "build_seconds": round(built["build_seconds"], 3),
    }
    return stats


def stats_markdown(stats: dict[str, Any], name: str = "") -> str:
    """The statistics as a Markdown table (paper Table 4 layout) plus the two distributions."""
    h = stats["history_size"]
    rows = [
        ("reviews (ratings) in input", stats["input"]["ratings"]), ("users in input", stats["input"]["users"]),
        ("items in input", stats["input"]["items"]), ("input time range", " .. ".join(stats["input"]["time_range"] or [])),
        ("eligible query ratings (> gamma prior)", stats["eligible_query_ratings"]),
        ("candidate co-rating windows", stats["candidate_windows"]),
        ("groups easy / medium / hard", " / ".join(str(stats["groups"].get(d, 0)) for d in ("easy", "medium", "hard"))),
        ("windows giving groups to 2+ difficulties (shared users)", stats.get("windows_in_several_difficulties", "-")),
        ("held-out easy / medium / hard", " / ".join(str(stats["heldout_groups"].get(d, 0)) for d in ("easy", "medium", "hard"))),
        ("reviews in groups", stats["reviews_in_groups"]), ("users in groups", stats["users_in_groups"]),
        ("query items", stats["query_items"]),
        ("history size mean / median / min / max",
         f"{h['mean']:.1f} / {h['median']:.0f} / {h['min']} / {h['max']}" if h["mean"] is not None else "-"),
        ("history tokens (title words) mean", f"{stats['history_tokens_mean']:.0f}" if stats["history_tokens_mean"] else "-"),
        ("query time range", " .. ".join(stats["query_time_range"] or [])),
        ("build seconds", stats["build_seconds"]),
    ]
    out = [f"## PerRecBench build statistics {name}".rstrip(), "", "| statistic | value |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in rows]
    out += ["", "Ratings of group members: " + ", ".join(f"{k}: {v}" for k, v in stats["rating_distribution"].items()),
            "", "Relative ratings of group members: " + ", ".join(f"{k}: {v}" for k, v in stats["relative_rating_histogram"].items() if v)]
    return "\n".join(out) + "\n"


# ---- writing ------------------------------------------------------------------------------------------------------------
def write_build(out: str | Path, ratings: pd.DataFrame, items: pd.DataFrame, built: dict[str, Any],
                stats: dict[str, Any]) -> Path:
    """Write items.jsonl, ratings.csv.gz (all ratings of the group members), groups.jsonl, heldout.jsonl, stats.{json,md}."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    users = {u["user_id"] for g in built["groups"] + built["heldout"] for u in g["users"]}
    r = built["annotated"]
    rr = r[r["user_id"].isin(users)][RATING_COLS]
    needed = set(rr["item_id"])
    it = items[items["item_id"].isin(needed)].drop_duplicates("item_id")
    missing = sorted(needed - set(it["item_id"]))
    if missing:  # items without metadata keep their id as title (recorded in stats)
        it = pd.concat([it, pd.DataFrame({"item_id": missing, "title": missing})], ignore_index=True)
    stats["items_without_title"] = len(missing)
    it.sort_values("item_id").to_json(out / "items.jsonl", orient="records", lines=True, force_ascii=False)
    rr.to_csv(out / "ratings.csv.gz", index=False, compression={"method": "gzip", "mtime": 0})
    for name, gs in (("groups.jsonl", built["groups"]), ("heldout.jsonl", built["heldout"])):
        with open(out / name, "w", encoding="utf-8") as f:
            for g in gs:
                f.write(json.dumps(g, ensure_ascii=False) + "\n")
    (out / "stats.json").write_text(json.dumps(stats, indent=2, default=str))
    (out / "stats.md").write_text(stats_markdown(stats, f"({out.name})"))
    return out


def build(source: str, input: str, out: str, meta: Optional[str] = None, cfg: Optional[BuildConfig] = None) -> dict[str, Any]:
    """Read a source, select groups, write the recbench group format; returns the statistics."""
    cfg = cfg or BuildConfig()
    t0 = time.perf_counter()
    ratings, items = read_source(source, input, meta)
    t_read = time.perf_counter() - t0
    built = build_groups(ratings, cfg)
    stats = statistics(ratings, items, built, cfg)
    stats["source"] = {"kind": source, "input": str(input), "meta": str(meta) if meta else None}
    stats["read_seconds"] = round(t_read, 3)
    write_build(out, ratings, items, built, stats)
    return stats


def main(argv: Optional[list[str]] = None) -> None:
    """CLI: python -m recbench.build perrec --source ... --input ... --out ... [criteria]."""
    d = BuildConfig()
    ap = argparse.ArgumentParser(prog="python -m recbench.build perrec", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", required=True, choices=sorted(READERS))
    ap.add_argument("--input", required=True, help="ratings file (Amazon) or folder (MovieLens)")
    ap.add_argument("--meta", default=None, help="Amazon item metadata (JSONL or CSV with parent_asin,title)")
    ap.add_argument("--out", default=None, help="output folder (required unless --stats-md)")
    ap.add_argument("--stats-md", action="store_true",
                    help="print only the statistics table (Markdown, as in docs/perrec.md); write files only with --out")
    ap.add_argument("--gamma", type=int, default=d.gamma)
    ap.add_argument("--lam", type=float, default=d.lam)
    ap.add_argument("--window-days", type=float, default=d.window_days)
    ap.add_argument("--sizes", type=int, nargs="+", default=list(d.sizes))
    ap.add_argument("--per-size", type=int, default=d.per_size)
    ap.add_argument("--heldout-per-size", type=int, default=d.heldout_per_size)
    ap.add_argument("--heldout-item-fraction", type=float, default=d.heldout_item_fraction)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--avg", choices=["prior", "whole"], default=d.avg)
    ap.add_argument("--time-unit", choices=["auto", "s", "ms"], default=d.time_unit)
    a = ap.parse_args(argv)
    try:
        _build_cli(ap, a)
    except (DataError, FileNotFoundError) as e:  # a defect of the inputs: one line naming the file and line, exit 2
        print(f"recbench: error: {e}", file=sys.stderr)
        sys.exit(2)


def _build_cli(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    cfg = BuildConfig(gamma=a.gamma, lam=a.lam, window_days=a.window_days, sizes=tuple(a.sizes), per_size=a.per_size,
                      heldout_per_size=a.heldout_per_size,
                      heldout_item_fraction=a.heldout_item_fraction, seed=a.seed, avg=a.avg, time_unit=a.time_unit)
    if a.out is None and not a.stats_md:
        ap.error("--out is required (or --stats-md to print the statistics table only)")
    if a.out is None:
        ratings, items = read_source(a.source, a.input, a.meta)
        stats = statistics(ratings, items, build_groups(ratings, cfg), cfg)
    else:
        stats = build(a.source, a.input, a.out, a.meta, cfg)
    print(stats_markdown(stats, f"({Path(a.input).name})"))
    if a.out is not None and not a.stats_md:
        print(f"wrote {a.out}: groups.jsonl, heldout.jsonl, items.jsonl, ratings.csv.gz, stats.json, stats.md")


if __name__ == "__main__":
    main()
