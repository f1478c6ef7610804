"""Official RecBench+ metrics on hand-computed fixtures, CMR, the strict catalogue-resolved variant, and scoring."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from recbench.kg.graph import KnowledgeGraph
from recbench.kg.loaders import add_item_table
from recbench.tasks.recbench_plus import metrics as M

pytestmark = pytest.mark.fast

L2, L3, L4 = math.log2(2), math.log2(3), math.log2(4)


def test_movie_parsing_strips_quotes_spaces_and_trailing_year():
    assert M.split_titles(' "Heat (1995)" [SEP] \'Alien\'[SEP]Up (2009) [SEP] 2001: A Space Odyssey (1968)') == \
        ["Heat", "Alien", "Up", "2001: A Space Odyssey"]
    assert M.split_titles("Just one title") == ["Just one title"]
    assert M.ftr("Just one title") and not M.ftr("A [SEP] B")


def test_book_parsing_keeps_the_official_character_strip():
    # str.strip with the CHARACTERS of "Recommended books (separated by [SEP]):" (R e c o m n d b k s ( p a t y [ S E P ] ) :
    # and space): both ends are eaten up to the first character outside that set; pieces are not trimmed
    assert M.split_titles("Dune [SEP] Emma", "book") == ["Du"]
    assert M.split_titles("Rebecca [SEP] Persuasion", "book") == ["uasi"]
    assert M.split_titles("Hamlet [SEP] Ulysses [SEP] Vile Bodies", "book") == ["Hamlet ", " Ulysses ", " Vile Bodi"]


def test_official_recall_precision_ndcg_hand_computed():
    gt = ["Heat (1995)", "Alien (1979)", "Up (2009)"]
    # "Heat" vs "Heat (1995)": ratio 2*4/15 = 0.533 < 0.8 -> no match; "Alien (1979)" exact after the year is stripped? no:
    # predictions lose their year, GT keeps it: "Alien" vs "Alien (1979)" = 10/17 = 0.588 -> miss. Long titles match:
    gt = ["The Breakfast Club (1985)", "The Princess Bride (1987)", "Stand by Me (1986)"]
    s = M.official_scores("The Princess Bride [SEP] Heat [SEP] The Breakfast Club [SEP] Stand by Me", gt)
    # matched list: [Princess Bride, Heat, Breakfast Club, 'Stand by Me' (0.759 < 0.8: miss)]
    assert s["ftr"] is False
    assert s["recall"] == pytest.approx(2 / 3) and s["precision"] == pytest.approx(2 / 4)
    dcg = 1 / L2 + 1 / L4
    idcg = 1 / L2 + 1 / L3 + 1 / L4
    assert s["ndcg"] == pytest.approx(dcg / idcg)


def test_official_ndcg_counts_repeats_and_k_pads_with_none():
    gt = ["The Princess Bride (1987)"]
    s = M.official_scores("The Princess Bride [SEP] The Princess Bride (1987)", gt)
    assert s["recall"] == 1.0 and s["precision"] == 0.5 and s["ndcg"] == pytest.approx(1 + 1 / L3)  # > 1, as official
    s = M.official_scores("The Princess Bride [SEP] Heat", gt, k=5)
    assert s["precision"] == pytest.approx(1 / 5)  # padded to K with 'none'
    s = M.official_scores("Heat [SEP] Alien [SEP] The Princess Bride", gt, k=2)
    assert s["recall"] == 0.0  # cut to the first K
    assert M.official_scores("", []) == {"ftr": True, "recall": 0, "precision": 0.0, "ndcg": 0.0}


def kg4() -> KnowledgeGraph:
    kg = KnowledgeGraph()
    add_item_table(kg, pd.DataFrame([{"id": str(i), "t": t} for i, t in
                                     [(1, "Heat (1995)"), (2, "Collateral (2004)"), (3, "Alien (1979)"), (4, "Thief (1981)")]]),
                   id_col="id", title_col="t")
    for i in ("1", "2", "4"):
        kg.add_fact(i, "Directed_by", "Michael Mann")
    return kg


def test_condition_queries_take_the_max_with_id_matching_and_compute_cmr():
    kg = kg4()
    titles = {d["title"]: int(i) for i, d in kg.iter_items()}
    name2id = lambda n: titles.get(M._TRAILING_YEAR.sub("", n).strip())  # noqa: E731
    check = lambda i: kg.satisfies(str(i), [("Directed_by", "Michael Mann")])  # noqa: E731
    s = M.official_scores("Heat [SEP] Thief [SEP] Alien [SEP] Made Up", ["Heat (1995)", "Collateral (2004)"],
                          gt_ids=[1, 2], name2id=name2id, check=check)
    # titles never fuzzy-match ('Heat' vs 'Heat (1995)'), ids do: Heat hit -> recall 1/2, precision 1/4
    assert s["recall"] == 0.5 and s["precision"] == 0.25 and s["ndcg"] == pytest.approx(1 / (1 + 1 / L3))
    # found in KG: Heat, Thief, Alien (3); satisfying: Heat (GT) + Thief -> 2/3
    assert s["cmr"] == pytest.approx(2 / 3) and s["kg_existence"] == 0.75
    s = M.official_scores("Made Up [SEP] Nothing", ["Heat (1995)"], gt_ids=[1], name2id=name2id, check=check)
    assert s["cmr"] == -1


def test_strict_variant_counts_duplicates_and_hallucinations():
    kg = kg4()
    res = M.CatalogueResolver(kg)
    s = M.strict_scores(["Heat", "Heat (1995)", "Made Up Film", "Collateral", "Thief"], ["1", "2"], res)
    # relevances: Heat 1, dup 0, unresolved 0, Collateral 1, Thief 0
    assert s["strict_recall"] == 1.0 and s["strict_precision"] == pytest.approx(2 / 5)
    assert s["duplicate_rate"] == pytest.approx(1 / 5) and s["hallucination_rate"] == pytest.approx(1 / 5)
    assert s["strict_ndcg"] == pytest.approx((1 + 1 / math.log2(5)) / (1 + 1 / L3))
    assert res("collateral") == "2" and res("Colateral (2004)") == "2" and res("Something Else") is None
