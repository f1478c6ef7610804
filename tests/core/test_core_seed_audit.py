"""Sampling-seed audit (audit.seeds=K) through the real app on the toy task, with a scripted model whose answer
depends on the request's sampling seed: K seeds asked per example through the cache, seed 0 = the plain run, the
block's per-seed means, spread, within-example sd, variance share and paired test by hand; it composes with the
order audit (each audit reads its own variants) and refuses what it cannot run. The audit is one module
(recbench/audits/seeds.py + seed_blocks.py): no task and no other audit knows of it."""
from __future__ import annotations

import numpy as np
import pytest

from recbench.api.errors import ConfigError
from recbench.api.variant import SEED_STRIDE
from recbench.audits.seed_blocks import SeedBlock
from recbench.run.evaluate import run_from_config
from recbench.store.schema import read_result
from tests.doubles import ScriptedBackend
from tests.helpers import read_samples
from tests.toy import toy_cfg
from tests.toy.scripted import as_json, oracle, shown

pytestmark = pytest.mark.fast
N = 9  # examples: 3 easy, 3 medium, 3 hard (2, 3 and 4 items shown)


def by_seed(req) -> str:
    """Seed variant 1 ranks the items worst first (tau -1); seeds 0 and 2 answer exactly (tau 1)."""
    right = oracle(req)
    if req.sampling.seed // SEED_STRIDE != 1:
        return right
    labels = dict(shown(req))
    return as_json([lab for lab in _labels(right) if lab in labels][::-1])


def _labels(answer: str) -> list[str]:
    import json

    return json.loads(answer)["ranking"]


def _run(tmp_path, backend, *overrides, name="run"):
    cfg = toy_cfg([f"limit={N}", "run.limit_strategy=stratified", f"cache.path={tmp_path / 'c.sqlite'}",
                   "sampling.temperature=0.7", "run.bootstrap_resamples=200", *overrides])
    result = run_from_config(cfg, tmp_path / name, backend=backend)
    return result, read_samples(tmp_path / name)


def test_three_seeds_asked_cached_and_summarised(tmp_path):
    b = ScriptedBackend(by_seed, batch_size=32)
    result, recs = _run(tmp_path, b, "audit.seeds=3")
    assert b.calls == 3 * N  # one request per (example, seed)
    for r in recs:
        assert [v["variant"] for v in r["variants"]] == [{}, {"seed": 1}, {"seed": 2}]
        assert [v["metrics"]["toy_tau"] for v in r["variants"]] == pytest.approx([1.0, -1.0, 1.0])
        assert r["metrics"]["toy_tau"] == pytest.approx(1.0)  # the record is seed 0's: the plain run's
    block = result.audits["seed_audit"]
    assert isinstance(block, SeedBlock) and block.seeds == 3 and block.examples == N and block.temperature == 0.7
    assert [p.mean for p in block.per_seed] == pytest.approx([1.0, -1.0, 1.0])
    assert [p.parsed for p in block.per_seed] == [1.0, 1.0, 1.0]
    assert block.mean_over_seeds == pytest.approx(1 / 3)
    assert block.sd_over_seeds == pytest.approx(np.std([1.0, -1.0, 1.0], ddof=1))
    assert block.spread == pytest.approx(2.0)
    assert block.within_example_sd == pytest.approx(np.std([1.0, -1.0, 1.0], ddof=1))
    assert block.answer_changed_any == 1.0
    assert block.seed_share == pytest.approx(1.0)  # every example moves alike: all the variance is the seed's
    assert block.seed_effect.detected and block.seed_effect.p_value < 0.01
    assert result.metrics["toy_tau"].mean == pytest.approx(1.0)  # the headline is seed 0's
    read = read_result(tmp_path / "run").audits["seed_audit"]  # metrics.json, read back typed
    assert isinstance(read, SeedBlock) and [p.mean for p in read.per_seed] == pytest.approx([1.0, -1.0, 1.0])
    b2 = ScriptedBackend(by_seed)
    _, recs2 = _run(tmp_path, b2, "audit.seeds=3", name="rerun")  # same cache, fresh run dir
    assert b2.calls == 0 and [r["variants"] for r in recs2] == [r["variants"] for r in recs]


def test_seed_0_is_the_plain_run_and_the_seeds_reach_the_requests(tmp_path):
    plain, p_recs = _run(tmp_path, ScriptedBackend(by_seed), name="plain")
    seen: list[int] = []
    b = ScriptedBackend(lambda req: seen.append(req.sampling.seed) or by_seed(req))
    audited, a_recs = _run(tmp_path, b, "audit.seeds=2", name="audited")
    assert b.calls == N  # seed 0's requests are the plain run's cache entries
    assert set(seen) == {int(toy_cfg().seed) + SEED_STRIDE}
    assert [r["metrics"] for r in a_recs] == [r["metrics"] for r in p_recs]
    assert "seed_audit" not in plain.audits and audited.metrics["toy_tau"].mean == plain.metrics["toy_tau"].mean


def test_with_orders_each_audit_reads_its_own_variants(tmp_path):
    result, recs = _run(tmp_path, ScriptedBackend(by_seed, batch_size=64), "audit.seeds=2", "audit.orders=2")
    assert {tuple(sorted(v["variant"].items())) for v in recs[0]["variants"]} == {
        (("order", o),) + ((("seed", 1),) if s else ()) for o in (0, 1) for s in (0, 1)}
    assert [p.mean for p in result.audits["seed_audit"].per_seed] == pytest.approx([1.0, -1.0])
    assert result.audits["order_audit"].per_order == pytest.approx([1.0, 1.0])  # the oracle, seed 0, both orders


def test_refusals_name_the_fix(tmp_path):
    with pytest.raises(ConfigError, match=r"audit.seeds=1: must be 0 \(off\) or >= 2"):
        _run(tmp_path, ScriptedBackend(by_seed), "audit.seeds=1")
    with pytest.raises(ConfigError, match=r"audit.seeds=2: method 'toy_popular' of task 'toy' asks no model"):
        _run(tmp_path, None, "method=toy_popular", "audit.seeds=2")


def test_plan_counts_the_seeds_and_the_noise_note_the_plain_variant(tmp_path):
    """mode=plan asks the wrapped method: K seeds x K orders distinct requests per example; the noise floor's note
    counts the plain variant's (api/audits.variants_asked: no audit reads another's config)."""
    from recbench.api import audits
    from recbench.run.plan import plan_from_config

    base = [f"limit={N}", "run.limit_strategy=stratified", f"cache.path={tmp_path / 'c.sqlite'}",
            "sampling.temperature=0.7"]
    plain = plan_from_config(toy_cfg([*base, "mode=plan"]), tmp_path / "p0")
    cfg = toy_cfg([*base, "mode=plan", "audit.seeds=3", "audit.orders=2", "audit.noise.batch_size=4"])
    assert audits.variants_asked(cfg) == 6
    both = plan_from_config(cfg, tmp_path / "p1")
    assert plain.unique_requests == N and N < both.unique_requests <= 6 * N  # coinciding orders are asked once
    note = next(n for n in both.notes if n.startswith("audit.noise"))
    assert f"about {both.unique_requests // 6}:" in note
