"""Regression: the documented `predictions` command reproduces the official per-query RecBench+ numbers EXACTLY
(ftr / recall / precision / ndcg, all 279 DemographicsBasedQuery queries, two released prediction files)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.full

FILES = ["movie-UserBasedQuery_gpt-4o-mini-prediction", "movie-UserBasedQuery_llama-3.1-70b-instruct-prediction"]


def documented_command(data, predictions: str) -> list[str]:
    """The command of docs/recbench_plus.md (README)."""
    return [sys.executable, "-m", "recbench", "task=recbench_plus_released", "method=assistant", "model=predictions",
            f"task.data.path={data / 'recbench_plus' / 'DemographicsBasedQuery.json'}",
            f"model.backend.path={data / 'recbench_plus' / 'predictions' / (predictions + '.jsonl')}"]


@pytest.mark.parametrize("name", FILES)
def test_official_per_query_numbers_reproduced(shared_data, tmp_path, name):
    run_dir = tmp_path / "run"
    env = {**os.environ, "RECBENCH_CACHE_DIR": str(tmp_path / "cache")}
    cmd = documented_command(shared_data, name) + [f"hydra.run.dir={run_dir}", "run.progress=false"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ours = {r["id"]: r for r in map(json.loads, (run_dir / "samples.jsonl").read_text().splitlines())}
    official = json.loads((shared_data / "recbench_plus" / "official_eval" / f"{name}.json").read_text())
    assert len(official) == len(ours) == 279
    matched = 0
    for o in official:
        r = ours[o["id"]]
        m = r["metrics"]
        assert bool(m["ftr"]) == o["ftr"], o["id"]
        for k in ("recall", "precision", "ndcg"):
            assert abs(m[k] - o[k]) <= 1e-9, (o["id"], k, m[k], o[k])
        assert r["parse_status"] in ("ok", "repaired", "failed")
        matched += 1
    assert matched == 279
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["counts"]["examples"] == 279 and metrics["counts"]["backend_errors"] == 0 and metrics["complete"]
    # the aggregate equals the official average over the per-query values
    for k in ("recall", "precision", "ndcg"):
        assert metrics["metrics"][k]["mean"] == pytest.approx(sum(o[k] for o in official) / 279, abs=1e-12)
    assert set(metrics["breakdown"]["group_type"]) == {"age", "gender", "occupation", "age_gender", "age_occupation",
                                                      "gender_occupation", "age_gender_occupation"}
    # a rerun is free: every example is already finished
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "skipped (already finished) 279" in proc.stdout.replace("\n", " ")
