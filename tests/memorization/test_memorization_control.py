"""The control set: fabricated ids outside the catalogue, invented titles unlike every real one (checked here with
rapidfuzz's cdist over all pairs), the same for the same seed and different for another."""
from __future__ import annotations

import re

import numpy as np
import pytest
from rapidfuzz import fuzz, process, utils

from recbench.run.construct import bundled_data
from recbench.tasks.memorization.catalogue import read_catalogue
from recbench.tasks.memorization.control import fabricate_ids, fabricate_items, fabricate_titles
from recbench.tasks.memorization.matching import title_forms

pytestmark = pytest.mark.fast


def _max_similarity(made: list[str], real: list[str]) -> float:
    a = [utils.default_process(f) for t in made for f in title_forms(t)]
    b = [utils.default_process(f) for t in real for f in title_forms(t)]
    return float(np.max(process.cdist(a, b, scorer=fuzz.ratio, processor=None)))


def test_movie_controls_look_real_but_match_no_real_title():
    cat = read_catalogue("recbench_plus_sample", bundled_data("recbench_plus_sample"), "item_id")
    ctrl = fabricate_items(cat.items, 100, 0, "ratio", 80)
    assert list(ctrl)[:3] == ["241", "242", "243"]  # numeric ids continue after the largest (240)
    assert not set(ctrl) & set(cat.items)
    titles = list(ctrl.values())
    assert len(set(titles)) == 100
    assert all(re.search(r" \(\d{4}\)$", t) for t in titles)  # the catalogue's years, on every title
    assert all(len(t.split()) >= 3 for t in titles)  # two words at least, then the year
    assert _max_similarity(titles, list(cat.items.values())) < 80
    # same seed: the same set; another seed: another
    assert fabricate_items(cat.items, 100, 0, "ratio", 80) == ctrl
    assert fabricate_items(cat.items, 100, 1, "ratio", 80) != ctrl


def test_asin_like_ids_keep_their_shape():
    real = ["B004756YJA", "B004ZT0SSG", "B00004U9V2"]
    ids = fabricate_ids(real, 50, 3)
    assert len(set(ids)) == 50 and not set(ids) & set(real)
    assert all(re.fullmatch(r"B0[0-9A-Z]{8}", i) for i in ids)
    # short ids run out of fresh values: they grow a digit instead of looping
    short = fabricate_ids(["u1", "u2"], 30, 0)
    assert len(set(short)) == 30 and not {"u1", "u2"} & set(short) and all(re.fullmatch(r"u\d+", i) for i in short)


def test_suffix_articles_follow_the_catalogue():
    real = [f"{w} Thing, The (1990)" for w in ("Red", "Blue", "Green", "Big", "Small")] + \
           [f"Night of the {w} (1991)" for w in ("Moon", "Sun", "Star", "Sky", "Sea")]
    made = fabricate_titles(real, 5, 0, "ratio", 80)
    assert all(not t.startswith("The ") for t in made)  # 'The ...' written 'Title, The' as MovieLens does


def test_a_catalogue_too_small_to_invent_from_is_refused():
    with pytest.raises(ValueError, match="could not invent 5 control titles"):
        fabricate_titles(["Alpha Beta (1990)", "Alpha Gamma (1991)"], 5, 0, "ratio", 80)
