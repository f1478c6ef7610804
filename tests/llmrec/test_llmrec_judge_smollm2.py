"""Issue 39, must-show: LLMRec explanation on the bundled sample, SmolLM2 judged by SmolLM2 (pointwise), offline,
through the CLI, its answers guided by the judge's JSON schema; a rerun pays 0 judge calls and gives the same judge
records."""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_smollm2_judges_smollm2_explanations_pointwise_then_free_rerun(tmp_path):
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp_path / "runs"), "RECBENCH_CACHE_DIR": str(tmp_path / "cache")}
    args = [sys.executable, "-m", "recbench", "task=llmrec_explanation", "model=smollm2", "method=zero_shot",
            "judge=smollm2", "limit=2", "run.progress=false"]
    r1 = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert r1.returncode == 0, r1.stderr[-3000:]
    assert "self-preference" in r1.stdout + r1.stderr and "judge smollm2 (pointwise, judging its own answers)" in r1.stdout
    run_dir = tmp_path / "runs" / "llmrec_explanation" / "smollm2" / "zero_shot" / "limit=2"
    m1 = json.loads((run_dir / "metrics.json").read_text())
    judge = m1["extra"]["judge"]
    assert judge["judged"] == 2 and judge["this_invocation"]["backend_calls"] == 2 and judge["self_judged"]
    lines = (run_dir / "judge" / "smollm2-pointwise" / "samples.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    assert len(recs) == 2 and all(r["calls"][0]["response"] for r in recs)  # the judge's real text is recorded
    # the hf backend decodes the judge's answer guided by its JSON schema (recbench.backends.hf_guide): every
    # answer is JSON of the rubric, each aspect a whole score 1-5
    assert [r["parse_status"] for r in recs] == ["ok", "ok"] and judge["parse_failed"] == 0
    aspects = ("persuasiveness", "transparency", "satisfaction", "interest_accuracy")
    assert all(r["prediction"][a] in (1, 2, 3, 4, 5) for r in recs for a in aspects)
    assert all(json.loads(r["calls"][0]["response"])["reason"] for r in recs)
    for a in ("persuasiveness", "transparency", "satisfaction", "interest_accuracy"):
        assert f"judge_{a}" in m1["metrics"]
    r2 = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)
    assert r2.returncode == 0, r2.stderr[-3000:]
    m2 = json.loads((run_dir / "metrics.json").read_text())
    assert m2["this_invocation"]["backend_calls"] == 0 and m2["extra"]["judge"]["this_invocation"]["backend_calls"] == 0
    assert (run_dir / "judge" / "smollm2-pointwise" / "samples.jsonl").read_text().splitlines() == lines
