"""The seeded group selection shared by both build engines: held-out items, per-difficulty window draws, records.

Both engines hand over the same candidates: every (item, window) block's separated chain of length >= 2 (member row
labels, -1 padded), its length and its item code (any code in the items' sorted order), plus per-label member
columns; from there the draws and the records are this one code path, so equal candidates give equal groups."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from recbench.tasks.perrec.build.config import BuildConfig
from recbench.tasks.perrec.data import DIFFICULTY_BY_SIZE

#: member columns the records need, each indexed by a chain's member label
MEMBER_COLUMNS = ("user_id", "item_id", "rating", "timestamp", "n_prior", "avg")


def draw_windows(members: np.ndarray, chain_len: np.ndarray, cand_item: np.ndarray, cfg: BuildConfig
                 ) -> tuple[dict[int, list[np.ndarray]], dict[int, list[np.ndarray]], dict[str, dict[int, list[int]]]]:
    """Seeded test and held-out draws: (test members per size, held-out members per size, picked window indices)."""
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
    return test, held, windows


def group_records(picked: dict[int, list[np.ndarray]], prefix: str, col: dict[str, np.ndarray], sizes: Sequence[int],
                  item_means: Callable[[list[tuple[int, int]]], list[float]]) -> list[dict[str, Any]]:
    """The groups.jsonl records of the drawn members, per size sorted by (domain, query item, first time);
    `item_means` maps (label of the member rated at the group's time, group time) pairs to the item's prior mean.
    A `domain` column in `col` adds a `domain` field to each group."""
    out, keys = [], []
    dom = col.get("domain")
    for size in sizes:
        diff = DIFFICULTY_BY_SIZE.get(size, f"size{size}")
        order = sorted(picked[size], key=lambda m: ("" if dom is None else dom[m[0]], col["item_id"][m[0]],
                                                    int(col["timestamp"][m].min())))
        for j, m in enumerate(order):
            t_group = int(col["timestamp"][m].min())
            keys.append((int(m[np.argmin(col["timestamp"][m])]), t_group))  # the member rating at the group's time
            g = {"group_id": f"{prefix}{diff}-{j:04d}", "difficulty": diff, "query_item": str(col["item_id"][m[0]]),
                 "timestamp": t_group,
                 "users": [{"user_id": str(col["user_id"][k]), "rating": float(col["rating"][k]),
                            "timestamp": int(col["timestamp"][k]), "history_len": int(col["n_prior"][k]),
                            "avg_rating": round(float(col["avg"][k]), 4),
                            "relative_rating": round(float(col["rating"][k] - col["avg"][k]), 4)} for k in m]}
            if dom is not None:
                g = {**{k: v for k, v in g.items() if k != "users"}, "domain": str(dom[m[0]]), "users": g["users"]}
            out.append(g)
    for g, mean in zip(out, item_means(keys) if keys else []):
        g["item_avg_rating"] = round(mean, 4)
    return out
