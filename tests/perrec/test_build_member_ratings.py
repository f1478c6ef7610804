"""The duckdb engine's streamed members' ratings write what pandas' to_csv writes (ids needing quotes, floats as pandas
prints them, user/time/item order), the same gzip bytes as the pandas engine's frame, and the same history tokens
(a user's earlier categories counted first), on hand-made ratings."""
from __future__ import annotations

import functools
import gzip

import duckdb
import pandas as pd
import pytest

from recbench.tasks.perrec.build.duckdb_engine import Engine, connect
from recbench.tasks.perrec.build.member_ratings import DuckRatings, FrameRatings, history_tokens, rating_texts
from tests.helpers import ratings_db

pytestmark = pytest.mark.fast

CAT1 = pd.DataFrame({
    "user_id": ["u,1", "u,1", "u,1", 'q"2', 'q"2', "line\nbreak", "é", "plain", "out"],
    "item_id": ["i1", "i,2", "i3", "i1", 'x"y', "cr\rhere", "i1", "i3", "i1"],
    "rating": [4.0, 0.5, 1e-05, 3.3333333333333335, 1e16, 5.0, -2.25, 4.0, 1.0],
    "ts": [30, 10, 10, -5, 7, 1, 2, 3, 4]})
CAT2 = pd.DataFrame({"user_id": ["plain", "plain", "u,1"], "item_id": ["i9", "i1", "i9"],
                     "rating": [2.0, 3.5, 1.0], "ts": [1, 2, 0]})
USERS = [["u,1", 'q"2', "line\nbreak", "é", "plain"], ["plain", "u,1"]]
READ = functools.partial(connect, eng=Engine(), read_only=True)
ITEMS = pd.DataFrame({"item_id": ["i1", "i,2", "i3", "i9", 'x"y', "i1"],
                      "title": ["one", "two words", "three little words", "", "a b c d", "ignored duplicate id"]})


def _frame():
    """The reference: each category's members' ratings sorted by user, time, item, categories in order."""
    parts = [f[f["user_id"].isin(u)].sort_values(["user_id", "ts", "item_id"]) for f, u in zip((CAT1, CAT2), USERS)]
    return pd.concat(parts, ignore_index=True).rename(columns={"ts": "timestamp"})


@pytest.fixture
def rated(tmp_path):
    return DuckRatings([ratings_db(tmp_path / "a.duckdb", CAT1), ratings_db(tmp_path / "b.duckdb", CAT2)], USERS, READ)


def test_streamed_file_is_pandas_to_csv_and_the_frame_writers_bytes(tmp_path, rated):
    rated.write(tmp_path / "d.csv.gz")
    FrameRatings(_frame()).write(tmp_path / "p.csv.gz")
    text = gzip.decompress((tmp_path / "d.csv.gz").read_bytes()).decode()
    assert text == _frame().to_csv(index=False)
    assert '"u,1",i1,4.0,30\n' in text and '"q""2","x""y",1e+16,7\n' in text and "1e-05" in text
    assert "out" not in text  # a user in no group
    assert (tmp_path / "d.csv.gz").read_bytes() == (tmp_path / "p.csv.gz").read_bytes()
    assert rated.item_ids() == FrameRatings(_frame()).item_ids() == {"i1", "i,2", "i3", "i9", 'x"y', "cr\rhere"}


def test_history_tokens_count_earlier_categories_first(rated):
    members = pd.DataFrame({"user_id": ["u,1", "u,1", "plain", "plain"], "query_item": ["i3", "i9", "i1", "i9"]})
    got = history_tokens(rated, ITEMS, members).tolist()
    # u,1 rates i,2 (2 words) and i3 at t=10 (i,2 first by item id), i1 at 30 (1); then i9 in category 2
    # plain: i3 (3) in category 1, then i9 (0) and i1 in category 2
    assert got == [2.0, 6.0, 3.0, 3.0]
    assert got == history_tokens(FrameRatings(_frame()), ITEMS, members).tolist()


def test_empty_members_write_the_header_only(tmp_path):
    empty = DuckRatings([ratings_db(tmp_path / "a.duckdb", CAT1)], [[]], READ)
    empty.write(tmp_path / "e.csv.gz")
    assert gzip.decompress((tmp_path / "e.csv.gz").read_bytes()) == b"user_id,item_id,rating,timestamp\n"
    assert rating_texts([]).empty


def test_totals_before_count_and_sum_every_rating_strictly_earlier(tmp_path):
    from recbench.tasks.perrec.build.merge import totals_before

    con = duckdb.connect(str(ratings_db(tmp_path / "a.duckdb", CAT1)))
    times = sorted({-5, 1, 2, 10, 31} | set(range(100, 205)))  # more than one scan of 100 times
    got = totals_before(con, times)
    assert got[-5] == (0, 0.0) and got[1] == (1, 3.3333333333333335) and got[2] == (2, 8.3333333333333335)
    assert got[10][0] == 6 and got[10][1] == pytest.approx(sum(CAT1.loc[CAT1["ts"] < 10, "rating"]), rel=1e-15)
    assert got[31][0] == len(CAT1) and got[204][0] == len(CAT1)
    assert totals_before(con, times, rows=2) == got  # the ratings streamed 2 at a time: the same totals


def test_rated_mask_is_pandas_isin():
    from recbench.tasks.perrec.build.write import rated_mask

    needed = {"i1", "i,2", 'x"y', "é", "7"}
    for ids in (pd.Series(["i1", "i3", "é", "x\"y", "i1"], dtype=object), pd.Series(["i,2", "zz", "i1"], dtype="str"),
                pd.Series(["7", 7, None], dtype=object), pd.Series([7, 8]), pd.Series([], dtype=object)):
        assert rated_mask(ids, needed).tolist() == ids.isin(needed).tolist()


def test_ratings_sorted_in_user_ranges_are_the_same_bytes(tmp_path, rated, monkeypatch):
    import recbench.tasks.perrec.build.member_ratings as mr

    rated.write(tmp_path / "one.csv.gz")
    monkeypatch.setattr(mr, "SLICE_ROWS", 2)  # a range per user or two (a user's ratings are never split)
    rated.write(tmp_path / "ranges.csv.gz")
    assert (tmp_path / "one.csv.gz").read_bytes() == (tmp_path / "ranges.csv.gz").read_bytes()
