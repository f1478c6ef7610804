"""LLMRec sequential/direct zero_shot with its default constraint: every candidate is a choice "[<id>,", the
candidates are ranked by the likelihood the backend reports for each (status ok, the top n_recommend kept), a
backend that returns only the chosen choice gives a one-item ranking, an unenforced constraint falls back to the free
text parser, and method.constrained=false sends the paper's free-generation request."""
from __future__ import annotations

import pytest
from tests.doubles import ScriptedBackend
from tests.llmrec.llmrec_helpers import compose_cfg

from recbench.tasks.llmrec import metrics as M
from recbench.tasks.llmrec.methods import candidate_choice, ranking_from_choices
from recbench.api.types import Response

pytestmark = pytest.mark.fast


class ScoringBackend(ScriptedBackend):
    """Answers a choice request like the hf backend: the best choice, and every choice's log-likelihood from
    score_fn(request, choice)."""

    kind = "scoring"

    def __init__(self, score_fn):
        super().__init__(lambda r: "", name="scoring", batch_size=16)
        self.score_fn = score_fn
        self.seen = []

    def generate(self, requests):
        self.seen += requests
        out = []
        for r in requests:
            scores = [self.score_fn(r, c) for c in r.constraint.choices]
            best = max(range(len(scores)), key=lambda j: scores[j])
            out.append(Response(text=r.constraint.choices[best], prompt_tokens=10, completion_tokens=0,
                                logprobs=[{"choice": c, "logprob": s} for c, s in zip(r.constraint.choices, scores)]))
        return out


def _examples(kind):
    from hydra.utils import get_class

    cfg = compose_cfg(f"task=llmrec_{kind}")
    return {e.id: e for e in get_class(cfg.task._target_)(cfg.task).load()}


@pytest.mark.parametrize("kind", ["sequential", "direct"])
def test_candidates_are_choices_ranked_by_likelihood(run_cfg, kind):
    ex = _examples(kind)

    def score(c: str, target: str) -> float:  # the held-out target first, then the candidates by id, descending
        return (1000.0 if c == target else 0.0) + int(c) / 1000

    backend = ScoringBackend(lambda r, c: score(c[1:-1], ex[r.example_id].data["target"]))
    metrics, recs = run_cfg(backend, f"task=llmrec_{kind}", "method=zero_shot", "model=smollm2", "limit=8")
    assert metrics["counts"]["parse_ok"] == 8 and metrics["counts"]["finish_length"] == 0
    for req in backend.seen:  # one choice per candidate, in the order the prompt shows them
        e = ex[req.example_id]
        assert req.constraint.kind == "choice"
        assert req.constraint.choices == tuple(f"[{c}," for c in e.data["candidates"])
        assert "Answer with a python list" in req.messages[-1][1]  # the prompt still asks for the paper's format
    for r in recs:
        e = ex[r["id"]]
        want = sorted(e.data["candidates"], key=lambda c: -score(c, e.data["target"]))[:10]
        assert r["parse_status"] == "ok" and r["prediction"] == want and r["prediction"][0] == e.data["target"]
        assert r["details"]["ranking_from"] == "choice_likelihood" and r["details"]["in_candidates"] == 10
        assert r["metrics"]["hr@1"] == 1.0 and r["metrics"]["ndcg@10"] == 1.0
        assert r["calls"][0]["response"] == f"[{e.data['target']},"  # the raw chosen choice stays recorded


def test_chosen_choice_only_gives_a_one_item_ranking(run_cfg):
    """vLLM structured outputs return the chosen choice without the others' scores: that one candidate is ranked."""
    ex = _examples("sequential")
    backend = ScriptedBackend(lambda r: r.constraint.choices[2])
    metrics, recs = run_cfg(backend, "task=llmrec_sequential", "method=zero_shot", "model=smollm2", "limit=5")
    assert metrics["counts"]["parse_ok"] == 5
    for r in recs:
        third = ex[r["id"]].data["candidates"][2]
        assert r["prediction"] == [third] and r["details"]["ranking_from"] == "chosen_choice"
        assert r["metrics"]["hr@10"] == M.hit_at_k([third], ex[r["id"]].data["target"], 10)


def test_unenforced_constraint_falls_back_to_the_free_text_parser(run_cfg):
    """An openai backend that does not enforce `choice` answers in free text: the item resolver reads it."""
    ex = _examples("direct")
    backend = ScriptedBackend(lambda r: "Sure: " + ", ".join(c[1:-1] for c in r.constraint.choices[:3]))
    metrics, recs = run_cfg(backend, "task=llmrec_direct", "method=zero_shot", "model=smollm2", "limit=4")
    assert metrics["counts"]["parse_repaired"] == 4
    for r in recs:
        assert r["prediction"] == ex[r["id"]].data["candidates"][:3] and r["details"]["ranking_from"] == "free_text"


def test_unconstrained_request_is_free_generation(run_cfg):
    seen = []

    def answer(r):
        seen.append(r)
        return "[" + ", ".join(ex[r.example_id].data["candidates"][:10]) + "]"

    ex = _examples("direct")
    metrics, recs = run_cfg(ScriptedBackend(answer), "task=llmrec_direct", "method=zero_shot", "model=smollm2",
                            "limit=4", "method.constrained=false")
    assert all(r.constraint is None and r.sampling.max_tokens == 120 for r in seen)
    assert metrics["counts"]["parse_ok"] == 4 and all("ranking_from" not in r["details"] for r in recs)


def test_ranking_from_choices_orders_ties_by_shown_order_and_needs_every_score():
    cands = ["5", "17", "3"]
    lps = [{"choice": "[5,", "logprob": -2.0}, {"choice": "[17,", "logprob": -1.0}, {"choice": "[3,", "logprob": -2.0}]
    assert ranking_from_choices(lps, "[17,", cands) == (["17", "5", "3"], "choice_likelihood")
    assert ranking_from_choices(lps[:2], "[17,", cands) == (["17"], "chosen_choice")  # a score missing
    assert ranking_from_choices(None, "no list", cands) == ([], "chosen_choice")
    assert candidate_choice("17") == "[17,"
