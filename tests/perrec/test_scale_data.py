"""The scale benchmark's data generator (benchmarks/scale_data.py): seeded, exact counts, the builder's layouts,
power-law skew, and the distribution of bench_perrec_build.synthetic_movielens, on about 10,000 ratings."""
from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recbench.tasks.perrec.build.readers import read_amazon_jsonl, read_movielens

pytestmark = pytest.mark.fast
BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


sd = _load("scale_data")


def _top_share(counts: pd.Series, top: float = 0.01) -> float:
    c = np.sort(counts.to_numpy())[::-1]
    return c[:max(1, int(len(c) * top))].sum() / c.sum()


def test_parse_count():
    assert [sd.parse_count(s) for s in ("1M", "10m", "250K", "2.5M", "1500")] == [10**6, 10**7, 250_000, 2_500_000, 1500]


def test_movielens_seeded_exact_and_readable(tmp_path):
    info = sd.write_movielens(tmp_path / "a", 10_000, seed=1, chunk=3_000)  # several chunks
    sd.write_movielens(tmp_path / "b", 10_000, seed=1, chunk=3_000)
    sd.write_movielens(tmp_path / "c", 10_000, seed=2, chunk=3_000)
    a, b, c = (pd.read_csv(tmp_path / k / "ratings.csv") for k in "abc")
    assert list(a.columns) == ["userId", "movieId", "rating", "timestamp"]
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c)
    assert len(a) == info["ratings"] == 10_000
    assert not a.duplicated(["userId", "movieId"]).any()
    assert set(a["rating"]) <= {x / 2 for x in range(1, 11)}
    movies = pd.read_csv(tmp_path / "a" / "movies.csv")
    assert len(movies) == info["items"] == 1000 and set(a["movieId"]) <= set(movies["movieId"])
    per_user = a["userId"].value_counts()
    assert per_user.drop(a["userId"].iloc[-1]).between(15, 199).all()  # 20-199 asked, minus duplicates; last cut
    ratings, items = read_movielens(tmp_path / "a")  # the builder's reader takes it as it is
    assert len(ratings) == 10_000 and len(items) == 1000


def test_movielens_item_popularity_is_skewed(tmp_path):
    sd.write_movielens(tmp_path, 10_000, seed=0)
    r = pd.read_csv(tmp_path / "ratings.csv")
    assert _top_share(r["movieId"].value_counts()) > 0.05  # top 1% of the items hold over 5x their share


def test_movielens_matches_synthetic_movielens_shape(tmp_path):
    """Same distribution as benchmarks/bench_perrec_build.py's generator (which drops ~5% duplicates from its target)."""
    bp = _load("bench_perrec_build")
    bp.synthetic_movielens(tmp_path / "ref", 20_000, seed=0)
    sd.write_movielens(tmp_path / "new", 20_000, seed=0)
    ref, new = (pd.read_csv(tmp_path / k / "ratings.csv") for k in ("ref", "new"))
    assert new["rating"].mean() == pytest.approx(ref["rating"].mean(), abs=0.15)
    assert new["rating"].std() == pytest.approx(ref["rating"].std(), abs=0.1)
    assert new.groupby("userId").size().mean() == pytest.approx(ref.groupby("userId").size().mean(), rel=0.15)
    assert _top_share(new["movieId"].value_counts()) == pytest.approx(_top_share(ref["movieId"].value_counts()), rel=0.25)
    assert new["timestamp"].min() >= sd.T0 and new["timestamp"].max() <= sd.T0 + sd.SPAN + 365 * 86400


def test_amazon_layout_categories_and_user_skew(tmp_path):
    info = sd.write_amazon(tmp_path, 10_000, n_categories=3, seed=0, parquet=False)
    cats = sd.CATEGORIES[:3]
    assert info["ratings"] == 10_000 and sum(info["categories"].values()) == 10_000
    sizes = [info["categories"][c] for c in cats]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] > 1000  # unequal shares, largest first
    frames = {}
    for c in cats:
        lines = [json.loads(x) for x in gzip.open(tmp_path / f"{c}.jsonl.gz", "rt")]
        assert set(lines[0]) == {"rating", "title", "text", "asin", "parent_asin", "user_id", "timestamp",
                                 "helpful_vote", "verified_purchase"}
        frames[c] = pd.DataFrame(lines)
        meta = pd.DataFrame([json.loads(x) for x in gzip.open(tmp_path / f"meta_{c}.jsonl.gz", "rt")])
        assert set(frames[c]["parent_asin"]) == set(meta["parent_asin"])  # every reviewed item has metadata
        r, items = read_amazon_jsonl(tmp_path / f"{c}.jsonl.gz", tmp_path / f"meta_{c}.jsonl.gz")
        assert len(r) == len(lines) and set(items["item_id"]) == set(meta["parent_asin"])
    df = pd.concat(frames.values())
    assert df["timestamp"].min() > 10**12  # milliseconds, as in Amazon Reviews 2023
    assert set(df["rating"]) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    a, b = (set(frames[c]["parent_asin"]) for c in cats[:2])
    assert not a & b  # each category has its own items
    in_cats = pd.concat([f.assign(cat=c) for c, f in frames.items()]).groupby("user_id")["cat"].nunique()
    assert (in_cats > 1).sum() > 100  # users are shared across categories
    assert _top_share(df["user_id"].value_counts()) > 0.05  # power-law users: top 1% write over 5% of reviews
    assert _top_share(df["parent_asin"].value_counts()) > 0.03
    assert not df.duplicated(["user_id", "parent_asin"]).any()


def test_amazon_seeded_and_parquet_matches_jsonl(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    sd.write_amazon(tmp_path / "a", 5_000, n_categories=2, seed=4, chunk=2_000)
    sd.write_amazon(tmp_path / "b", 5_000, n_categories=2, seed=4, chunk=2_000, parquet=False)
    for c in sd.CATEGORIES[:2]:
        ja, jb = (gzip.open(tmp_path / k / f"{c}.jsonl.gz", "rt").read() for k in "ab")
        assert ja == jb
        table = pq.read_table(tmp_path / "a" / f"{c}.parquet").to_pandas()
        assert list(table.columns) == ["user_id", "parent_asin", "rating", "timestamp"]
        lines = pd.DataFrame([json.loads(x) for x in ja.splitlines()])[list(table.columns)]
        pd.testing.assert_frame_equal(table.reset_index(drop=True), lines, check_dtype=False)
