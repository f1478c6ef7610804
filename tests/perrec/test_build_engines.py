"""The duckdb build engine writes the pandas engine's build byte for byte (groups, held-out groups, items, ratings;
stats.json differs only in the engine's name and the timings), on the bundled sample's source, on MovieLens
latest-small and on Amazon 2023 All_Beauty; and its JSONL, JSONL.gz and parquet readers agree with each other."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from recbench.run.construct import bundled_data
from recbench.tasks.perrec.build import BuildConfig, build
from recbench.tasks.perrec.build.duckdb_engine import Engine

FILES = ("groups.jsonl", "heldout.jsonl", "items.jsonl", "ratings.csv.gz")
TIMINGS = ("build_seconds", "read_seconds", "engine")


def stats_without_timings(out: Path) -> dict:
    return {k: v for k, v in json.loads((out / "stats.json").read_text()).items() if k not in TIMINGS}


def assert_same_build(a: Path, b: Path) -> None:
    for name in FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert stats_without_timings(a) == stats_without_timings(b)
    assert json.loads((a / "stats.json").read_text())["engine"] != json.loads((b / "stats.json").read_text())["engine"]


def both_engines(tmp: Path, source: str, input: str, meta, cfg: BuildConfig) -> tuple[Path, Path]:
    for engine in ("pandas", "duckdb"):
        build(source, input, str(tmp / engine), meta, cfg, engine=engine)
    return tmp / "pandas", tmp / "duckdb"


@pytest.fixture(scope="module")
def sample_movielens(tmp_path_factory) -> Path:
    """The bundled sample's source ratings and items in the MovieLens layout."""
    src, ml = Path(bundled_data("perrec_sample")), tmp_path_factory.mktemp("ml")
    pd.read_csv(src / "ratings.csv.gz").rename(columns={"user_id": "userId", "item_id": "movieId"}).to_csv(
        ml / "ratings.csv", index=False)
    items = pd.read_json(src / "items.jsonl", lines=True)
    items.rename(columns={"item_id": "movieId"})[["movieId", "title"]].to_csv(ml / "movies.csv", index=False)
    return ml


@pytest.mark.fast
@pytest.mark.parametrize("cfg", [BuildConfig(per_size=8, heldout_per_size=3, window_days=60),
                                 BuildConfig(per_size=30, heldout_per_size=10, avg="whole", gamma=10, lam=0.4, seed=3),
                                 BuildConfig(per_size=5, heldout_per_size=0, min_rating=2, max_rating=5, seed=1)],
                         ids=["prior", "whole", "range"])
def test_sample_source_builds_identically(tmp_path, sample_movielens, cfg):
    pd_out, dd_out = both_engines(tmp_path, "movielens", str(sample_movielens), None, cfg)
    assert_same_build(pd_out, dd_out)
    groups = (dd_out / "groups.jsonl").read_text().splitlines()
    assert len(groups) == 3 * cfg.per_size and "domain" not in json.loads(groups[0])
    if cfg.min_rating is not None:  # the pandas engine once picked rows by label after the range filter (wrong rows)
        ratings = [u["rating"] for g in map(json.loads, groups) for u in g["users"]]
        assert min(ratings) >= cfg.min_rating and 1.0 not in ratings


@pytest.mark.fast
def test_small_stream_batches_find_the_same_chains(tmp_path, sample_movielens):
    """Blocks cut across many Arrow batches (37 rows each) are carried whole: the same build as the pandas engine."""
    cfg = BuildConfig(per_size=8, heldout_per_size=3, window_days=60)
    build("movielens", str(sample_movielens), str(tmp_path / "pandas"), None, cfg, engine="pandas")
    build("movielens", str(sample_movielens), str(tmp_path / "duckdb"), None, cfg, eng=Engine(batch_rows=37))
    assert_same_build(tmp_path / "pandas", tmp_path / "duckdb")


@pytest.mark.fast
def test_jsonl_gz_and_parquet_read_the_same_ratings(tmp_path, sample_movielens):
    r = pd.read_csv(sample_movielens / "ratings.csv").rename(columns={"userId": "user_id", "movieId": "parent_asin"})
    r["timestamp"] = r["timestamp"] * 1000  # Amazon: milliseconds
    r.to_json(tmp_path / "r.jsonl", orient="records", lines=True)
    r.to_json(tmp_path / "r.jsonl.gz", orient="records", lines=True, compression="gzip")
    r.to_parquet(tmp_path / "r.parquet")
    cfg = BuildConfig(per_size=6, heldout_per_size=2, window_days=60)
    pd_out, dd_out = both_engines(tmp_path / "jsonl", "amazon-jsonl", str(tmp_path / "r.jsonl"), None, cfg)
    assert_same_build(pd_out, dd_out)
    build("amazon-jsonl", str(tmp_path / "r.jsonl.gz"), str(tmp_path / "gz"), None, cfg)
    build("parquet", str(tmp_path / "r.parquet"), str(tmp_path / "pq"), None, cfg)
    for other in ("gz", "pq"):
        for name in FILES:
            assert (tmp_path / other / name).read_bytes() == (dd_out / name).read_bytes(), (other, name)


@pytest.mark.full
@pytest.mark.parametrize("cfg", [BuildConfig(), BuildConfig(avg="whole", per_size=100, seed=5)], ids=["prior", "whole"])
def test_movielens_latest_small_builds_identically(tmp_path, shared_data, cfg):
    pd_out, dd_out = both_engines(tmp_path, "movielens", str(shared_data / "ml-latest-small"), None, cfg)
    assert_same_build(pd_out, dd_out)
    if cfg.avg == "prior":
        assert json.loads((dd_out / "stats.json").read_text())["candidate_windows"] == 6541  # docs/perrec.md's table


@pytest.mark.full
def test_amazon_beauty_builds_identically(tmp_path, shared_data):
    d = shared_data / "amazon2023_all_beauty"
    cfg = BuildConfig(gamma=5, window_days=365, per_size=30, heldout_per_size=5)
    pd_out, dd_out = both_engines(tmp_path, "amazon-csv", str(d / "All_Beauty.5core.csv.gz"),
                                  str(d / "filterd_meta_items.csv"), cfg)
    assert_same_build(pd_out, dd_out)
