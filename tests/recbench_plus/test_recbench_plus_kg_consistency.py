"""A RecBench+ bundle whose parts disagree: a KG fact about an item the catalogue lacks and a query condition that no
item of the KG holds (an unknown entity or relation) are refused, naming the file and line or record; a fact with a
relation outside the RecBench+ schema is kept with a counted one-line warning (docs/recbench_plus.md, "Bad input")."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from recbench.api.errors import DataError
from recbench.run.construct import build_task
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast
EXPLICIT = "movie-ExplicitQuery.json"


def _load(folder: Path):
    return build_task(compose_cfg(["task=recbench_plus", "method=assistant", f"task.data.path={folder}"])).load()


def _add_fact(d: Path, line: str) -> int:
    p = d / "kg.tsv"
    lines = p.read_text().splitlines()
    lines.insert(4, line)  # becomes line 5 of the file
    p.write_text("\n".join(lines) + "\n")
    return 5


def _condition(d: Path, cond: list[str]) -> str:
    p = d / EXPLICIT
    recs = json.loads(p.read_text())
    recs[1]["sharedRelationships"] = [cond]
    p.write_text(json.dumps(recs))
    return str(recs[1]["data_idx"])


def test_a_fact_about_an_unknown_item_is_refused_naming_the_line(bundle):
    line = _add_fact(bundle, "99999\tGenre\tDrama")
    with pytest.raises(DataError, match=rf"kg.tsv:{line}: a fact about item '99999', which .*items.csv does not list"):
        _load(bundle)


def test_a_relation_outside_the_schema_is_kept_with_a_counted_warning(bundle, capsys):
    _add_fact(bundle, "1\tFilmed_in\tLisbon")
    task = build_task(compose_cfg(["task=recbench_plus", "method=assistant", f"task.data.path={bundle}"]))
    assert task.load()
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("recbench")]
    assert len(err) == 1 and err[0].startswith("recbench: warning: ") and "kg.tsv: 1 of " in err[0]
    assert "facts use relations outside the RecBench+ schema (Filmed_in); kept, their targets typed 'thing'" in err[0]
    assert task.kg.has_fact("1", "Filmed_in", "Lisbon")


def test_a_query_naming_an_entity_missing_from_the_kg_is_refused(bundle):
    idx = _condition(bundle, ["Starring", "Nobody Atall"])
    with pytest.raises(DataError, match=rf"{EXPLICIT}: record data_idx {idx}: the query's condition names entity "
                                        r"'Nobody Atall' under Starring, which no item of kg.tsv has"):
        _load(bundle)


def test_a_query_naming_an_unknown_relation_is_refused_listing_the_relations(bundle):
    idx = _condition(bundle, ["Filmed_in", "Lisbon"])
    with pytest.raises(DataError, match=rf"{EXPLICIT}: record data_idx {idx}: the query's condition names relation "
                                        r"'Filmed_in', which no fact of kg.tsv uses \(relations: Directed_by, Genre, "
                                        r"Starring, Written_by\)"):
        _load(bundle)


def _subset_ids(d: Path, name: str, set_ids) -> None:
    p = d / name
    recs = json.loads(p.read_text())
    set_ids(recs)
    p.write_text(json.dumps(recs))


def test_subset_ids_the_catalogue_does_not_list_are_refused(bundle):
    """movieSubsetId naming items items.csv lacks: strict_* would score the query against ids no title resolves to."""
    _subset_ids(bundle, EXPLICIT, lambda r: r[1].update(movieSubsetId=[r[1]["movieSubsetId"][0]] + list(range(90001, 90007))))
    with pytest.raises(DataError, match=rf"{EXPLICIT}: record data_idx 1: movieSubsetId lists 6 id\(s\) that "
                                        r".*items.csv does not list \(90001, 90002, 90003, 90004, 90005, \.\.\.\)\. "
                                        r"Fix the record's ids, or add the items to .*items.csv$"):
        _load(bundle)


def test_an_interest_query_s_unknown_subset_id_names_record_and_query(bundle):
    name = "movie-InterestBasedQuery.json"
    _subset_ids(bundle, name, lambda r: r[2]["query & ground true"][0].update({"movie subset id": [77777]}))
    with pytest.raises(DataError, match=rf"{name}: record 3 query 1: 'movie subset id' lists 1 id\(s\) that "
                                        r".*items.csv does not list \(77777\)"):
        _load(bundle)


def test_released_files_ids_are_checked_against_task_data_catalogue(tmp_path):
    (tmp_path / "movies.dat").write_text("1::Toy Story (1995)::Animation\n2::Heat (1995)::Crime\n")
    rec = {"data_idx": 0, "movieSubset": ["Toy Story (1995)", "Nowhere (2001)"], "movieSubsetId": [1, 3],
           "sharedRelationships": [["Genre", "Animation"]], "direct_description_query": "An animated film?"}
    path = tmp_path / "movie-ExplicitQuery.json"
    path.write_text(json.dumps([rec]))
    over = ["task=recbench_plus_released", "method=assistant", f"task.data.path={path}"]
    assert len(build_task(compose_cfg(over)).load()) == 1  # without a catalogue nothing to check against
    with pytest.raises(DataError, match=r"movie-ExplicitQuery.json: record data_idx 0: movieSubsetId lists 1 id\(s\) "
                                        r"that .*movies.dat does not list \(3\)"):
        build_task(compose_cfg(over + [f"task.data.catalogue={tmp_path / 'movies.dat'}"])).load()
    rec["movieSubsetId"] = [1, 2]
    path.write_text(json.dumps([rec]))
    assert len(build_task(compose_cfg(over + [f"task.data.catalogue={tmp_path / 'movies.dat'}"])).load()) == 1


@pytest.mark.parametrize("content", ["item_id\trelation\ttarget\n", "item_id\trelation\ttarget\n\n\n"])
def test_a_kg_without_facts_says_so(bundle, content):
    (bundle / "kg.tsv").write_text(content)
    with pytest.raises(DataError, match=r"kg.tsv: kg.tsv holds no facts \(a header only\).*Fix: restore the file"):
        _load(bundle)
