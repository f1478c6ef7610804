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
    # 100 frozen candidates: shorter titles / history and a smaller answer budget keep this to ~1k prompt tokens
    args = ("task=llmrec_sequential", "method=zero_shot", "model=smollm2", "limit=2", "task.title_max_chars=30",
            "task.history_max=5", "method.max_tokens=60")
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
