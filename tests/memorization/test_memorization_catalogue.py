"""The catalogues the probe reads: titles as each data set writes them, popularity deciles from the ratings (counted
here again with pandas), histories oldest first; the real data sets where ../shared/data holds them."""
from __future__ import annotations

import pandas as pd
import pytest

from recbench.api.errors import ConfigError, DataError
from recbench.run.construct import bundled_data
from recbench.tasks.memorization.catalogue import decile_of, read_catalogue

pytestmark = pytest.mark.fast


def test_bundled_perrec_sample_deciles_and_histories():
    cat = read_catalogue("perrec_sample", bundled_data("perrec_sample"), "item_id")
    assert len(cat.items) == 240 and cat.items["i0001"] == "Crypt Journey (Horror)"
    ratings = pd.read_csv(bundled_data("perrec_sample/ratings.csv.gz"), dtype=str)
    counts = ratings["item_id"].value_counts()
    dec = cat.deciles()
    assert sorted(pd.Series(dec).value_counts().tolist()) == [24] * 10  # 240 items: 24 per decile
    most, least = counts.idxmax(), min(cat.items, key=lambda i: (counts.get(i, 0), list(cat.items).index(i)))
    assert dec[most] == 10 and dec[least] == 1
    # every item of decile d is rated at least as often as every item of decile d - 1
    by = pd.DataFrame({"d": pd.Series(dec), "n": pd.Series({i: int(counts.get(i, 0)) for i in cat.items})})
    g = by.groupby("d")["n"]
    assert all(g.min()[d] >= g.max()[d - 1] for d in range(2, 11))
    # histories oldest first, as the timestamps say
    hist = cat.histories()
    u = ratings["user_id"].iloc[0]
    mine = ratings[ratings["user_id"] == u].assign(t=lambda d: d["timestamp"].astype(float)).sort_values("t", kind="stable")
    assert hist[u] == mine["item_id"].tolist()


def test_bundled_formats_read():
    rp = read_catalogue("recbench_plus_sample", bundled_data("recbench_plus_sample"), "item_id")
    assert rp.items["1"] == "Velvet Voyage (1978)" and rp.numeric_ids
    p5 = read_catalogue("p5", bundled_data("llmrec_sample/p5"), "asin")
    assert not p5.numeric_ids and all(len(h) >= 2 for h in p5.histories().values())
    by_number = read_catalogue("p5", bundled_data("llmrec_sample/p5"), "p5_item_id")
    assert set(by_number.items.values()) == set(p5.items.values()) and by_number.numeric_ids


def test_decile_of_splits_ranks_in_tenths():
    assert [decile_of(r, 20) for r in range(20)] == [d for d in range(1, 11) for _ in range(2)]
    assert decile_of(0, 7) == 1 and decile_of(6, 7) == 9  # fewer than 10 items: some deciles stay empty


def test_bad_format_and_folder_are_one_config_error(tmp_path):
    with pytest.raises(ConfigError, match="Unknown task.data.format 'ml100'. Did you mean 'ml100k'"):
        read_catalogue("ml100", str(tmp_path), "item_id")
    with pytest.raises(ConfigError, match="is not a folder"):
        read_catalogue("ml100k", str(tmp_path / "nope"), "item_id")
    with pytest.raises(DataError, match="ml-100k.item found"):
        read_catalogue("ml100k", str(tmp_path), "item_id")
    (tmp_path / "items.jsonl").write_text('{"item_id": "a", "title": "X"}\n{"item_id": "a", "title": "Y"}\n')
    (tmp_path / "ratings.csv").write_text("user_id,item_id,rating,timestamp\nu,a,5,1\n")
    with pytest.raises(DataError, match="item id 'a' was already given"):
        read_catalogue("perrec_sample", str(tmp_path), "item_id")
