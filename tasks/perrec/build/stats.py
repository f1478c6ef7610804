"""Build statistics (paper Table 4 layout) and their Markdown table."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd

from recbench.tasks.perrec.build.member_ratings import as_rated, history_tokens


def windows_in_several_difficulties(windows: dict[int, list[int]]) -> int:
    """How many co-rating windows gave groups to more than one difficulty (their groups share users)."""
    seen = pd.Series([k for ks in windows.values() for k in ks], dtype=np.int64)
    return int((seen.value_counts() > 1).sum())


# ---- statistics (paper Table 4) ---------------------------------------------------------------------------------------
def input_summary(n_raw: int, n: int, users: int, items: int, t_min: Any, t_max: Any) -> dict[str, Any]:
    """The input counts the statistics report: raw rows, deduplicated ratings, users, items, first and last time."""
    return {"ratings": int(n_raw), "ratings_deduplicated": int(n), "users": int(users), "items": int(items),
            "t_min": None if n == 0 else int(t_min), "t_max": None if n == 0 else int(t_max)}


def statistics(items: pd.DataFrame, built: dict[str, Any], cfg: Any) -> dict[str, Any]:
    """Table-4 style statistics plus rating / relative-rating distributions of the test groups' members."""
    ups, inp = built["units_per_second"], built["input"]
    members = pd.DataFrame([{**u, "query_item": g["query_item"], "difficulty": g["difficulty"],
                             **({"domain": g["domain"]} if "domain" in g else {})}
                            for g in built["groups"] for u in g["users"]])
    if members.empty:
        members = pd.DataFrame(columns=["user_id", "query_item", "timestamp", "history_len", "rating",
                                        "relative_rating", "difficulty"])
    tok = history_tokens(as_rated(built["member_ratings"]), items, members)

    def dt(x: float) -> str:
        return pd.Timestamp(int(x) / ups, unit="s").strftime("%Y-%m-%d")

    hl = members["history_len"].astype(float) if len(members) else pd.Series(dtype=float)
    rel_bins = np.arange(-4.5, 4.51, 0.5)
    stats = {
        "config": {**asdict(cfg), "sizes": list(cfg.sizes)},
        "input": {**{k: v for k, v in inp.items() if k not in ("t_min", "t_max")},
                  "time_range": [dt(inp["t_min"]), dt(inp["t_max"])] if inp["ratings_deduplicated"] else None},
        "eligible_query_ratings": int(built["n_eligible"]),
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


