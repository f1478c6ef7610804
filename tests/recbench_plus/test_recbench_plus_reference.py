"""RecBench+ reference rows without a model (popular_match, bm25_items): hand-computed rankings on a tiny KG, the
bundled sample end to end with the popularity ranking recomputed from the raw files, no model built, and their own
table in the report."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from recbench.run.construct import bundled_data

from recbench.run.evaluate import run_from_config
from recbench.cli.catalogue import methods_for_task
from recbench.kg.graph import KnowledgeGraph
from recbench.api.errors import ConfigError
from recbench.report import build_report
from recbench.tasks.recbench_plus.reference import BM25Items, PopularMatch
from recbench.api.types import Example
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast

SAMPLE = Path(bundled_data("recbench_plus_sample"))


def _tiny_task(histories: dict[str, list[str]]) -> SimpleNamespace:
    kg = KnowledgeGraph("movie")
    for iid, title, year, facts in [("1", "Alpha Road", 1990, [("Genre", "Horror"), ("Directed_by", "Ann Lee")]),
                                    ("2", "Beta Sea", 1991, [("Genre", "Comedy"), ("Directed_by", "Bob Stone")]),
                                    ("3", "Gamma Sky", 1992, [("Genre", "Horror"), ("Directed_by", "Bob Stone")]),
                                    ("4", "Delta Field", 1993, [("Genre", "Drama")])]:
        kg.add_item(iid, title, year)
        for rel, target in facts:
            kg.add_fact(iid, rel, target)
    return SimpleNamespace(kg=kg, histories=histories, has_histories=lambda: bool(histories),
                           cfg=SimpleNamespace(data=SimpleNamespace(kind="bundle")))


def _answer(method, query: str, user: str = "") -> list[str]:
    gen = method.run(Example(id="q", data={"query": query, "source_user": user}))
    with pytest.raises(StopIteration) as stop:
        next(gen)
    out = stop.value.value
    assert out.parse_status == "ok" and out.prediction == " [SEP] ".join(out.details["titles"])
    return out.details["titles"]


def test_popular_match_ranks_by_named_entities_then_ratings():
    # ratings per item: 1 -> 1, 2 -> 3, 3 -> 2, 4 -> 5
    task = _tiny_task({"u1": ["1", "2", "3", "4"], "u2": ["2", "3", "4"], "u3": ["2", "4"], "u4": ["4"], "u5": ["4"]})
    m = PopularMatch(task, {"name": "popular_match", "n": 3})
    m.prepare([])
    # Bob Stone + Horror: item 3 has both; items 2 (3 ratings) and 1 (1 rating) one each; 4 none
    assert _answer(m, "Any horror movies directed by Bob Stone?") == ["Gamma Sky (1992)", "Beta Sea (1991)",
                                                                      "Alpha Road (1990)"]
    # nothing named: plain popularity
    assert _answer(m, "Something fun for tonight?") == ["Delta Field (1993)", "Beta Sea (1991)", "Gamma Sky (1992)"]
    # a title the query names is never recommended back
    assert "Gamma Sky (1992)" not in _answer(m, "I loved Gamma Sky. More by Bob Stone?")
    assert _answer(m, "I loved Gamma Sky. More by Bob Stone?")[0] == "Beta Sea (1991)"


def test_popular_match_leaves_the_asking_users_ratings_out():
    # items 2 and 3 have 2 ratings each (tie: catalogue order); without u3's rating of item 2, item 3 leads
    m = PopularMatch(_tiny_task({"u1": ["2", "3"], "u2": ["3"], "u3": ["2"]}), {"name": "popular_match", "n": 3})
    m.prepare([])
    assert _answer(m, "Anything?") == ["Beta Sea (1991)", "Gamma Sky (1992)", "Alpha Road (1990)"]
    assert _answer(m, "Anything?", user="u3") == ["Gamma Sky (1992)", "Beta Sea (1991)", "Alpha Road (1990)"]


def test_bm25_items_finds_the_item_whose_facts_the_query_names():
    m = BM25Items(_tiny_task({}), {"name": "bm25_items", "n": 2})
    m.prepare([])
    assert _answer(m, "movies directed by Ann Lee")[0] == "Alpha Road (1990)"
    assert _answer(m, "a drama please")[0] == "Delta Field (1993)"


def test_popular_match_without_ratings_is_refused_naming_the_alternative():
    m = PopularMatch(_tiny_task({}), {"name": "popular_match", "n": 3})
    with pytest.raises(ConfigError, match="bm25_items"):
        m.prepare([])


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rbref")
    for method in ("popular_match", "bm25_items"):
        cfg = compose_cfg([f"cache.path={root / 'c.sqlite'}", "run.progress=false", "run.bootstrap_resamples=50",
                           "task=recbench_plus", f"method={method}", "model=gpt4o"])  # a model no reference may build
        run_from_config(cfg, root / "runs" / method)
    cfg = compose_cfg([f"cache.path={root / 'c.sqlite'}", "run.progress=false", "run.bootstrap_resamples=50",
                       "task=recbench_plus", "method=assistant", "model=gpt4o"])
    run_from_config(cfg, root / "runs" / "assistant", backend=ScriptedBackend(lambda r: "Nowhere [SEP] Other"))
    return root / "runs"


def test_bundled_sample_end_to_end_without_a_model(runs):
    titles = pd.read_csv(SAMPLE / "items.csv", dtype=str)
    display = {r.item_id: f"{r.title} ({r.year})" for r in titles.itertuples()}
    ratings = pd.read_csv(SAMPLE / "ratings.csv", dtype=str)
    asker = str(json.loads((SAMPLE / "movie-ExplicitQuery.json").read_text())[0]["source_user"])
    counts = ratings[ratings.user_id != asker]["item_id"].value_counts()  # the asking user's own ratings left out
    kg = pd.read_csv(SAMPLE / "kg.tsv", sep="\t", dtype=str)
    order = {iid: k for k, iid in enumerate(titles["item_id"])}
    for method in ("popular_match", "bm25_items"):
        m = json.loads((runs / method / "metrics.json").read_text())
        assert m["complete"] and m["model"] == "none" and m["this_invocation"]["model_loaded"] is False
        assert m["counts"]["model_calls"] == 0 and m["counts"]["parse_ok"] == m["counts"]["examples"] == 60
        recs = [json.loads(x) for x in (runs / method / "samples.jsonl").read_text().splitlines()]
        for r in recs:
            got = r["prediction"].split(" [SEP] ")
            assert len(got) == 10 == len(set(got)) and set(got) <= set(display.values())
            assert not set(got) & {display[i] for i in r["details"]["named_in_query"]}
        if method == "popular_match":  # "movies starring Olga Castellano": her films, most-rated first, lead
            q = next(r for r in recs if r["id"] == "explicit:0")
            hers = kg[(kg.relation == "Starring") & (kg.target == "Olga Castellano")]["item_id"]
            want = sorted(hers, key=lambda i: (-counts.get(i, 0), order[i]))
            assert q["prediction"].split(" [SEP] ")[: len(want)] == [display[i] for i in want]
            assert q["metrics"]["recall"] == 1.0  # both ground-truth titles are her films


@pytest.mark.full  # three runs over the whole bundled sample, then the report
def test_reference_rows_get_their_own_report_table(runs):
    tables = {t.id: t for t in build_report([runs]).tables}
    assert [lbl for lbl, _ in tables["recbench-plus"].rows] == [["gpt4o", "without history"]]
    ref = tables["recbench-plus-reference"]
    assert [lbl for lbl, _ in ref.rows] == [["bm25_items"], ["popular_match"]]
    m = json.loads((runs / "popular_match" / "metrics.json").read_text())
    cell = dict(zip(ref.columns, ref.rows[1][1]))[("all", "recall")]
    assert cell.mean == pytest.approx(m["metrics"]["recall"]["mean"])


def test_listed_for_recbench_plus_only():
    assert {"popular_match", "bm25_items"} <= set(methods_for_task("recbench_plus"))
    assert not {"popular_match", "bm25_items"} & set(methods_for_task("perrec"))
