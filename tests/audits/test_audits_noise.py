"""Noise-floor audit (audit.noise.batch_size=B) through the real app on the bundled PerRecBench sample with a
batch-size-sensitive double: the examples are decoded again at the other batch size under a namespaced cache identity
(never answered from the run's entries, and the run's keys unchanged), into <run>/noise/<tag>/; metrics.json's block
equals hand counts and scipy-backed statistics of the records; a batch-invariant double shows no flip and floor 0."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from recbench.api.errors import ConfigError
from recbench.audits.noise import NoiseBlock, floor_of, metric_shift
from recbench.run.evaluate import run_from_config
from recbench.stats.paired import paired_bootstrap_ci, sign_flip_test
from recbench.store.schema import find_run_dirs
from recbench.testing.planted_audits import (
    BatchSensitive,
    as_json,
    blind_ranking,
    informed_ranking,
)
from tests.helpers import compose_cfg, read_samples

pytestmark = pytest.mark.fast
N = 12


def _run(tmp_path, backend, *overrides, name="run"):
    cfg = compose_cfg(["method=listwise", f"limit={N}", "run.progress=false", f"cache.path={tmp_path / 'c.sqlite'}",
                       *overrides])
    return run_from_config(cfg, tmp_path / name, backend=backend).to_dict(), read_samples(tmp_path / name)


@pytest.mark.full  # four runs of the app
def test_redecode_at_another_batch_size_not_from_the_cache(tmp_path):
    b = BatchSensitive(0.5, seed=0)
    metrics, recs = _run(tmp_path, b, "audit.noise.batch_size=4")
    # every request decoded twice (the re-decode by a copy of the backend at batch size 4, which shares its batch
    # log): the cache key has no batch size, the namespace does
    assert b.batches == [N, 4, 4, 4]
    noise_dir = tmp_path / "run" / "noise" / "batch_size=4"
    again = sorted(read_samples(noise_dir), key=lambda r: r["id"])
    recs = sorted(recs, key=lambda r: r["id"])
    assert len(again) == N and not (noise_dir / "metrics.json").exists()
    assert find_run_dirs([tmp_path / "run"]) == [(tmp_path / "run").resolve()]  # reports and compare never see it
    for r, a in zip(recs, again):
        prompt = r["calls"][0]["messages"][-1]["content"]
        assert a["calls"][0]["messages"][-1]["content"] == prompt
        assert r["calls"][0]["response"] == as_json(informed_ranking(prompt))  # batch 16: the reference answer
        b.batch_size = 4
        assert a["calls"][0]["response"] == b.answer(prompt)  # decoded at batch size 4
        b.batch_size = 16
    block = metrics["extra"]["noise_floor"]
    changed = [r["calls"][0]["response"] != a["calls"][0]["response"] for r, a in zip(recs, again)]
    assert block["answers_changed"]["count"] == sum(changed) > 0 and block["answers_changed"]["n"] == N
    from scipy import stats

    ci = stats.binomtest(sum(changed), N).proportion_ci(method="exact")
    assert (block["answers_changed"]["ci_low"], block["answers_changed"]["ci_high"]) == pytest.approx((ci.low, ci.high))
    preds = [json.dumps(r["prediction"], sort_keys=True) != json.dumps(a["prediction"], sort_keys=True)
             for r, a in zip(recs, again)]
    assert block["predictions_changed"]["count"] == sum(preds)
    run_v = np.array([r["metrics"]["ptc"] for r in recs])
    re_v = np.array([a["metrics"]["ptc"] for a in again])
    ptc = block["metrics"]["ptc"]
    assert ptc["diff"] == pytest.approx(float(np.mean(re_v - run_v)))
    lo, hi = paired_bootstrap_ci(re_v, run_v, n_resamples=9999, seed=0)
    assert (ptc["ci_low"], ptc["ci_high"]) == pytest.approx((lo, hi))
    assert ptc["floor"] == pytest.approx(max(abs(lo), abs(hi))) and block["floor"] == ptc["floor"]
    assert ptc["p_value"] == pytest.approx(sign_flip_test(re_v, run_v).p_value)
    assert {"difficulty=easy", "difficulty=medium", "difficulty=hard"} <= set(block["by_slice"])
    easy = [i for i, r in enumerate(recs) if r["meta"]["difficulty"] == "easy"]
    assert block["by_slice"]["difficulty=easy"]["ptc"]["diff"] == pytest.approx(float(np.mean((re_v - run_v)[easy])))
    assert block["by_slice"]["difficulty=easy"]["ptc"]["n"] == len(easy) == N // 3
    assert block["flips_detected"] and block["this_invocation"]["backend_calls"] == N
    assert metrics["metrics"]["ptc"]["mean"] == pytest.approx(float(run_v.mean()))  # the headline is the run's
    # a rerun in a fresh dir: both passes from the cache
    b2 = BatchSensitive(0.5, seed=0)
    m2, _ = _run(tmp_path, b2, "audit.noise.batch_size=4", name="rerun")
    assert b2.batches == [] and m2["extra"]["noise_floor"]["answers_changed"] == block["answers_changed"]
    # a plain run: the run's own cache keys are unchanged, and the re-decoded answers never leak into it
    b3 = BatchSensitive(0.5, seed=0)
    _, plain = _run(tmp_path, b3, name="plain")
    assert b3.batches == []
    assert {r["id"]: r["prediction"] for r in plain} == {r["id"]: r["prediction"] for r in recs}


def test_batch_invariant_double_has_no_flip_and_floor_0(tmp_path):
    metrics, _ = _run(tmp_path, BatchSensitive(0.0), "audit.noise.batch_size=4")
    block = metrics["extra"]["noise_floor"]
    assert block["answers_changed"]["count"] == 0 and block["predictions_changed"]["count"] == 0
    assert block["floor"] == 0.0 and not block["flips_detected"] and not block["metric_moved"]
    block = NoiseBlock.from_dict(metrics["extra"]["noise_floor"])
    assert floor_of(block, "ptc") == 0.0 and floor_of(block, "ptc", "difficulty=easy") == 0.0
    assert floor_of(None, "ptc") is None


def test_metric_shift_hand_values():
    # differences -1, 0, 0, -1 -> mean -0.5; floor = the larger |CI end|
    out = metric_shift([1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0], n_boot=2000)
    assert out.diff == pytest.approx(-0.5) and out.n == 4
    assert out.floor == pytest.approx(max(abs(out.ci_low), abs(out.ci_high)))
    assert out.ci_low == pytest.approx(-1.0) and out.ci_high == pytest.approx(0.0)
    nan = metric_shift([math.nan, 1.0], [0.0, 1.0])
    assert nan.n == 1 and nan.diff == 0.0 and nan.floor == 0.0


def test_noise_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="audit.noise.batch_size=4: method 'bm25_history' asks no model"):
        _run(tmp_path, None, "method=bm25_history", "audit.noise.batch_size=4")
    with pytest.raises(ConfigError, match="audit.noise.dtype=bfloat16: needs a backend built from the model config"):
        _run(tmp_path, BatchSensitive(0.1), "audit.noise.dtype=bfloat16")
    from recbench.api.config import validate

    with pytest.raises(ConfigError, match=r"audit.noise.batch_size=0: must be a whole number >= 1"):
        validate(compose_cfg(["method=listwise", "audit.noise.batch_size=0"]))
    with pytest.raises(ConfigError, match=r"audit.noise.dtype=int8: must be one of float32, float16, bfloat16"):
        validate(compose_cfg(["method=listwise", "audit.noise.dtype=int8"]))
    with pytest.raises(ConfigError, match="runs on a whole run, not a shard"):
        _run(tmp_path, BatchSensitive(0.1), "audit.noise.batch_size=4", "run.shard=0", "run.shards=2")


def test_blind_and_informed_rankings_by_hand():
    prompt = ('User A:\n- Average rating: 3.00; most common rating: 3; number of ratings: 9\n- Past ratings of items '
              'related to "X":\n  * "a": 2 stars\n  * "b": 2 stars\n\nUser B:\n- Average rating: 2.00; most common '
              'rating: 2; number of ratings: 5\n- Past ratings of items related to "X":\n  * "c": 4 stars\n\n')
    assert informed_ranking(prompt) == ["User B", "User A"]  # B: +2, A: -1
    assert sorted(blind_ranking(prompt, 0)) == ["User A", "User B"]
    assert blind_ranking(prompt, 0) == blind_ranking(prompt, 0)  # a pure function of (seed, prompt)
