"""Resolving model answers against the candidate list: ids, titles, fuzzy titles; invalid items are counted."""
from __future__ import annotations

from recbench.tasks.llmrec.resolve import ItemResolver

import pytest

pytestmark = pytest.mark.fast

TITLES = {"1": "OPI Nail Lacquer, Simmer and Shimmer", "2": "Maybelline Great Lash Mascara",
          "3": "Neutrogena Hydro Boost Water Gel", "4": "Dove Beauty Bar Soap", "5": "CeraVe Moisturizing Cream"}
CANDS = ["1", "2", "3"]


def test_clean_id_list_is_ok():
    r = ItemResolver(TITLES).resolve("[2, 1, 3]", CANDS)
    assert r.ranked == ["2", "1", "3"] and r.status == "ok"
    assert (r.named, r.in_candidates, r.hallucinated, r.out_of_candidate, r.duplicate) == (3, 3, 0, 0, 0)


def test_titles_fuzzy_titles_and_invalid_items_are_counted():
    text = ("Sure! ['Maybelline Great Lash Mascara', 'Neutrogena Hydro Boost Water Gell', 'Dove Beauty Bar Soap', "
            "'Glitter Unicorn Shampoo', 'item_2', '3']")
    r = ItemResolver(TITLES).resolve(text, CANDS)
    assert r.ranked == ["2", "3"]
    assert r.status == "repaired"
    assert r.fuzzy == 1  # "Gell" typo
    assert (r.named, r.in_candidates, r.out_of_candidate, r.hallucinated, r.duplicate) == (6, 2, 1, 1, 2)
    kinds = [it["kind"] for it in r.items]
    assert kinds == ["in_candidates", "in_candidates", "out_of_candidate", "hallucinated", "duplicate", "duplicate"]


def test_id_with_title_and_comma_separated_answers():
    r = ItemResolver(TITLES).resolve("3: Neutrogena Hydro Boost, 1: OPI Nail Lacquer", CANDS)
    assert r.ranked == ["3", "1"] and r.status == "repaired"
    r = ItemResolver(TITLES).resolve("1. Maybelline Great Lash Mascara\n2. OPI Nail Lacquer, Simmer and Shimmer", CANDS)
    assert r.ranked == ["2", "1"]


def test_unparseable_or_all_invalid_answers_fail_but_are_recorded():
    r = ItemResolver(TITLES).resolve("I cannot recommend anything.", CANDS)
    assert r.status == "failed" and r.ranked == []
    r = ItemResolver(TITLES).resolve("[4, 5, 99]", CANDS)
    assert r.status == "failed" and r.ranked == []
    assert (r.named, r.out_of_candidate, r.hallucinated) == (3, 2, 1)


def test_ids_in_free_text_are_read_when_no_list_is_given():
    titles = {str(i): f"Product number {i}" for i in range(1, 200)}
    cands = ["101", "102", "103", "150"]
    r = ItemResolver(titles).resolve("10:\n\nThe chosen candidate IDs are: 150, 102, 7, 150", cands)
    assert r.ranked == ["150", "102"] and r.status == "repaired"
    assert (r.out_of_candidate, r.duplicate) == (2, 1)  # "10" and "7" are real items outside the list; 150 twice
    r = ItemResolver(titles).resolve("10: 10:10:10:10", cands)
    assert r.status == "failed" and r.ranked == []
