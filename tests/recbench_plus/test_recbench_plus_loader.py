"""Released-format loading: the demographics file, queries_all.jsonl.gz records, and the bundled sample."""
from __future__ import annotations

import gzip
import json
from collections import Counter

from omegaconf import OmegaConf

from recbench.run.construct import bundled_data
from recbench.tasks.recbench_plus.data import load_query_records, load_released, query_type_of
from recbench.tasks.recbench_plus.task import RecBenchPlusTask

import pytest

pytestmark = pytest.mark.fast


def test_demographics_file_ids_follow_the_official_predictions(shared_data):
    ex = load_released(shared_data / "recbench_plus" / "DemographicsBasedQuery.json")
    assert len(ex) == 279 and ex[0].id == "0-0" and ex[0].meta == {"query_type": "demographics", "domain": "movie", "group_type": "age"}
    assert ex[0].data["gt_titles"] == ["Stand by Me (1986)", "The Breakfast Club (1985)", "The Princess Bride (1987)"]
    preds = (shared_data / "recbench_plus" / "predictions" / "movie-UserBasedQuery_gpt-4o-mini-prediction.jsonl").read_text()
    assert {json.loads(line)["id"] for line in preds.splitlines()} == {e.id for e in ex}


def test_queries_all_records(shared_data):
    path = shared_data / "recbench_plus" / "queries_all.jsonl.gz"
    ex = load_query_records(path)
    with gzip.open(path, "rt") as f:
        assert len(ex) == sum(1 for _ in f) == 27129
    c = Counter((e.meta["domain"], e.meta["query_type"]) for e in ex)
    assert c[("movie", "explicit")] == 4997 and c[("book", "interest")] == 2004 and c[("movie", "demographics")] == 279
    assert len(load_query_records(path, domain="movie", query_type="misinformed")) == 3239
    assert query_type_of("movie-UserBasedQuery_gpt-4o") == "demographics" and query_type_of("ItemBasedQuery") == "interest"


def test_released_condition_records_round_trip(tmp_path):
    rec = {"source_user": "2326", "condition_num": 2, "movieCount": 2, "movieSubset": ["Forrest Gump (1994)", "Saving Private Ryan (1998)"],
           "movieSubsetId": [356, 2028], "sharedRelationships": [["Starring", "Tom Hanks"], ["Genre", "War"]],
           "direct_description_query": "Can you recommend some war movies starring Tom Hanks?",
           "situational_description_query": "I'm looking for a gripping war film with Tom Hanks.", "data_idx": 3862}
    p = tmp_path / "movie-ExplicitQuery.json"
    p.write_text(json.dumps([rec]))
    (e,) = load_released(p)
    assert e.id == "3862" and e.meta == {"query_type": "explicit", "domain": "movie", "condition_num": 2}
    assert e.data["query"].startswith("I'm looking") and e.data["gt_ids"] == [356, 2028]
    book = {"source_user": "7", "condition_num": 1, "bookSubset": ["Emma", "Persuasion"], "sharedRelationships": [["WRITTEN_BY", "Jane Austen"]],
            "multihop_info": [{"book": "Sense and Sensibility", "relation": "WRITTEN_BY", "person": "Jane Austen"}],
            "misinformed": [], "query": "Books by the author of Sense and Sensibility?", "data_idx": 0}
    p = tmp_path / "book-MisinformedQuery.json"
    p.write_text(json.dumps([book]))
    (e,) = load_released(p)
    assert e.meta["domain"] == "book" and e.meta["query_type"] == "misinformed" and e.data["gt_titles"] == ["Emma", "Persuasion"]


def test_bundled_sample_has_every_type_interleaved():
    cfg = OmegaConf.create({"name": "recbench_plus", "domain": "movie", "types": None,
                            "data": {"kind": "bundle", "path": bundled_data("recbench_plus_sample")}})
    task = RecBenchPlusTask(cfg)
    ex = task.load()
    assert [e.meta["query_type"] for e in ex[:5]] == ["explicit", "implicit", "misinformed", "interest", "demographics"]
    assert Counter(e.meta["query_type"] for e in ex) == {t: 12 for t in ["explicit", "implicit", "misinformed", "interest", "demographics"]}
    meta = json.loads((task.cfg.data.path and __import__("pathlib").Path(task.cfg.data.path) / "meta.json").read_text())
    assert meta["synthetic"] is True
    for e in ex:  # every bundled ground truth re-checks against the bundled KG
        if e.data["conditions"]:
            assert all(task.kg.satisfies(str(i), [tuple(c) for c in e.data["conditions"]]) for i in e.data["gt_ids"])
