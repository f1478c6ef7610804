"""PerRecBench group selection from raw ratings: co-raters of a query item within a window, active, well separated."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd

from recbench.tasks.perrec.data import DIFFICULTY_BY_SIZE


@dataclass(frozen=True)
class GroupCriteria:
    """The paper's selection parameters (gamma, lambda, co-rating window) and sampling sizes."""

    gamma: int = 20  # a user needs MORE than gamma ratings before the query
    lam: float = 0.6  # every pair's relative-rating gap must exceed lambda
    window_s: int = 30 * 86400  # co-raters rated the query item within this span
    sizes: tuple[int, ...] = (2, 3, 4)
    per_size: int = 200
    seed: int = 0


def candidate_raters(ratings: pd.DataFrame, crit: GroupCriteria) -> pd.DataFrame:
    """Every rating with the rater's prior count and prior average (history strictly before it)."""
    r = ratings.sort_values(["user_id", "timestamp"], kind="stable").copy()
    g = r.groupby("user_id", sort=False)["rating"]
    r["n_prior"] = g.cumcount()
    r["avg_prior"] = (g.cumsum() - r["rating"]) / r["n_prior"].replace(0, np.nan)
    r["relative_rating"] = r["rating"] - r["avg_prior"]
    return r[r["n_prior"] > crit.gamma]


def select_groups(ratings: pd.DataFrame, crit: GroupCriteria) -> list[dict]:
    """Groups (dicts in the recbench groups.jsonl format) sampled per size with a seed; items not reused across sizes' groups of one item."""
    rng = np.random.default_rng(crit.seed)
    cands = candidate_raters(ratings, crit)
    found: dict[int, list[dict]] = {s: [] for s in crit.sizes}
    for item, rows in cands.groupby("item_id", sort=True):
        rows = rows.sort_values("timestamp")
        if len(rows) < min(crit.sizes):
            continue
        # earliest window of the item's raters
        t0 = rows["timestamp"].iloc[0]
        win = rows[rows["timestamp"] <= t0 + crit.window_s]
        users = list(zip(win["user_id"], win["rating"], win["relative_rating"], win["timestamp"]))
        for size in crit.sizes:
            for combo in itertools.combinations(users, size):
                rel = [c[2] for c in combo]
                if all(abs(a - b) > crit.lam for a, b in itertools.combinations(rel, 2)):
                    found[size].append({
                        "query_item": str(item),
                        "timestamp": int(min(c[3] for c in combo)),
                        "users": [{"user_id": str(c[0]), "rating": float(c[1]), "timestamp": int(c[3])} for c in combo],
                    })
                    break  # one group per item and size
    out = []
    for size in crit.sizes:
        pool = found[size]
        take = rng.permutation(len(pool))[: crit.per_size]
        for j, k in enumerate(sorted(take)):
            g = pool[k]
            out.append({"group_id": f"{DIFFICULTY_BY_SIZE.get(size, size)}-{j:04d}",
                        "difficulty": DIFFICULTY_BY_SIZE.get(size, f"size{size}"), **g})
    return out
