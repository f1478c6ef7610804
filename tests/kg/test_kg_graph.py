"""The KG layer: typed graph, loaders (named TSV, RecBole atomic, item tables, movies.dat), title resolution, shared relations."""
from __future__ import annotations

import networkx as nx
import pandas as pd
import pytest

from recbench.kg.conditions import ExtractionConfig, shared_relations
from recbench.kg.graph import KnowledgeGraph, display_title, normalize_title, split_year
from recbench.kg.loaders import add_item_table, load_ml100k, load_movielens_dat

pytestmark = pytest.mark.fast


def small_kg() -> KnowledgeGraph:
    kg = KnowledgeGraph()
    add_item_table(kg, pd.DataFrame([
        {"id": "1", "title": "Usual Suspects, The", "year": "1995", "genres": ["Crime", "Thriller"]},
        {"id": "2", "title": "Seven (Se7en) (1995)", "year": "", "genres": ["Thriller"]},
        {"id": "3", "title": "Toy Story", "year": "1995", "genres": ["Animation"]},
        {"id": "4", "title": "Fight Club", "year": "1999", "genres": ["Drama", "Thriller"]},
    ]), id_col="id", title_col="title", year_col="year", attributes={"genres": "Genre"})
    for i, rel, t in [("1", "Starring", "Kevin Spacey"), ("2", "Starring", "Kevin Spacey"), ("2", "Starring", "Brad Pitt"),
                      ("4", "Starring", "Brad Pitt"), ("2", "Directed_by", "David Fincher"), ("4", "Directed_by", "David Fincher"),
                      ("1", "Directed_by", "Bryan Singer")]:
        kg.add_fact(i, rel, t)
    return kg


def test_graph_is_typed_multidigraph_and_resolves_titles_both_ways():
    kg = small_kg()
    assert isinstance(kg.g, nx.MultiDiGraph)
    assert kg.g.nodes["person:Kevin Spacey"]["type"] == "person" and kg.g.nodes["genre:Thriller"]["type"] == "genre"
    assert kg.title("1") == "Usual Suspects, The (1995)" and kg.display("1") == "The Usual Suspects (1995)"
    assert kg.title_year("2") == ("Seven (Se7en)", 1995)
    for t in ["The Usual Suspects (1995)", "Usual Suspects, The", "the usual suspects", "Usual Suspects"]:
        assert kg.resolve(t) == "1", t
    assert kg.resolve("Seven") == "2" and kg.resolve("Toy Story (1995)") == "3"
    assert kg.resolve("Toy Story (1994)") == "3"  # wrong year falls back to the unique title
    assert kg.resolve("Nonexistent Movie") is None
    assert split_year("Fight Club (1999)") == ("Fight Club", 1999) and display_title("Birdcage, The") == "The Birdcage"
    assert normalize_title("Usual Suspects, The (1995)") == normalize_title("The Usual Suspects")


def test_condition_checks_and_items_satisfying():
    kg = small_kg()
    assert kg.satisfies("2", [("Starring", "Brad Pitt"), ("Directed_by", "David Fincher")])
    assert not kg.satisfies("1", [("Starring", "Brad Pitt")])
    assert kg.items_satisfying([("Starring", "Kevin Spacey"), ("Genre", "Thriller")]) == ["1", "2"]
    assert kg.items_satisfying([("Starring", "Brad Pitt")], among=["4", "1"]) == ["4"]


def test_shared_relations_hand_checked():
    kg = small_kg()
    found = {s.conditions: s.items for s in shared_relations(kg, ["1", "2", "3", "4"], ExtractionConfig(min_subset=2))}
    assert found[(("Starring", "Kevin Spacey"),)] == ("1", "2")
    assert found[(("Genre", "Thriller"),)] == ("1", "2", "4")
    pairs = {frozenset(c): i for c, i in found.items()}
    assert pairs[frozenset({("Directed_by", "David Fincher"), ("Starring", "Brad Pitt")})] == ("2", "4")
    assert pairs[frozenset({("Directed_by", "David Fincher"), ("Starring", "Brad Pitt"), ("Genre", "Thriller")})] == ("2", "4")
    assert all(len(i) >= 2 for i in found.values()) and all(1 <= len(c) <= 3 for c in found)
    # at most one Genre condition in a multi-condition set
    assert not any(sum(r == "Genre" for r, _ in c) > 1 for c in found if len(c) > 1)


