"""Order audit (audit.orders=K) through the real app on the bundled data with scripted models: K display orders
asked, extra requests deduplicated by the cache, Kendall's W and the first-slot test, order 0 = the normal run."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats

from recbench.run.evaluate import run_from_config
from recbench.audits.order import audit_aggregates, maybe_audit, rank_matrix, tied_kendalls_w
from recbench.api.errors import ConfigError
from recbench.stats.audit import kendalls_w
from tests.doubles import ScriptedBackend
from tests.helpers import read_samples
from tests.llmrec.llmrec_helpers import compose_cfg

N = 9  # groups: 3 easy, 3 medium, 3 hard (stratified)
QUERY = re.compile(r'users all rated the item "(.*?)"\. Rank')
USER_LINE = re.compile(r"^(User [A-Z]):\n- Average rating: ([0-9.]+);.*?number of ratings: (\d+)", re.M)


def _truth_table():
    from recbench.run.construct import build_task

    task = build_task(compose_cfg("task=perrec"))
    return {(e.data["query_title"], f"{u['avg_rating']:.2f}", u["history_len"]): u["relative_rating"]
            for e in task.load() for u in e.data["users"]}


def oracle(rel):
    """Order-invariant model: ranks the shown users by their true relative rating, whatever the display order."""
    def answer(req):
        text = req.messages[-1][1]
        title = QUERY.search(text).group(1)
        ranked = sorted(USER_LINE.findall(text), key=lambda u: -rel[(title, u[1], int(u[2]))])
        return '{"ranking": [' + ", ".join(f'"{u[0]}"' for u in ranked) + "]}"
    return answer


def first_shown(req):
    """Position-bound model: ranks the users in display order (the first shown is always ranked first)."""
    users = USER_LINE.findall(req.messages[-1][1])
    return '{"ranking": [' + ", ".join(f'"{u[0]}"' for u in users) + "]}"


def _run(tmp_path, backend, *overrides, name="run", cache="c.sqlite"):
    cfg = compose_cfg("task=perrec", "method=listwise", f"limit={N}", "run.limit_strategy=stratified",
                      f"cache.path={tmp_path / cache}", *overrides)
    metrics = run_from_config(cfg, tmp_path / name, backend=backend)
    return metrics, read_samples(tmp_path / name)


@pytest.fixture(scope="module")
def rel():
    return _truth_table()


def test_four_orders_asked_deduplicated_and_cached(tmp_path, rel):
    b = ScriptedBackend(oracle(rel), batch_size=16)
    metrics, recs = _run(tmp_path, b, "audit.orders=4")
    assert len(recs) == N
    distinct = set()
    for r in recs:
        orders = r["details"]["audit"]["orders"]
        assert [o["order"] for o in orders] == [0, 1, 2, 3]
        for o in orders:
            assert sorted(o["shown"]) == sorted(o["ranked"])  # a display order and a full ranking of the same users
            distinct.add((r["id"], tuple(o["shown"])))
    # one request per distinct (group, display order): orders that happen to coincide are asked once
    assert b.calls == len(distinct)
    assert N < b.calls <= 4 * N
    assert sum(len(r["calls"]) for r in recs) == 4 * N  # every order's answer is recorded with its example
    b2 = ScriptedBackend(oracle(rel))
    _, recs2 = _run(tmp_path, b2, "audit.orders=4", name="rerun")  # same cache, fresh run dir
    assert b2.calls == 0
    assert [r["details"]["audit"] for r in recs2] == [r["details"]["audit"] for r in recs]


def test_order_invariant_oracle_has_w_1(tmp_path, rel):
    _, recs = _run(tmp_path, ScriptedBackend(oracle(rel)), "audit.orders=4")
    agg = audit_aggregates(_records(tmp_path / "run"), "ptc")["order_audit"]
    assert agg["kendalls_w_mean"] == pytest.approx(1.0)
    assert agg["kendalls_w_n"] == N
    assert agg["per_order"] == pytest.approx([1.0] * 4)  # the oracle is exact in every order: PTC 1
    assert agg["sd_over_orders"] == pytest.approx(0.0)


def test_first_shown_model_w_below_1_and_slot_bias(tmp_path):
    _, recs = _run(tmp_path, ScriptedBackend(first_shown), "audit.orders=4")
    agg = audit_aggregates(_records(tmp_path / "run"), "ptc")["order_audit"]
    assert agg["kendalls_w_mean"] < 1.0
    # W by hand (recbench.stats.audit.kendalls_w) for each group, averaged
    ws = []
    for r in recs:
        orders = r["details"]["audit"]["orders"]
        ranks, complete = rank_matrix(orders[0]["shown"], [o["ranked"] for o in orders])
        assert complete
        ws.append(kendalls_w(ranks))
    assert agg["kendalls_w_mean"] == pytest.approx(float(np.mean(ws)))
    fs = agg["first_slot"]
    assert fs["n"] == 4 * N and fs["counts"][0] == 4 * N and fs["share"][0] == 1.0
    # expected counts: 4 orders x 3 groups each of sizes 2, 3, 4 -> slot 0: 12/2 + 12/3 + 12/4 = 13
    assert fs["expected"] == pytest.approx([13.0, 13.0, 7.0, 3.0])
    assert fs["chi2"] == pytest.approx(stats.chisquare([36, 0, 0, 0], [13, 13, 7, 3]).statistic)
    assert fs["p_value"] < 1e-6
    # headline per order: the mean of each order's per-group PTC, and its mean/sd over the orders
    per = [np.mean([r["details"]["audit"]["orders"][k]["metrics"]["ptc"] for r in recs]) for k in range(4)]
    assert agg["per_order"] == pytest.approx(per)
    assert agg["mean_over_orders"] == pytest.approx(np.mean(per))
    assert agg["sd_over_orders"] == pytest.approx(np.std(per, ddof=1))


def test_order_0_is_the_normal_run(tmp_path):
    m_plain, plain = _run(tmp_path, ScriptedBackend(first_shown), name="plain")
    m_audit, audited = _run(tmp_path, ScriptedBackend(first_shown), "audit.orders=3", name="audit")
    by_id = {r["id"]: r for r in plain}
    for r in audited:
        p = by_id[r["id"]]
        assert r["prediction"] == p["prediction"] and r["metrics"] == p["metrics"]
        assert r["parse_status"] == p["parse_status"]
        assert r["details"]["audit"]["orders"][0]["metrics"] == p["metrics"]
        assert "shown" not in p["details"]  # audit off: records as before
    assert m_audit["metrics"]["ptc"]["mean"] == pytest.approx(m_plain["metrics"]["ptc"]["mean"])
    # metrics.json carries the audit block (via the task's extra aggregates); the plain run has none
    block = m_audit["extra"]["order_audit"]
    assert block["orders"] == 3 and block["per_order"][0] == pytest.approx(m_plain["metrics"]["ptc"]["mean"])
    assert "order_audit" not in m_plain["extra"]


def test_not_auditable_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"audit.orders=4: method 'pointwise' .* order-auditable methods here: listwise"):
        _run(tmp_path, ScriptedBackend(first_shown), "method=pointwise", "audit.orders=4")
    with pytest.raises(ConfigError, match="must be 0 \\(off\\) or >= 2"):
        _run(tmp_path, ScriptedBackend(first_shown), "audit.orders=1")


def test_audit_off_returns_the_method_itself():
    from recbench.run.construct import build_task

    cfg = compose_cfg("task=perrec", "method=listwise")
    task = build_task(cfg)
    method = task.make_method(cfg.method, cfg.sampling)
    assert maybe_audit(task, method, cfg.audit) is method
    assert cfg.audit.orders == 0


def test_pairwise_order_consistency(tmp_path, rel):
    def always_a(req):
        return "[User A]"

    _run(tmp_path, ScriptedBackend(always_a), "method=pairwise", "method.constrained=false", name="biased")
    block = audit_aggregates(_records(tmp_path / "biased"), "ptc")["pair_order_consistency"]
    # every comparison: the first-shown user wins in both orders -> all inconsistent, all won by slot 1
    assert block["consistent"] == 0.0 and block["first_slot_wins_inconsistent"] == 1.0
    recs = _records(tmp_path / "biased")
    assert block["n"] == sum(r.details["comparisons"] for r in recs) == sum(r.details["inconsistent"] for r in recs)

    def by_truth(req):
        text = req.messages[-1][1]
        title = re.search(r'item "(.*?)"', text).group(1)
        found = re.findall(r"Average rating: ([0-9.]+);.*?number of ratings: (\d+)", text)
        a, b = (rel[(title, avg, int(n))] for avg, n in found)
        return "[User A]" if a > b else "[User B]"

    _run(tmp_path, ScriptedBackend(by_truth), "method=pairwise", "method.constrained=false", name="oracle",
         cache="c2.sqlite")
    block = audit_aggregates(_records(tmp_path / "oracle"), "ptc")["pair_order_consistency"]
    assert block["consistent"] == 1.0 and math.isnan(block["first_slot_wins_inconsistent"])


def test_tied_w_hand_value_and_equal_without_ties():
    r = [[1, 2, 3, 4], [2, 1, 4, 3], [1, 3, 2, 4]]
    assert tied_kendalls_w(r) == pytest.approx(kendalls_w(r))
    # K=2, m=3, ranks (1,2,3) and (1,2.5,2.5): S = 6.5, ties T = 2^3-2 = 6 -> 12*6.5 / (4*24 - 2*6) = 78/84
    assert tied_kendalls_w([[1, 2, 3], [1, 2.5, 2.5]]) == pytest.approx(78 / 84)
    ranks, complete = rank_matrix(["a", "b", "c"], [["a", "b", "c"], ["a"]])
    assert not complete and ranks.tolist() == [[1, 2, 3], [1, 2.5, 2.5]]


def test_llmrec_sequential_permutes_candidates(tmp_path):
    """LLMRec sequential: order k > 0 shows the same candidates in another order; order 0 is today's prompt."""
    b = ScriptedBackend(lambda req: "1. nothing", batch_size=16)
    cfg = compose_cfg("task=llmrec_sequential", "method=zero_shot", "limit=3", f"cache.path={tmp_path / 'c.sqlite'}",
                      "audit.orders=3")
    run_from_config(cfg, tmp_path / "seq", backend=b)
    recs = read_samples(tmp_path / "seq")
    cfg0 = compose_cfg("task=llmrec_sequential", "method=zero_shot", "limit=3", f"cache.path={tmp_path / 'c.sqlite'}")
    b0 = ScriptedBackend(lambda req: "1. nothing")
    run_from_config(cfg0, tmp_path / "plain", backend=b0)
    assert b0.calls == 0  # order 0 asked exactly today's prompts (all cached by the audited run)
    assert b.calls == 3 * 3
    for r in recs:
        orders = r["details"]["audit"]["orders"]
        assert len({tuple(o["shown"]) for o in orders}) == 3
        assert all(sorted(o["shown"]) == sorted(orders[0]["shown"]) for o in orders)


def _records(run_dir):
    from recbench.store.schema import read_run

    return list(read_run(run_dir, require_result=False).samples())
