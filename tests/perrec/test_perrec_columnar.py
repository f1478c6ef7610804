"""The columnar PerRecBench loader builds the very examples the pandas loader built (same histories, averages, BM25
top-k), its vectorised BM25 ranks as rank_bm25 does, and lazily built members are dropped and rebuilt identically."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from recbench.tasks.perrec import lazy
from recbench.tasks.perrec.bm25 import TokenTable, bm25_top_k, top_k
from recbench.tasks.perrec.data import load_examples
from tests.perrec.legacy_loader import legacy_load_examples

pytestmark = pytest.mark.fast
SAMPLE = str(Path(__file__).resolve().parents[2] / "data" / "perrec_sample")


@pytest.mark.parametrize("k,history_max", [(4, 200), (4, 3), (10, 50), (1, 1)])
def test_columnar_loader_equals_the_pandas_loader_on_the_sample(k, history_max):
    old = legacy_load_examples(SAMPLE, k, history_max)
    new = load_examples.__wrapped__.uncached(SAMPLE, k, history_max)
    assert [e.id for e in new] == [e.id for e in old] and len(new) == 120
    assert [e.meta for e in new] == [e.meta for e in old]
    assert [e.data.materialize() for e in new] == [e.data for e in old]
    # the retrieved items are the ones rank_bm25 picks over each member's shown titles
    u = new[0].data["users"][0]
    picked = bm25_top_k(new[0].data["query_title"], [h["title"] for h in u["history"]], k)
    assert u["retrieved"] == [u["history"][i] for i in picked]


def test_vectorised_bm25_ranks_as_rank_bm25_on_tied_and_common_words():
    rng = np.random.default_rng(7)
    words = ["night", "love", "story", "the", "dark", "drama", "comedy", "war", "x", "a1", "été"]
    titles = [" ".join(rng.choice(words, size=int(rng.integers(0, 6)))) or "!" for _ in range(300)]
    table = TokenTable.build(titles)
    for trial in range(600):
        n = int(rng.integers(1, 40))
        docs = rng.integers(0, len(titles), size=n)
        query = " ".join(rng.choice(words, size=int(rng.integers(1, 5))))
        k = int(rng.integers(1, 8))
        want = bm25_top_k(query, [titles[d] for d in docs], k)
        got = top_k(table, table.query_ids(query), docs.astype(np.int64), k).tolist()
        assert got == want, (trial, query, [titles[d] for d in docs])


def test_lazy_members_are_dropped_and_rebuilt_identically(monkeypatch):
    exs = load_examples.__wrapped__.uncached(SAMPLE, 4, 200)
    first = exs[0].data.materialize()
    monkeypatch.setattr(lazy, "KEEP_GROUPS", 5)
    for e in exs[:20]:
        e.data["users"][0]["history"]
    assert "users" not in dict.keys(exs[0].data) and "users" in dict.keys(exs[19].data)
    assert exs[0].data.materialize() == first
    assert exs[0].data.history_lens() == [u["history_len"] for u in first["users"]]
    # a pickled example (the derived-data cache) carries no built members and rebuilds the same ones
    back = pickle.loads(pickle.dumps(exs[0]))
    assert "users" not in dict.keys(back.data) and back == exs[0]


def test_most_common_rating_of_a_slice_breaks_ties_as_counter_does():
    from collections import Counter

    from recbench.tasks.perrec.columnar import Ratings, most_common

    rng = np.random.default_rng(3)
    rating = rng.choice([1.0, 2.0, 3.5, 4.0, 5.0], size=400)
    values, codes = np.unique(rating, return_inverse=True)
    r = Ratings(np.array(["u"]), np.array([0, 400]), np.array(["i"]), np.zeros(400, np.int32), rating,
                np.arange(400.0), values, codes.astype(np.int16))
    starts = rng.integers(0, 399, 200)
    spans = [(int(a), int(a) + 1 + int(rng.integers(0, 400 - a))) for a in starts]
    for lo, end in [(0, 1), (0, 2), (5, 9), (10, 30), (0, 400), (17, 23)] + spans:
        want = Counter(rating[lo:end].tolist()).most_common(1)[0][0]
        assert r.most_common(lo, end) == want == most_common(rating[lo:end]), (lo, end)


def test_the_pandas_fallback_reader_builds_the_same_examples(monkeypatch):
    from recbench.tasks.perrec import columnar

    fast = [e.data.materialize() for e in load_examples.__wrapped__.uncached(SAMPLE, 4, 20)]
    monkeypatch.setattr(columnar, "_arrow_table", lambda path: None)  # as for a file pyarrow cannot read cleanly
    assert [e.data.materialize() for e in load_examples.__wrapped__.uncached(SAMPLE, 4, 20)] == fast


@pytest.mark.parametrize("ids", ["int", "text"])
def test_ratings_columns_by_hand_and_as_the_pandas_reader_reads_them(tmp_path, monkeypatch, ids):
    from recbench.tasks.perrec import columnar, data

    users, items = (["10", "9", "10", "9", "2", "10"], ["7", "30", "30", "7", "100", "100"]) if ids == "int" else \
        (["u10", "u9", "u10", "u9", "u2", "u10"], ["b", "a", "a", "b", "c", "c"])
    rows = zip(users, items, [4.0, 3.5, 5.0, -0.0, 2.0, 4.0], [30, 10, 20, 10, 5, 20])
    p = tmp_path / "ratings.csv"
    p.write_text("user_id,item_id,rating,timestamp\n" + "".join(f"{u},{i},{r},{t}\n" for u, i, r, t in rows))
    got = columnar.read_ratings(p, data._read_table)
    # ids sorted as text ("10" < "2" < "9"); rows by user then time, file order among equal times
    assert got.users.tolist() == sorted(set(users)) and got.user_ptr.tolist() == [0, 3, 4, 6]
    assert got.items[got.item].tolist() == [items[k] for k in (2, 5, 0, 4, 1, 3)]
    assert got.rating.tolist() == [5.0, 4.0, 4.0, 2.0, 3.5, -0.0]
    assert got.timestamp.tolist() == [20.0, 20.0, 30.0, 5.0, 10.0, 10.0]
    assert got.values.tolist() == [0.0, 2.0, 3.5, 4.0, 5.0] and got.value.tolist() == [4, 3, 3, 1, 2, 0]
    monkeypatch.setattr(columnar, "_arrow_table", lambda path: None)  # the pandas reader, for a file arrow refuses
    slow = columnar.read_ratings(p, data._read_table)
    for f in ("users", "user_ptr", "items", "item", "rating", "timestamp", "values", "value"):
        assert getattr(got, f).tolist() == getattr(slow, f).tolist(), f


def test_query_item_counts_come_from_the_loaded_ratings_without_reading_them_again(monkeypatch):
    from recbench.tasks.perrec import data

    want = data.item_rating_counts.uncached(SAMPLE)
    exs = list(load_examples.__wrapped__.uncached(SAMPLE, 4, 20))
    monkeypatch.setattr(data, "read_ratings", lambda *a: pytest.fail("the ratings file was read again"))
    assert data.query_item_counts(exs, SAMPLE) == want and sum(want.values()) == len(exs[0].data._store.ratings.item)
    plain = [type(e)(id=e.id, data=e.data.materialize(), meta=e.meta) for e in exs[:3]]  # no store: the file is read
    monkeypatch.setattr(data, "item_rating_counts", lambda d: {"read": 1})
    assert data.query_item_counts(plain, SAMPLE) == {"read": 1}
