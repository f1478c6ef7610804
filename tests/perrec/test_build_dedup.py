"""Duplicate ratings of a user and item: the duckdb engine keeps the earliest, and among ratings at the same time the
first in the file (its integer codes follow the ids' string order), exactly as the pandas engine does; on hand-made
rows and on the bundled sample's source with duplicates added, where both engines write the same build."""
from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from recbench.run.construct import bundled_data
from recbench.tasks.perrec.build import sql
from recbench.tasks.perrec.build import BuildConfig, build
from recbench.tasks.perrec.build.pandas_engine import clean_ratings

pytestmark = pytest.mark.fast

ROWS = """userId,movieId,rating,timestamp
u1,m1,4.0,100
u1,m1,2.0,50
u1,m2,3.0,70
u1,m2,5.0,70
u2,m1,1.0,10.9
u2,m1,4.5,10
u2,m3,5.0,30
u10,m2,0.5,5
u10,m2,3.5,4
"""
#: by hand: (u1,m1) the earlier line 3; (u1,m2) both at 70, the first in the file (line 4); (u2,m1) 10.9 is
#: truncated to 10, a tie with line 7, so line 6; (u10,m2) the earlier line 10
KEPT = {("u1", "m1"): (2.0, 50), ("u1", "m2"): (3.0, 70), ("u2", "m1"): (1.0, 10), ("u2", "m3"): (5.0, 30),
        ("u10", "m2"): (3.5, 4)}


def _cleaned(tmp_path, lo=None, hi=None) -> tuple[dict, list]:
    d = tmp_path / "ml"
    d.mkdir(exist_ok=True)
    (d / "ratings.csv").write_text(ROWS)
    con = duckdb.connect()
    assert sql.load(con, "movielens", d / "ratings.csv") == 9
    sql.clean(con, lo, hi)
    kept = {(u, i): (r, t) for u, i, r, t in con.execute(
        "SELECT user_id, item_id, rating, ts FROM c JOIN user_codes USING (u) JOIN item_codes USING (i)").fetchall()}
    codes = con.execute("SELECT user_id FROM user_codes ORDER BY u").fetchall()
    return kept, [c for (c,) in codes]


def test_the_earliest_then_the_first_in_the_file_is_kept(tmp_path):
    kept, users = _cleaned(tmp_path)
    assert kept == KEPT
    assert users == ["u1", "u10", "u2"]  # codes in the ids' string order, not numeric
    frame = pd.read_csv(tmp_path / "ml" / "ratings.csv").rename(columns={"userId": "user_id", "movieId": "item_id"})
    p = clean_ratings(frame)
    assert {(u, i): (r, t) for u, i, r, t in p[["user_id", "item_id", "rating", "timestamp"]].itertuples(
        index=False)} == KEPT


def test_the_rating_range_applies_after_the_duplicates_are_dropped(tmp_path):
    kept, _ = _cleaned(tmp_path, lo=2.0)
    assert kept == {k: v for k, v in KEPT.items() if v[0] >= 2.0}  # (u2,m1) gone: its kept rating 1.0 is out of range


def test_both_engines_build_the_same_groups_from_duplicated_ratings(tmp_path):
    """The sample's ratings plus, for 300 of them, a later duplicate and a same-time duplicate after them in the
    file, and for 300 others an earlier duplicate placed after them: the kept rows differ from a first-row rule."""
    src = Path(bundled_data("perrec_sample"))
    r = pd.read_csv(src / "ratings.csv.gz").rename(columns={"user_id": "userId", "item_id": "movieId"})
    rng = np.random.default_rng(0)
    pick = rng.choice(len(r), 600, replace=False)
    a, b = r.iloc[pick[:300]].copy(), r.iloc[pick[300:]].copy()
    later = a.assign(timestamp=a["timestamp"] + 1000, rating=5.0)
    same = a.assign(rating=np.where(a["rating"] > 3, 1.0, 5.0))
    earlier = b.assign(timestamp=b["timestamp"] - 1, rating=np.where(b["rating"] > 3, 1.0, 5.0))
    dup = pd.concat([r, later, same, earlier], ignore_index=True)
    d = tmp_path / "ml"
    d.mkdir()
    dup.to_csv(d / "ratings.csv", index=False)
    items = pd.read_json(src / "items.jsonl", lines=True)
    items.rename(columns={"item_id": "movieId"})[["movieId", "title"]].to_csv(d / "movies.csv", index=False)
    cfg = BuildConfig(per_size=8, heldout_per_size=3, window_days=60)
    for engine in ("pandas", "duckdb"):
        build("movielens", str(d), str(tmp_path / engine), None, cfg, engine=engine)
    for name in ("groups.jsonl", "heldout.jsonl", "items.jsonl", "ratings.csv.gz"):
        assert (tmp_path / "pandas" / name).read_bytes() == (tmp_path / "duckdb" / name).read_bytes(), name
    stats = json.loads((tmp_path / "duckdb" / "stats.json").read_text())["input"]
    assert stats["ratings"] == len(dup) and stats["ratings_deduplicated"] == len(r)
