"""Order audit (audit.orders=K) through the real app on the toy task with scripted models: K display orders asked,
extra requests deduplicated by the cache, Kendall's W and the first-slot test, order 0 = the normal run; pairwise
order consistency from the records' order pairs."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from recbench.api.errors import ConfigError
from recbench.audits.order import audit_aggregates, maybe_audit, rank_matrix
from recbench.run.evaluate import run_from_config
from recbench.stats.order_agreement import kendalls_w, tied_kendalls_w
from tests.doubles import ScriptedBackend
from tests.helpers import read_samples
from tests.toy import toy_cfg
from tests.toy.scripted import first_shown, oracle

pytestmark = pytest.mark.fast
N = 9  # examples: 3 easy, 3 medium, 3 hard (stratified): 2, 3 and 4 items shown


def _run(tmp_path, backend, *overrides, name="run", cache="c.sqlite"):
    cfg = toy_cfg([f"limit={N}", "run.limit_strategy=stratified", f"cache.path={tmp_path / cache}", *overrides])
    metrics = run_from_config(cfg, tmp_path / name, backend=backend).to_dict()
    return metrics, read_samples(tmp_path / name)


def test_four_orders_asked_deduplicated_and_cached(tmp_path):
    b = ScriptedBackend(oracle, batch_size=16)
    metrics, recs = _run(tmp_path, b, "audit.orders=4")
    assert len(recs) == N
    distinct = set()
    for r in recs:
        orders = _orders(r)
        assert [o["order"] for o in orders] == [0, 1, 2, 3]
        for o in orders:
            assert sorted(o["shown"]) == sorted(o["ranked"])  # a display order and a full ranking of the same items
            distinct.add((r["id"], tuple(o["shown"])))
    # one request per distinct (example, display order): orders that happen to coincide are asked once
    assert b.calls == len(distinct)
    assert N < b.calls <= 4 * N
    assert sum(len(r["calls"]) for r in recs) == 4 * N  # every order's answer is recorded with its example
    b2 = ScriptedBackend(oracle)
    _, recs2 = _run(tmp_path, b2, "audit.orders=4", name="rerun")  # same cache, fresh run dir
    assert b2.calls == 0
    assert [r["variants"] for r in recs2] == [r["variants"] for r in recs]


def test_order_invariant_oracle_has_w_1(tmp_path):
    _run(tmp_path, ScriptedBackend(oracle), "audit.orders=4")
    agg = audit_aggregates(_records(tmp_path / "run"), "toy_tau")["order_audit"]
    assert agg.kendalls_w_mean == pytest.approx(1.0)
    assert agg.kendalls_w_n == N
    assert agg.per_order == pytest.approx([1.0] * 4)  # the oracle is exact in every order: tau 1
    assert agg.sd_over_orders == pytest.approx(0.0)


def test_first_shown_model_w_below_1_and_slot_bias(tmp_path):
    _, recs = _run(tmp_path, ScriptedBackend(first_shown), "audit.orders=4")
    agg = audit_aggregates(_records(tmp_path / "run"), "toy_tau")["order_audit"]
    assert agg.kendalls_w_mean < 1.0
    # W by hand (recbench.stats.order_agreement.kendalls_w) for each example, averaged
    ws = []
    for r in recs:
        orders = _orders(r)
        ranks, complete = rank_matrix(orders[0]["shown"], [o["ranked"] for o in orders])
        assert complete
        ws.append(kendalls_w(ranks))
    assert agg.kendalls_w_mean == pytest.approx(float(np.mean(ws)))
    fs = agg.first_slot
    assert fs.n == 4 * N and fs.counts[0] == 4 * N and fs.share[0] == 1.0
    # expected counts: 4 orders x 3 examples each of sizes 2, 3, 4 -> slot 0: 12/2 + 12/3 + 12/4 = 13
    assert fs.expected == pytest.approx([13.0, 13.0, 7.0, 3.0])
    assert fs.chi2 == pytest.approx(stats.chisquare([36, 0, 0, 0], [13, 13, 7, 3]).statistic)
    assert fs.p_value < 1e-6
    # headline per order: the mean of each order's per-example tau, and its mean/sd over the orders
    per = [np.mean([_orders(r)[k]["metrics"]["toy_tau"] for r in recs]) for k in range(4)]
    assert agg.per_order == pytest.approx(per)
    assert agg.mean_over_orders == pytest.approx(np.mean(per))
    assert agg.sd_over_orders == pytest.approx(np.std(per, ddof=1))


def test_order_0_is_the_normal_run(tmp_path):
    m_plain, plain = _run(tmp_path, ScriptedBackend(first_shown), name="plain")
    m_audit, audited = _run(tmp_path, ScriptedBackend(first_shown), "audit.orders=3", name="audit")
    by_id = {r["id"]: r for r in plain}
    for r in audited:
        p = by_id[r["id"]]
        assert r["prediction"] == p["prediction"] and r["metrics"] == p["metrics"]
        assert r["parse_status"] == p["parse_status"]
        assert _orders(r)[0]["metrics"] == p["metrics"]
        assert "shown" not in p["details"]  # audit off: records as before
    assert m_audit["metrics"]["toy_tau"]["mean"] == pytest.approx(m_plain["metrics"]["toy_tau"]["mean"])
    # metrics.json carries the audit block (the loop's aggregates); the plain run has none
    block = m_audit["extra"]["order_audit"]
    assert block["orders"] == 3 and block["per_order"][0] == pytest.approx(m_plain["metrics"]["toy_tau"]["mean"])
    assert "order_audit" not in m_plain["extra"]


def test_not_auditable_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"audit.orders=4: method 'toy_popular' .* order-auditable methods here: "
                                          r"toy_rank"):
        _run(tmp_path, None, "method=toy_popular", "audit.orders=4")
    with pytest.raises(ConfigError, match="must be 0 \\(off\\) or >= 2"):
        _run(tmp_path, ScriptedBackend(first_shown), "audit.orders=1")


def test_audit_off_returns_the_method_itself():
    from recbench.run.construct import build_task

    cfg = toy_cfg()
    task = build_task(cfg)
    method = task.make_method(cfg.method, cfg.sampling)
    assert maybe_audit(task, method, cfg.audit) is method
    assert cfg.audit.orders == 0


def test_pair_order_consistency_from_the_records_order_pairs():
    """Per comparison asked in both orders: (first shown won in order AB, first shown won in order BA); consistent
    when the slot winners differ. Hand count: 2 consistent of 5; of the 3 inconsistent, 2 won by slot 1 both times."""
    recs = [SimpleNamespace(variants=[], details={"order_pairs": [[True, False], [True, True]]}),
            SimpleNamespace(variants=[], details={"order_pairs": [[False, True], [True, True], [False, False]]}),
            SimpleNamespace(variants=[], details={"note": "no comparisons"})]
    block = audit_aggregates(recs, "toy_tau")["pair_order_consistency"]
    assert block.n == 5 and block.consistent == pytest.approx(2 / 5) and block.inconsistent == pytest.approx(3 / 5)
    assert block.first_slot_wins_inconsistent == pytest.approx(2 / 3)
    assert block.second_slot_wins_inconsistent == pytest.approx(1 / 3)
    consistent = audit_aggregates([SimpleNamespace(variants=[], details={"order_pairs": [[True, False]]})], "toy_tau")
    assert consistent["pair_order_consistency"].consistent == 1.0
    assert math.isnan(consistent["pair_order_consistency"].first_slot_wins_inconsistent)
    assert audit_aggregates(recs[2:], "toy_tau") == {}  # nothing audited, no pairs: no block


def test_tied_w_hand_value_and_equal_without_ties():
    r = [[1, 2, 3, 4], [2, 1, 4, 3], [1, 3, 2, 4]]
    assert tied_kendalls_w(r) == pytest.approx(kendalls_w(r))
    # K=2, m=3, ranks (1,2,3) and (1,2.5,2.5): S = 6.5, ties T = 2^3-2 = 6 -> 12*6.5 / (4*24 - 2*6) = 78/84
    assert tied_kendalls_w([[1, 2, 3], [1, 2.5, 2.5]]) == pytest.approx(78 / 84)
    ranks, complete = rank_matrix(["a", "b", "c"], [["a", "b", "c"], ["a"]])
    assert not complete and ranks.tolist() == [[1, 2, 3], [1, 2.5, 2.5]]


def _orders(r: dict) -> list[dict]:
    """A record's order variants (SampleRecord.variants), each with its order."""
    return [{"order": v["variant"]["order"], **v} for v in r["variants"]]


def _records(run_dir):
    from recbench.store.schema import read_run

    return list(read_run(run_dir, require_result=False).samples())
