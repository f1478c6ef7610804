"""The real default model (SmolLM2-135M) on small LLMRec samples: every answer is parsed, counted, and scored."""
from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.slow


def _counts_add_up(metrics, n):
    c = metrics["counts"]
    assert c["examples"] == n and c["parse_ok"] + c["parse_repaired"] + c["parse_failed"] == n
    assert c["model_calls"] == n and c["backend_errors"] == 0


def test_smollm2_rating_and_summary_on_the_sample(run_cfg, smollm2):
    metrics, recs = run_cfg(smollm2, "task=llmrec_rating", "method=zero_shot", "model=smollm2", "limit=6", name="rating")
    _counts_add_up(metrics, 6)
    for r in recs:
        assert r["prediction"] is None or 1.0 <= r["prediction"] <= 5.0
        assert 0.0 <= r["metrics"]["mae"] <= 4.0
    assert math.isfinite(metrics["extra"]["rmse"])
    metrics, recs = run_cfg(smollm2, "task=llmrec_summary", "method=zero_shot", "model=smollm2", "limit=4", name="summary")
    _counts_add_up(metrics, 4)
    assert all(0.0 <= r["metrics"]["rougeL"] <= 100.0 for r in recs)
    assert math.isfinite(metrics["extra"]["corpus_bleu4"])


def test_smollm2_sequential_answers_are_resolved_and_rerun_is_free(run_cfg, smollm2):
    # free generation (the paper's decoding; the default scores candidate choices, see the test below)
    # 100 frozen candidates: shorter titles / history and a smaller answer budget keep this to ~1k prompt tokens
    args = ("task=llmrec_sequential", "method=zero_shot", "model=smollm2", "limit=2", "task.title_max_chars=30",
            "task.history_max=5", "method.max_tokens=60", "method.constrained=false")
    metrics, recs = run_cfg(smollm2, *args, name="seq")
    _counts_add_up(metrics, 2)
    for r in recs:
        d = r["details"]
        assert set(r["prediction"]) <= set(i["item"] for i in d.get("items", []) if i["kind"] == "in_candidates")
        assert d.get("named", 0) == sum(d.get(k, 0) for k in ("in_candidates", "out_of_candidate", "hallucinated", "duplicate"))
        assert r["calls"][0]["messages"][0]["role"] == "system"
    assert metrics["this_invocation"]["backend_calls"] == 2
    again, _ = run_cfg(smollm2, *args, name="seq")  # same run dir: finished examples are skipped
    assert again["this_invocation"]["backend_calls"] == 0 and again["counts"]["examples"] == 2


def test_smollm2_packed_choice_scores_equal_one_prompt_per_choice(smollm2):
    """Many choices (more than a batch) are scored in one packed sequence: the same log-likelihoods as one prompt
    copy per choice."""
    from recbench.api.types import Constraint, Request, SamplingParams
    from recbench.backends.hf_choice import choose

    choices = tuple(f"[{i}," for i in (3, 17, 101, 5, 240, 88, 9, 12, 150, 61, 7, 33, 200, 2, 45, 99, 120, 18, 71, 230))
    req = Request.chat([{"role": "user", "content": "Answer with a python list of 3 numbers from 1 to 240."}],
                       SamplingParams(max_tokens=8), constraint=Constraint(kind="choice", choices=choices))
    prompt = smollm2._prompt(req)
    packed = choose(smollm2, [prompt], [req])[0]  # 20 choices > batch_size 16: the packed path
    assert len(choices) > smollm2.batch_size
    old = smollm2.batch_size
    try:
        smollm2.batch_size = 64  # one padded row per choice
        naive = choose(smollm2, [prompt], [req])[0]
    finally:
        smollm2.batch_size = old
    assert packed.text == naive.text and [d["choice"] for d in packed.logprobs] == list(choices)
    assert [d["logprob"] for d in packed.logprobs] == pytest.approx([d["logprob"] for d in naive.logprobs], abs=1e-3)


def test_smollm2_direct_default_ranks_every_candidate_and_parses(run_cfg, smollm2):
    """The shipped decoding of direct: candidates scored as choices, the top 10 kept, parsed ok, never cut."""
    metrics, recs = run_cfg(smollm2, "task=llmrec_direct", "method=zero_shot", "model=smollm2", "limit=2",
                            "task.title_max_chars=30", "task.history_max=5", name="direct")
    _counts_add_up(metrics, 2)
    assert metrics["counts"]["parse_ok"] == 2 and metrics["counts"]["finish_length"] == 0
    for r in recs:
        assert len(r["prediction"]) == 10 == len(set(r["prediction"]))
        assert r["details"]["ranking_from"] == "choice_likelihood" and r["details"]["in_candidates"] == 10
        assert r["calls"][0]["response"] == f"[{r['prediction'][0]},"
