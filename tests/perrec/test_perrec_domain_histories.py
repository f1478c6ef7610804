"""Per-domain histories: a ratings file with a `domain` column (a build over several categories) describes each
group's members by their ratings in the group's domain only (hand-made data: one user in groups of both domains, one
item rated in both); without the column every rating counts, as before; the derived-data cache never serves one
layout's examples for the other; a group whose domain the ratings lack is refused naming the file, the field and the
fix; and the builder's streamed file writes the column (quoted as pandas' to_csv quotes it) only for named categories."""
from __future__ import annotations

import functools
import gzip
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from recbench.api.errors import DataError
from recbench.run.construct import bundled_data
from recbench.store import derived_cache
from recbench.tasks.perrec.build.duckdb_engine import Engine, connect
from recbench.tasks.perrec.build.member_ratings import DuckRatings, FrameRatings, history_tokens
from recbench.tasks.perrec.data import load_examples
from tests.helpers import ratings_db

pytestmark = pytest.mark.fast

# u1 rates in both domains (and item s in both, at the same time); u2 only in A, u3 only in B
RATINGS = """user_id,item_id,rating,timestamp,domain
u1,i1,5.0,10,A
u1,i2,3.0,20,A
u1,s,4.0,25,A
u1,qa,5.0,100,A
u1,i3,1.0,150,A
u2,i1,2.0,5,A
u2,i2,4.0,15,A
u2,qa,1.0,100,A
u1,b1,1.0,12,B
u1,s,2.0,25,B
u1,b2,3.0,30,B
u1,qb,2.0,200,B
u3,b1,5.0,1,B
u3,b2,5.0,2,B
u3,qb,5.0,200,B
"""
TITLES = {"i1": "red lipstick", "i2": "blue eyeliner", "i3": "nail polish", "s": "gift set", "qa": "lip balm",
          "b1": "war novel", "b2": "love story", "qb": "sea poems"}
GROUPS = [{"group_id": "gA", "query_item": "qa", "timestamp": 100, "difficulty": "easy", "domain": "A",
           "users": [{"user_id": "u1", "rating": 5.0, "timestamp": 100}, {"user_id": "u2", "rating": 1.0, "timestamp": 100}]},
          {"group_id": "gB", "query_item": "qb", "timestamp": 200, "difficulty": "easy", "domain": "B",
           "users": [{"user_id": "u1", "rating": 2.0, "timestamp": 200}, {"user_id": "u3", "rating": 5.0, "timestamp": 200}]}]


@pytest.fixture(autouse=True)
def no_derived_cache():
    derived_cache.configure(None)
    yield
    derived_cache._DIR.clear()


def _write(d: Path, ratings: str = RATINGS, groups: list = GROUPS) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "items.jsonl").write_text("".join(json.dumps({"item_id": i, "title": t}) + "\n" for i, t in TITLES.items()))
    (d / "ratings.csv").write_text(ratings)
    (d / "groups.jsonl").write_text("".join(json.dumps(g) + "\n" for g in groups))
    return d


def _without_domain(text: str) -> str:
    return "".join(line.rsplit(",", 1)[0] + "\n" for line in text.splitlines())


def _histories(d: Path, load=None) -> dict:
    """(group, user) -> (history item ids, history_len, avg_rating, most_common_rating)."""
    exs = (load or load_examples.__wrapped__.uncached)(str(d), 2, 50)
    return {(e.id, u["user_id"]): ([h["item_id"] for h in u["history"]], u["history_len"], u["avg_rating"],
                                   u["most_common_rating"]) for e in exs for u in e.data["users"]}


# hand-computed: ratings strictly before the member's query time, in that group's domain only
PER_DOMAIN = {("gA", "u1"): (["i1", "i2", "s"], 3, 4.0, 5.0), ("gA", "u2"): (["i1", "i2"], 2, 3.0, 2.0),
              ("gB", "u1"): (["b1", "s", "b2"], 3, 2.0, 1.0), ("gB", "u3"): (["b1", "b2"], 2, 5.0, 5.0)}
# without the column: every rating of the user before the query time (s twice, file order at t=25)
MIXED = {("gA", "u1"): (["i1", "b1", "i2", "s", "s", "b2"], 6, 3.0, 3.0), ("gA", "u2"): (["i1", "i2"], 2, 3.0, 2.0),
         ("gB", "u1"): (["i1", "b1", "i2", "s", "s", "b2", "qa", "i3"], 8, 3.0, 5.0),  # 5, 1, 3 twice: 5 first
         ("gB", "u3"): (["b1", "b2"], 2, 5.0, 5.0)}