def test_ml100k_named_kg(shared_data):
    kg = load_ml100k(shared_data / "ml-100k")
    st = kg.stats()
    assert st == _networkx_stats(kg) and list(st["edges"]) == list(_networkx_stats(kg)["edges"])
    assert st["nodes"]["item"] == 1682
    assert set(st["edges"]) == {"Directed_by", "Written_by", "Starring", "Genre", "Age_rating"}
    assert kg.resolve("The Usual Suspects (1995)") == "12" and kg.display("12") == "The Usual Suspects (1995)"
    assert kg.has_fact("1", "Directed_by", "John Lasseter") and kg.has_fact("1", "Starring", "Tom Hanks")
    assert "Children's" in kg.targets("1", "Genre")
    # title -> id -> title round trip for every item (ml-100k has a few duplicate entries of one film: same title/year)
    for i in kg.items():
        assert kg.title_year(kg.resolve(kg.title(i))) == kg.title_year(i)
        assert kg.title_year(kg.resolve(kg.display(i))) == kg.title_year(i)


def test_recbole_atomic_kg_and_movies_dat(shared_data):
    kg = load_ml100k(shared_data / "ml-100k", named=False, recbole=True)
    edges = kg.stats()["edges"]
    assert edges["Starring"] > 30000 and edges["Directed_by"] > 1000 and "Language" in edges
    ml1m = load_movielens_dat(shared_data / "recbench_plus" / "movies.dat")
    assert len(ml1m.items()) == 3883
    assert ml1m.resolve("The Breakfast Club (1985)") == "1968" and ml1m.title("1968") == "Breakfast Club, The (1985)"
    assert "Comedy" in ml1m.targets("1", "Genre")


def _networkx_stats(kg: KnowledgeGraph) -> dict:
    """Node counts per type and edge counts per relation as networkx walks kg.g (the reference for kg.stats())."""
    types: dict = {}
    for _, d in kg.g.nodes(data=True):
        types[d["type"]] = types.get(d["type"], 0) + 1
    rels: dict = {}
    for _, _, k in kg.g.edges(keys=True):
        rels[k] = rels.get(k, 0) + 1
    return {"nodes": types, "edges": rels}


def test_dict_store_agrees_with_its_networkx_view():
    kg = small_kg()
    kg.add_fact("5", "Starring", "Brad Pitt")  # a fact before its item: the item node exists untitled, not in items()
    kg.add_fact("2", "Starring", "Brad Pitt")  # a repeated fact is one edge
    assert kg.items() == ["1", "2", "3", "4"]
    kg.add_item("5", "Se7en Again (2001)")
    assert kg.items() == ["1", "2", "3", "4", "5"]  # the node keeps the place of its first fact
    st = kg.stats()
    assert st == _networkx_stats(kg) and list(st["edges"]) == list(_networkx_stats(kg)["edges"])
    assert st["edges"] == {"Genre": 6, "Starring": 5, "Directed_by": 3} and st["nodes"]["item"] == 5
    assert kg.g.number_of_edges() == 14 and kg.g.nodes["item:5"]["title"] == "Se7en Again"
    assert kg.relations() == ["Directed_by", "Genre", "Starring"]
    assert kg.entities("person") == ["Kevin Spacey", "Brad Pitt", "David Fincher", "Bryan Singer"]
    assert kg.items_with("Starring", "Brad Pitt") == ["2", "4", "5"]


def test_bulk_facts_equal_one_by_one():
    triples = [("1", "Starring", "A"), ("2", "Starring", "A"), ("1", "Genre", "Drama"), ("1", "Starring", "A"),
               ("3", "Directed_by", "B"), ("2", "Written_by", "A")]
    one, bulk = KnowledgeGraph(), KnowledgeGraph()
    for t in triples:
        one.add_fact(*t)
    bulk.add_facts(iter(triples))
    for kg in (one, bulk):
        assert kg.facts("1") == [("Starring", "A"), ("Genre", "Drama")] and kg.items_with("Starring", "A") == ["1", "2"]
        assert kg.stats() == _networkx_stats(kg) == {"nodes": {"item": 3, "person": 2, "genre": 1},
                                                     "edges": {"Starring": 2, "Genre": 1, "Directed_by": 1, "Written_by": 1}}
