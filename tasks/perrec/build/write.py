"""Write a PerRecBench build in the recbench group format."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from recbench.tasks.perrec.build.member_ratings import as_rated
from recbench.tasks.perrec.build.stats import stats_markdown


def write_build(out: str | Path, items: pd.DataFrame, built: dict[str, Any], stats: dict[str, Any]) -> Path:
    """Write items.jsonl, ratings.csv.gz (all ratings of the group members), groups.jsonl, heldout.jsonl, stats.{json,md}."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rated = as_rated(built["member_ratings"])
    needed = rated.item_ids()
    it = items[items["item_id"].isin(needed)].drop_duplicates("item_id")
    missing = sorted(needed - set(it["item_id"]))
    if missing:  # items without metadata keep their id as title (recorded in stats)
        it = pd.concat([it, pd.DataFrame({"item_id": missing, "title": missing})], ignore_index=True)
    stats["items_without_title"] = len(missing)
    it.sort_values("item_id").to_json(out / "items.jsonl", orient="records", lines=True, force_ascii=False)
    rated.write(out / "ratings.csv.gz")
    for name, gs in (("groups.jsonl", built["groups"]), ("heldout.jsonl", built["heldout"])):
        with open(out / name, "w", encoding="utf-8") as f:
            for g in gs:
                f.write(json.dumps(g, ensure_ascii=False) + "\n")
    (out / "stats.json").write_text(json.dumps(stats, indent=2, default=str))
    (out / "stats.md").write_text(stats_markdown(stats, f"({out.name})"))
    return out

