"""aggregate() reads each metric into one column and summarises the overall block and every slice two at a time: each
summary must be the one summarize_many gives on the block's own values (the per-record path), with the block's
metric names in the order its records first name them, NaN and absent metrics counted as undefined."""
from __future__ import annotations

import math
import random

import pytest

from recbench.run.loop import aggregate
from recbench.stats.bootstrap import summarize, summarize_many
from recbench.store.schema import SampleRecord
from tests.core.test_core_contract_metrics import Contract

pytestmark = pytest.mark.fast


def _records(n: int, seed: int) -> list[SampleRecord]:
    """Records in shuffled id order, in three groups; metrics named in two orders, some NaN / None / absent; group
    'z' never names c_sq."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        group = rng.choice("xyz")
        hit = rng.choice([0.0, 1.0, math.nan, None])
        sq = rng.random() * 9
        metrics = {"c_hit": hit} if group == "z" else (
            {"c_sq": sq, "c_hit": hit} if rng.random() < 0.3 else {"c_hit": hit, "c_sq": sq})
        out.append(SampleRecord(id=f"e{i:04d}", meta={"group": group}, prediction=sq, metrics=metrics))
    rng.shuffle(out)
    return out


def test_every_block_equals_summarize_many_on_its_own_records():
    records = _records(500, seed=3)
    task = Contract({"name": "contract"})
    task.breakdown_by = ("group",)
    agg = aggregate(task, records, n_boot=200, seed=7)

    def by_hand(recs):
        recs = sorted(recs, key=lambda r: r.id)
        names = list(dict.fromkeys(k for r in recs for k in r.metrics))
        return summarize_many({m: [r.value(m) for r in recs] for m in names}, 200, 0.95, 7)

    want = by_hand(records)
    assert list(agg.metrics) == list(want)
    for m, s in want.items():
        assert vars(agg.metrics[m]) == s
    assert agg.metrics["c_sq"].n_undefined == sum(r.meta["group"] == "z" for r in records)
    for g in "xyz":
        sub = [r for r in records if r.meta["group"] == g]
        want = by_hand(sub)
        got = agg.breakdown["group"][g]
        assert got.n == len(sub) and list(got.metrics) == list(want)
        for m, s in want.items():
            assert vars(got.metrics[m]) == s, (g, m)
    assert list(agg.breakdown["group"]["z"].metrics) == ["c_hit"]


def test_summarize_many_is_summarize_of_each_column_with_nan_and_none_undefined():
    cols = {"a": [1.0, math.nan, 3.0, 2.0, 5.0], "b": [0, 1, 1, 0, 1], "c": [math.nan, math.nan]}
    got = summarize_many(cols, n_boot=300, seed=5)
    for m, col in cols.items():
        assert got[m] == summarize(col, n_boot=300, seed=5)
    assert got["a"]["n"] == 4 and got["a"]["n_undefined"] == 1 and got["a"]["mean"] == pytest.approx(11 / 4)
    assert got["c"]["n"] == 0 and math.isnan(got["c"]["mean"]) and math.isnan(got["c"]["ci_low"])
