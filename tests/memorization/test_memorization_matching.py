"""Reading probe answers and matching them to titles: rapidfuzz similarities checked against hand-computed Indel
ratios (100 * (1 - edits / total length)), the answer clean-up on the answer shapes small models give."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.fast

from recbench.tasks.memorization.matching import (continuation, declined, first_line, lookup_answer, similarity,
                                                   title_forms)


def test_title_forms_move_the_article_and_drop_the_year():
    assert title_forms("Usual Suspects, The (1995)") == [
        "Usual Suspects, The (1995)", "Usual Suspects, The", "The Usual Suspects", "The Usual Suspects (1995)"]
    assert title_forms("OPI Nail Lacquer, 0.5 Ounce") == ["OPI Nail Lacquer, 0.5 Ounce"]


def test_similarity_is_the_best_indel_ratio_over_forms():
    forms = title_forms("Toy Story (1995)")
    assert similarity(["Toy Story"], forms, "ratio", 120) == 100.0
    # 'toy stori' vs 'toy story': 1 deletion + 1 insertion over 18 characters
    assert similarity(["Toy Stori"], forms, "ratio", 120) == pytest.approx(100 * (1 - 2 / 18))
    # 'goldeneye 007' vs 'goldeneye': 4 insertions over 22 characters (punctuation and case folded first)
    assert similarity(["GoldenEye 007!"], title_forms("GoldenEye (1995)"), "ratio", 120) == pytest.approx(100 * (1 - 4 / 22))
    assert similarity([], forms, "ratio", 120) == 0.0
    assert similarity([""], forms, "ratio", 120) == 0.0


def test_similarity_compares_only_the_first_max_chars():
    long_title = "Brand Shampoo for Dry Hair " + "x" * 200
    # the answer stops after the brand words (max_tokens): cut to 20 characters both are 'brand shampoo for dr'
    assert similarity(["Brand Shampoo for Dry"], [long_title], "ratio", 20) == 100.0
    assert similarity(["Brand Shampoo for Dry"], [long_title], "ratio", 500) < 30


def test_lookup_answers_drop_the_echoed_id_and_the_genres():
    assert lookup_answer("1::Toy Story (1995)::Animation|Children's|Comedy", "1") == "Toy Story (1995)"
    assert lookup_answer("Input: 12::Usual Suspects, The (1995)\nUser: more", "12") == "Usual Suspects, The (1995)"
    assert lookup_answer('"Heat (1995)".', "6") == "Heat (1995)"
    assert lookup_answer("\n\n  Answer: 7::Sabrina (1995)", "7") == "Sabrina (1995)"
    assert lookup_answer("", "7") == ""


def test_unknown_is_a_refusal_not_a_title():
    assert declined("Unknown.") and declined("  'unknown'\nbecause") and declined("I don't know")
    assert not declined("Unknown Soldier (1998)")
    assert first_line("1. The Rock (1996)\n2. x") == "The Rock (1996)"


def test_continuation_drops_the_echoed_prefix():
    assert continuation("The Usual Suspects (1995)", "The Usual", 1) == ["suspects"]
    # the article dropped by the model: the remainder starts after the prefix's last word
    assert continuation("Usual Suspects is a film", "The Usual", 1) == ["suspects is a film", "suspects"]
    # no echo: the answer itself is the continuation
    assert continuation("Suspects", "The Usual", 1) == ["suspects"]
    assert continuation("", "The Usual", 1) == []


def test_an_aka_title_or_genres_in_parentheses_is_optional():
    from recbench.tasks.memorization.matching import base_title

    forms = title_forms("Shanghai Triad (Yao a yao yao dao waipo qiao) (1995)")
    assert "Shanghai Triad" in forms and forms[0] == "Shanghai Triad (Yao a yao yao dao waipo qiao) (1995)"
    assert similarity(["Shanghai Triad"], forms, "ratio", 120) == 100.0
    assert base_title("Tin Drum, The (Blechtrommel, Die) (1979)") == "The Tin Drum"
    assert base_title("Crypt Journey (Horror)") == "Crypt Journey"


def test_another_echoed_id_is_dropped_too():
    assert lookup_answer("i0007::Crypt Journey (Horror)", "i0009") == "Crypt Journey (Horror)"
    assert lookup_answer("Star Wars: Episode IV (1977)", "50") == "Star Wars: Episode IV (1977)"
