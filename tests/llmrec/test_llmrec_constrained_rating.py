"""LLMRec rating zero_shot with its default constraint: the request offers "1 star".."5 stars", the chosen answer is
read as its number (status ok), and method.constrained=false sends a free-text request."""
from __future__ import annotations

from tests.helpers import run_scripted

import pytest

pytestmark = pytest.mark.fast

STARS = ("1 star", "2 stars", "3 stars", "4 stars", "5 stars")


def _run(tmp_path, answer_fn, *extra):
    return run_scripted(tmp_path, ["task=llmrec_rating", "method=zero_shot", "model=smollm2", "limit=6", "run.progress=false",
                         "run.bootstrap_resamples=50", *extra], answer_fn)


def test_default_constraint_offers_star_choices_and_reads_the_number(tmp_path):
    m, recs, seen = _run(tmp_path, lambda r: "4 stars")
    assert len(seen) == 6 and all(r.constraint is not None and r.constraint.kind == "choice"
                                  and r.constraint.choices == STARS for r in seen)
    assert m["counts"]["parse_ok"] == 6 and m["counts"]["parse_failed"] == 0
    for r in recs:
        assert r["prediction"] == 4.0 and r["calls"][0]["response"] == "4 stars"  # the raw choice stays recorded
        assert r["metrics"]["mae"] == abs(4.0 - r["meta"]["rating"])


def test_unconstrained_request_parses_free_text(tmp_path):
    m, recs, seen = _run(tmp_path, lambda r: "I think 2", "method.constrained=false")
    assert all(r.constraint is None for r in seen)
    assert m["counts"]["parse_repaired"] == 6 and all(r["prediction"] == 2.0 for r in recs)
