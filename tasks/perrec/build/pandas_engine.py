"""The `pandas` build engine: cleaning, prior counts and averages, co-rating windows and separated chains in memory."""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd

from recbench.tasks.perrec.build.config import BuildConfig
from recbench.tasks.perrec.build.readers import RATING_COLS
from recbench.tasks.perrec.build.stats import input_summary
from recbench.tasks.perrec.build.select import MEMBER_COLUMNS, draw_windows, group_records

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

    A `blk` column of e gives the block numbers (the duckdb engine's, in (item, window) order) instead of numbering
    the (item, window) pairs here. Returns (members [blocks x steps] row labels of e, -1 padded; chain lengths; block
    item codes)."""
    if not len(e):  # no eligible rating: no block, no chain
        return np.full((0, 2), -1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    block = e["blk"].to_numpy() if "blk" in e.columns else \
        e.groupby(["i" if "i" in e.columns else "item_id", "window"], sort=True).ngroup().to_numpy()
    rel = e["relative_rating"].to_numpy()
    step = block[1:] > block[:-1]
    in_order = bool(np.all(step | ((block[1:] == block[:-1]) & (rel[1:] >= rel[:-1]))))
    # rows already by block and relative rating (the duckdb engine's stream): a stable sort keeps them as they are
    order = np.arange(len(block)) if in_order else np.lexsort((rel, block))
    blk, rel, labels = block[order], rel[order], e.index.to_numpy()[order]
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
                                  cfg.max_rating if cfg.max_rating is not None else np.inf)].reset_index(drop=True)
        # (positions are the member labels: before this reset a rating range picked the wrong rows, or failed)
    ups = units_per_second(r["timestamp"], cfg.time_unit)
    r = annotate(r, cfg.avg)
    e = r[r["n_prior"] > cfg.gamma].copy()
    span = int(cfg.window_days * 86400 * ups)
    e["window"] = (e["timestamp"] - e.groupby("i")["timestamp"].transform("min")) // max(span, 1)
    members, chain_len, cand_item = separated_chains(e, cfg.lam)
    keep = chain_len >= 2
    members, chain_len, cand_item = members[keep], chain_len[keep], cand_item[keep]

    test, held, windows = draw_windows(members, chain_len, cand_item, cfg)
    col = {c: r[c].to_numpy() for c in MEMBER_COLUMNS}  # row label = position
    codes = r["i"].to_numpy()

    def means(keys: list[tuple[int, int]]) -> list[float]:
        return item_prior_means(r, [(int(codes[k]), t) for k, t in keys])

    groups = group_records(test, "", col, cfg.sizes, means)
    heldout = group_records(held, "heldout-", col, cfg.sizes, means)
    users = {u["user_id"] for g in groups + heldout for u in g["users"]}
    inp = input_summary(len(ratings), len(r), r["user_id"].nunique(), r["item_id"].nunique(), r["timestamp"].min(),
                        r["timestamp"].max())
    return {"groups": groups, "heldout": heldout, "annotated": r, "eligible": e, "n_eligible": len(e),
            "n_chains": int(len(chain_len)), "windows": windows, "units_per_second": ups, "input": inp,
            "member_ratings": r[r["user_id"].isin(users)][RATING_COLS], "build_seconds": time.perf_counter() - t0}

