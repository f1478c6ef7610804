"""Query generation on the real ML-100k ratings + named KG: every type is produced and every ground truth re-checks."""
from __future__ import annotations

import pytest

from recbench.kg.graph import PERSON_RELATIONS
from recbench.kg.loaders import load_ml100k, read_atomic
from recbench.kg.queries import QUERY_TYPES, BuildConfig, QueryBuilder, render_query, write_situational
from recbench.tasks.recbench_plus.data import histories_from_ratings, released_examples
from tests.doubles import ScriptedBackend

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def ml100k(shared_data):
    folder = shared_data / "ml-100k"
    kg = load_ml100k(folder)
    hist = histories_from_ratings(read_atomic(folder / "ml-100k.inter"))
    users = read_atomic(folder / "ml-100k.user")
    built = QueryBuilder(kg, hist, BuildConfig(per_type=20, seed=0), users=users).build()
    return kg, hist, built


def test_every_query_type_is_built(ml100k):
    _, _, built = ml100k
    counts = {t: len(released_examples(recs, t)) for t, recs in built.items()}
    print("ML-100k queries per type:", counts)
    assert set(counts) == set(QUERY_TYPES) and all(n >= 10 for n in counts.values()), counts
    nums = {r["condition_num"] for r in built["explicit"]}
    assert nums == {1, 2, 3}, nums  # 1 to 3 shared conditions


def test_released_field_names(ml100k):
    _, _, b = ml100k
    cond = {"source_user", "condition_num", "movieCount", "movieSubset", "movieSubsetId", "sharedRelationships", "data_idx"}
    assert all(cond | {"direct_description_query", "situational_description_query"} <= set(r) for r in b["explicit"])
    assert all(cond | {"multihop_info", "direct_description_query"} <= set(r) for r in b["implicit"])
    assert all(cond | {"multihop_info", "misinformed", "query"} <= set(r) for r in b["misinformed"])
    for t in ("interest", "demographics"):
        assert all("query & ground true" in r and all({"reason", "query", "movie subset"} <= set(q) for q in r["query & ground true"])
                   for r in b[t])
    assert all({"group_type", "group", "top_10_movies"} <= set(r) for r in b["demographics"])


def test_every_ground_truth_item_rechecked_against_the_kg(ml100k):
    kg, hist, b = ml100k
    for t in ("explicit", "implicit", "misinformed"):
        for r in b[t]:
            conds = [tuple(c) for c in r["sharedRelationships"]]
            ids = [str(i) for i in r["movieSubsetId"]]
            assert len(ids) == r["movieCount"] == len(r["movieSubset"]) >= 2 and r["condition_num"] == len(conds)
            for i, title in zip(ids, r["movieSubset"]):
                assert kg.satisfies(i, conds), (t, r["data_idx"], i, conds)
                assert i in hist[r["source_user"]]  # official default: GT = the source user's matching history items
                assert kg.display(i) == title
            # the subset is COMPLETE: no other history item satisfies the conditions
            assert set(kg.items_satisfying(conds, hist[r["source_user"]])) == set(ids)
    for r in b["implicit"]:
        assert r["multihop_info"]
        for h in r["multihop_info"]:  # each multi-hop reference is a true KG fact, outside the answer set
            ref = kg.resolve(h["movie"])
            assert kg.has_fact(ref, h["relation"], h["person"]) and int(ref) not in r["movieSubsetId"]
            assert [h["relation"], h["person"]] in r["sharedRelationships"] and h["relation"] in PERSON_RELATIONS
            assert h["person"] not in r["direct_description_query"]  # the person is only referred to
    for r in b["misinformed"]:
        for m in r["misinformed"]:  # the premise is false, the original fact is true
            ref = kg.resolve(m["movie"])
            assert kg.has_fact(ref, m["relation"], m["original person"])
            assert not kg.has_fact(ref, m["relation"], m["person"]) and m["person"] != m["original person"]
            assert m["person"] in r["query"] and m["original person"] not in r["query"]
    for t in ("interest", "demographics"):
        for r in b[t]:
            for q in r["query & ground true"]:
                conds = [tuple(c) for c in q["conditions"]]
                for i in q["movie subset id"]:
                    assert kg.satisfies(str(i), conds)
                    if t == "interest":
                        assert str(i) in hist[r["source_user"]]


def test_catalogue_scope_is_a_superset(ml100k):
    kg, hist, b = ml100k
    r = b["explicit"][0]
    wide = QueryBuilder(kg, hist, BuildConfig(per_type=3, seed=0, scope="catalogue")).explicit()
    for w in wide:
        conds = [tuple(c) for c in w["sharedRelationships"]]
        assert {str(i) for i in w["movieSubsetId"]} == set(kg.items_satisfying(conds))
    assert r["movieSubsetId"]


def test_template_texts_are_deterministic_and_llm_rewrite_goes_through_backend(ml100k):
    kg, hist, b = ml100k
    again = QueryBuilder(kg, hist, BuildConfig(per_type=20, seed=0)).explicit()
    assert [r["direct_description_query"] for r in again] == [r["direct_description_query"] for r in b["explicit"]]
    assert render_query("explicit.j2", noun="movie", conditions=[("Starring", "Tom Hanks"), ("Genre", "War")]) == \
        "Can you recommend some movies starring Tom Hanks and in the War genre?"
    recs = [dict(r) for r in b["explicit"][:3]] + [dict(b["misinformed"][0])]
    backend = ScriptedBackend(lambda req: "LLM: " + req.messages[-1][1].split("Request: ")[1])
    assert write_situational(recs, backend) == 4 and backend.calls == 4
    assert all(r["situational_description_query"].startswith("LLM: ") for r in recs[:3]) and recs[3]["query"].startswith("LLM: ")
    assert all(r["query_source"] == "llm" for r in recs)
