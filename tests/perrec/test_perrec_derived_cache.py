"""PerRecBench's examples and item counts through the derived-data cache equal a fresh load."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from recbench.store import derived_cache

pytestmark = pytest.mark.fast
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def cache_dir(tmp_path):
    derived_cache.configure(tmp_path / "derived")
    yield tmp_path / "derived"
    derived_cache._DIR.clear()


def test_perrec_examples_from_the_cache_equal_a_fresh_load(tmp_path, cache_dir):
    from recbench.tasks.perrec import data

    src = tmp_path / "perrec"
    shutil.copytree(REPO / "data" / "perrec_sample", src)
    load = data.load_examples.__wrapped__  # the disk-cached loader, under the in-process lru_cache
    fresh = load.uncached(str(src), 4, 200)
    first, second = load(str(src), 4, 200), load(str(src), 4, 200)
    assert len(fresh) == 120 and first == fresh and second == fresh
    assert data.item_rating_counts(str(src)) == data.item_rating_counts.uncached(str(src))
    assert {p.name.split("-")[0] for p in cache_dir.glob("*.pkl")} == {"perrec_examples", "perrec_item_counts"}