def test_each_group_describes_its_members_by_their_ratings_in_its_domain(tmp_path):
    d = _write(tmp_path / "dom")
    assert _histories(d) == PER_DOMAIN
    exs = load_examples.__wrapped__.uncached(str(d), 2, 50)
    assert [e.meta["domain"] for e in exs] == ["A", "B"]
    u1 = exs[0].data["users"][0]
    assert u1["relative_rating"] == 1.0 and [h["rating"] for h in u1["history"]] == [5.0, 3.0, 4.0]
    assert exs[1].data["users"][0]["relative_rating"] == 0.0  # 2.0 - the B average 2.0 (all ratings: 3.0)
    # BM25 retrieves within the domain's history only ("gift set" is in both; B's copy is rated 2.0)
    assert all(h["item_id"] in ("b1", "s", "b2") for h in exs[1].data["users"][0]["retrieved"])


def test_the_pandas_fallback_reader_slices_by_domain_too(tmp_path, monkeypatch):
    from recbench.tasks.perrec import columnar

    monkeypatch.setattr(columnar, "_arrow_table", lambda path: None)  # as for a file pyarrow cannot read cleanly
    assert _histories(_write(tmp_path / "dom")) == PER_DOMAIN
    d = _write(tmp_path / "empty", RATINGS.replace("u2,i2,4.0,15,A", "u2,i2,4.0,15,"))
    with pytest.raises(DataError, match=r"ratings.csv:8: field 'domain' is empty"):
        load_examples.__wrapped__.uncached(str(d), 2, 50)


def test_domain_codes_of_chunks_with_their_own_dictionaries():
    import numpy as np
    import pyarrow as pa

    from recbench.tasks.perrec.columnar import _domain_codes

    col = pa.chunked_array([pa.array(["B", "A", "B"]).dictionary_encode(), pa.array(["C", "A"]).dictionary_encode()])
    names, codes = _domain_codes(col, Path("r.csv"))
    assert names.tolist() == ["A", "B", "C"] and codes.tolist() == [1, 0, 1, 2, 0] and codes.dtype == np.int16
    names, codes = _domain_codes(pd.Series(["B", "A", "C"]), Path("r.csv"))
    assert names.tolist() == ["A", "B", "C"] and codes.tolist() == [1, 0, 2]
    with pytest.raises(DataError, match=r"^r.csv:5: field 'domain' is empty \(1 line"):
        _domain_codes(pa.chunked_array([pa.array(["A", "A"]).dictionary_encode(),
                                        pa.array(["A", None]).dictionary_encode()]), Path("r.csv"))


def test_without_the_column_every_rating_counts_as_before(tmp_path):
    assert _histories(_write(tmp_path / "mixed", _without_domain(RATINGS))) == MIXED


def test_one_domain_loads_as_the_same_data_without_the_column(tmp_path):
    src = Path(bundled_data("perrec_sample"))
    one = tmp_path / "one"
    shutil.copytree(src, one)
    r = pd.read_csv(src / "ratings.csv.gz", dtype={"user_id": str, "item_id": str})
    r.assign(domain="all").to_csv(one / "ratings.csv.gz", index=False)
    lines = (src / "groups.jsonl").read_text().splitlines()
    (one / "groups.jsonl").write_text("".join(json.dumps({**json.loads(x), "domain": "all"}) + "\n" for x in lines))
    plain = load_examples.__wrapped__.uncached(str(src), 4, 50)
    dom = load_examples.__wrapped__.uncached(str(one), 4, 50)
    assert len(dom) == len(plain) == 120 and all(e.meta.pop("domain") == "all" for e in dom)
    assert [e.meta for e in dom] == [e.meta for e in plain]
    assert [e.data.materialize() for e in dom] == [e.data.materialize() for e in plain]


def test_the_cache_never_serves_one_layout_for_the_other(tmp_path):
    derived_cache.configure(tmp_path / "derived")
    load = load_examples.__wrapped__  # the disk-cached loader
    d = _write(tmp_path / "d")
    assert _histories(d, load) == PER_DOMAIN
    (d / "ratings.csv").write_text(_without_domain(RATINGS))
    assert _histories(d, load) == MIXED
    (d / "ratings.csv").write_text(RATINGS)
    assert _histories(d, load) == PER_DOMAIN
    assert len(list((tmp_path / "derived").glob("perrec_examples-*.pkl"))) == 2


@pytest.mark.parametrize("change,says", [
    (lambda g: g.update(domain="C"), 'it has no value "C"'),
    (lambda g: g.pop("domain"), "the group has no domain"),
], ids=["unknown", "absent"])
def test_a_group_domain_the_ratings_lack_is_refused(tmp_path, change, says):
    groups = json.loads(json.dumps(GROUPS))
    change(groups[1])
    d = _write(tmp_path / "bad", groups=groups)
    with pytest.raises(DataError) as e:
        load_examples.__wrapped__.uncached(str(d), 2, 50)
    msg = str(e.value)
    assert msg.startswith(f"{d / 'ratings.csv'}: field 'domain' does not match {d / 'groups.jsonl'}:2 ")
    assert says in msg and "the file's domains: A, B" in msg and "Fix: " in msg and "\n" not in msg


