"""End to end with the real default model: SmolLM2 answers RecBench+ queries built from real ML-100k data,
every query type, with and without the user's history; all metrics are produced and nothing is dropped."""
from __future__ import annotations


from tests.helpers import read_samples

import pytest
from hydra import compose, initialize_config_module

from recbench.run.construct import register_resolvers

from recbench.run.evaluate import run_from_config

pytestmark = pytest.mark.slow

TYPES = {"explicit", "implicit", "misinformed", "interest", "demographics"}


@pytest.mark.slow
@pytest.mark.parametrize("method", ["assistant", "assistant_history"])
def test_smollm2_on_ml100k_queries(shared_data, smollm2, tmp_path, method):
    register_resolvers()
    with initialize_config_module(config_module="recbench.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "task=recbench_plus_ml100k", f"method=recbench_plus/{method}", "limit=5", "method.max_tokens=64",
            f"task.data.path={shared_data / 'ml-100k'}", f"cache.path={tmp_path / 'cache.sqlite'}", "run.progress=false"])
    metrics = run_from_config(cfg, tmp_path / "run", backend=smollm2).to_dict()
    print(method, {k: round(v["mean"], 4) for k, v in metrics["metrics"].items()}, metrics["counts"])
    assert metrics["complete"] and metrics["counts"]["examples"] == 5
    assert set(metrics["breakdown"]["query_type"]) == TYPES
    for name in ("ftr", "recall", "precision", "ndcg", "strict_recall", "strict_precision", "strict_ndcg",
                 "invalid_rate", "duplicate_rate"):
        assert metrics["metrics"][name]["n"] > 0, name
    assert "cmr" in metrics["metrics"]  # condition queries: defined when an answer names a KG movie
    records = read_samples(tmp_path / "run")
    assert len(records) == 5 and all(r["parse_status"] in ("ok", "repaired", "failed") for r in records)
    # user-level queries carry the source user's history; demographics queries are group-level (no source user)
    with_hist = {r["id"]: "watched before" in r["calls"][0]["messages"][-1]["content"] for r in records}
    user_level = [i for i, r in zip(with_hist, records) if r["meta"]["query_type"] != "demographics"]
    assert all(with_hist[i] for i in user_level) if method == "assistant_history" else not any(with_hist.values())
