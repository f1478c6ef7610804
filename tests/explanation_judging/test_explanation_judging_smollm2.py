"""The real default model (SmolLM2-135M) as a judge on a handful of explanations: every answer recorded, parsed or
counted as failed, scored, and the correlations computed from what it answered."""
from __future__ import annotations

import json

import pytest
from tests.explanation_judging.ej_helpers import samples
from tests.explanation_judging.test_explanation_judging_runs import assert_recomputed
from tests.helpers import compose_cfg

from recbench.run.evaluate import run_from_config

pytestmark = pytest.mark.slow


def test_smollm2_judges_a_few_explanations(tmp_path, smollm2):
    cfg = compose_cfg(["task=explanation_judging", "method=judge_score", "model=smollm2", "limit=12",
                       "run.progress=false", f"cache.path={tmp_path / 'c.sqlite'}"])
    metrics = run_from_config(cfg, tmp_path / "run", backend=smollm2).to_dict()
    c = metrics["counts"]
    assert c["examples"] == 12 and c["parse_ok"] + c["parse_repaired"] + c["parse_failed"] == 12
    assert c["model_calls"] == 12 and c["backend_errors"] == 0
    recs = samples(tmp_path / "run")
    assert all(r["calls"][0]["response"] is not None for r in recs)
    assert all(r["prediction"] is None or 1.0 <= r["prediction"] <= 5.0 for r in recs)
    assert all(0.0 <= r["metrics"]["abs_error"] <= 4.0 for r in recs)
    assert metrics["extra"]["n_fallback"] == c["parse_failed"]
    assert_recomputed(metrics, recs)
    print("smollm2 answers:", [(r["calls"][0]["response"], r["prediction"], r["truth"]["rating"]) for r in recs])
    again = run_from_config(cfg, tmp_path / "run", backend=smollm2).to_dict()
    assert again["this_invocation"]["backend_calls"] == 0
    assert json.dumps(again["extra"], sort_keys=True) == json.dumps(metrics["extra"], sort_keys=True)  # NaN == NaN
