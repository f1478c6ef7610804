"""PerRecBench's pairwise method through the real app: each comparison asked in both orders gives the order-pairs the
order audit turns into pairwise order consistency (a slot-biased model: all inconsistent; the truth: all consistent)."""
from __future__ import annotations

import math
import re

import pytest

from recbench.audits.order import audit_aggregates
from recbench.run.evaluate import run_from_config
from tests.doubles import ScriptedBackend
from tests.llmrec.llmrec_helpers import compose_cfg

pytestmark = pytest.mark.fast
N = 9  # groups: 3 easy, 3 medium, 3 hard (stratified)


def _truth_table():
    from recbench.run.construct import build_task

    task = build_task(compose_cfg("task=perrec"))
    return {(e.data["query_title"], f"{u['avg_rating']:.2f}", u["history_len"]): u["relative_rating"]
            for e in task.load() for u in e.data["users"]}


def _run(tmp_path, backend, *overrides, name="run", cache="c.sqlite"):
    cfg = compose_cfg("task=perrec", "method=listwise", f"limit={N}", "run.limit_strategy=stratified",
                      f"cache.path={tmp_path / cache}", *overrides)
    return run_from_config(cfg, tmp_path / name, backend=backend).to_dict()


def _records(run_dir):
    from recbench.store.schema import read_run

    return list(read_run(run_dir, require_result=False).samples())


def test_pairwise_order_consistency(tmp_path):
    rel = _truth_table()

    def always_a(req):
        return "[User A]"

    _run(tmp_path, ScriptedBackend(always_a), "method=pairwise", "method.constrained=false", name="biased")
    block = audit_aggregates(_records(tmp_path / "biased"), "ptc")["pair_order_consistency"]
    # every comparison: the first-shown user wins in both orders -> all inconsistent, all won by slot 1
    assert block.consistent == 0.0 and block.first_slot_wins_inconsistent == 1.0
    recs = _records(tmp_path / "biased")
    assert block.n == sum(r.details["comparisons"] for r in recs) == sum(r.details["inconsistent"] for r in recs)

    def by_truth(req):
        text = req.messages[-1][1]
        title = re.search(r'item "(.*?)"', text).group(1)
        found = re.findall(r"Average rating: ([0-9.]+);.*?number of ratings: (\d+)", text)
        a, b = (rel[(title, avg, int(n))] for avg, n in found)
        return "[User A]" if a > b else "[User B]"

    _run(tmp_path, ScriptedBackend(by_truth), "method=pairwise", "method.constrained=false", name="oracle",
         cache="c2.sqlite")
    block = audit_aggregates(_records(tmp_path / "oracle"), "ptc")["pair_order_consistency"]
    assert block.consistent == 1.0 and math.isnan(block.first_slot_wins_inconsistent)