def test_a_user_without_ratings_in_the_group_domain_and_an_empty_domain_are_refused(tmp_path):
    groups = json.loads(json.dumps(GROUPS))
    groups[1]["users"][1]["user_id"] = "u2"  # u2 rated only in A
    d = _write(tmp_path / "nouser", groups=groups)
    with pytest.raises(DataError, match=r"groups.jsonl:2: user u2 has no ratings in domain 'B' in .*ratings.csv"):
        load_examples.__wrapped__.uncached(str(d), 2, 50)
    d = _write(tmp_path / "empty", RATINGS.replace("u2,i2,4.0,15,A", "u2,i2,4.0,15,"))
    with pytest.raises(DataError, match=r"ratings.csv:8: field 'domain' is empty \(1 line\(s\)\)\. Fix: "):
        load_examples.__wrapped__.uncached(str(d), 2, 50)


# ---- the builder's side: the streamed members' ratings with named categories ---------------------------------------
CAT1 = pd.DataFrame({"user_id": ["u1", "u1", "u2"], "item_id": ["i1", "s", "i1"], "rating": [5.0, 4.0, 2.0],
                     "ts": [10, 25, 5]})
CAT2 = pd.DataFrame({"user_id": ["u1", "u1", "u3"], "item_id": ["b1", "s", "b1"], "rating": [1.0, 2.0, 5.0],
                     "ts": [12, 25, 1]})
NAMES = ["Beauty", "Toys, \"Games\""]  # a name pandas quotes


def _rated(tmp_path, domains):
    read = functools.partial(connect, eng=Engine(), read_only=True)
    return DuckRatings([ratings_db(tmp_path / "a.duckdb", CAT1), ratings_db(tmp_path / "b.duckdb", CAT2)],
                       [["u1", "u2"], ["u1", "u3"]], read, domains)


def _frame(domains=None):
    parts = [f.sort_values(["user_id", "ts", "item_id"]).assign(**({"domain": n} if domains else {}))
             for f, n in zip((CAT1, CAT2), domains or [None, None])]
    return pd.concat(parts, ignore_index=True).rename(columns={"ts": "timestamp"})


def test_named_categories_write_the_domain_column_as_pandas_does(tmp_path):
    _rated(tmp_path, NAMES).write(tmp_path / "d.csv.gz")
    text = gzip.decompress((tmp_path / "d.csv.gz").read_bytes()).decode()
    assert text == _frame(NAMES).to_csv(index=False)
    assert text.splitlines()[0] == "user_id,item_id,rating,timestamp,domain"
    assert 'u1,s,2.0,25,"Toys, ""Games"""\n' in text and "u1,s,4.0,25,Beauty\n" in text
    FrameRatings(_frame(NAMES)).write(tmp_path / "p.csv.gz")
    assert (tmp_path / "d.csv.gz").read_bytes() == (tmp_path / "p.csv.gz").read_bytes()
    # without names: the four columns, as a single-input build writes them
    (tmp_path / "x").mkdir()
    _rated(tmp_path / "x", None).write(tmp_path / "x.csv.gz")
    assert gzip.decompress((tmp_path / "x.csv.gz").read_bytes()).decode() == _frame().to_csv(index=False)


def test_history_tokens_are_per_category_with_names(tmp_path):
    items = pd.DataFrame({"item_id": ["i1", "s", "b1"], "title": ["one", "two words", "three little words"]})
    members = pd.DataFrame({"user_id": ["u1", "u1"], "query_item": ["s", "s"], "domain": NAMES})
    # u1 before s: i1 (1 word) in Beauty; b1 (3 words) in Toys
    assert history_tokens(_rated(tmp_path, NAMES), items, members).tolist() == [1.0, 3.0]
    assert history_tokens(FrameRatings(_frame(NAMES)), items, members).tolist() == [1.0, 3.0]
    # without names (one user history over both): (u1, s) matches both rows, Toys' after Beauty's i1 and s (3 words)
    (tmp_path / "x").mkdir()
    one = members[["user_id", "query_item"]].head(1)
    assert history_tokens(_rated(tmp_path / "x", None), items, one).tolist() == [1.0, 6.0]


@pytest.mark.full
def test_the_cli_refuses_a_domain_mismatch_in_one_line(tmp_path):
    import os
    import subprocess
    import sys

    groups = json.loads(json.dumps(GROUPS))
    groups[1]["domain"] = "Books"
    d = _write(tmp_path / "bad", groups=groups)
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp_path / "runs"), "RECBENCH_CACHE_DIR": str(tmp_path / "cache"),
           "HYDRA_FULL_ERROR": "0"}
    p = subprocess.run([sys.executable, "-m", "recbench", "task=perrec_built", f"task.data_dir={d}", "method=user_avg",
                        "run.progress=false"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("recbench")]
    assert p.returncode == 2 and "Traceback" not in p.stderr + p.stdout and len(lines) == 1, p.stderr
    assert lines[0].startswith(f"recbench: error: {d / 'ratings.csv'}: field 'domain' does not match "
                               f"{d / 'groups.jsonl'}:2 (it has no value \"Books\"; the file's domains: A, B). Fix: ")
    assert not (tmp_path / "runs").exists()
