"""PerRecBench pointwise with its default constraint: each request offers "1 star".."5 stars", a chosen answer is read
as its rating (status ok) and users are ranked by rating minus their own average; free text still parses."""
from __future__ import annotations

from recbench.run.construct import build_task
from recbench.tasks.perrec.methods import RATING_CHOICES
from tests.helpers import compose_cfg, run_scripted

import pytest

pytestmark = pytest.mark.fast


def _run(tmp_path, answer_fn, *extra):
    return run_scripted(tmp_path, ["task=perrec", "method=pointwise", "limit=5", "run.progress=false", "run.bootstrap_resamples=50",
                         *extra], answer_fn)


def _stars(req) -> str:
    """A rating from the prompt's own most common rating, as the constrained choice string."""
    common = int(float(req.messages[-1][1].split("most common rating: ")[1].split(";")[0]))
    return next(c for c, v in RATING_CHOICES.items() if v == common)


def test_constrained_pointwise_reads_star_choices(tmp_path):
    m, recs, seen = _run(tmp_path, _stars)
    assert seen and all(r.constraint is not None and r.constraint.choices == tuple(RATING_CHOICES) for r in seen)
    assert tuple(RATING_CHOICES) == ("1 star", "2 stars", "3 stars", "4 stars", "5 stars")
    assert m["counts"]["parse_ok"] == 5 and m["counts"]["parse_failed"] == 0
    examples = {e.id: e for e in build_task(compose_cfg(["task=perrec"])).load()}
    for r in recs:
        users = examples[r["id"]].data["users"]
        for u in users:
            assert r["prediction"]["ratings"][u["user_id"]] == float(u["most_common_rating"])
        want = [u["user_id"] for u in sorted(users, key=lambda u: -(u["most_common_rating"] - u["avg_rating"]))]
        assert r["prediction"]["order"] == want


def test_unconstrained_pointwise_parses_the_number_in_free_text(tmp_path):
    m, recs, seen = _run(tmp_path, lambda r: "I would say 4", "method.constrained=false")
    assert all(r.constraint is None for r in seen)
    assert m["counts"]["parse_repaired"] == 5 and m["counts"]["parse_failed"] == 0
    assert all(set(r["prediction"]["ratings"].values()) == {4.0} for r in recs)

