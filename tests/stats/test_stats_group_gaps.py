"""Fairness gaps within a run (recbench/stats/group_gaps.py): Welch's test and CI equal scipy's, the largest gap is
best-served minus worst-served, Holm over every pair of groups, users as units."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from recbench.stats.group_gaps import attribute_gap, group_gaps, welch
from recbench.store.records import SampleRecord

pytestmark = pytest.mark.fast


def test_welch_equals_scipy():
    rng = np.random.default_rng(0)
    for _ in range(5):
        a, b = rng.normal(0.3, 1, 40), rng.normal(0, 2, 25)
        d, lo, hi, p = welch(a, b)
        ref = stats.ttest_ind(a, b, equal_var=False)
        ci = ref.confidence_interval(0.95)
        assert (d, lo, hi, p) == pytest.approx((a.mean() - b.mean(), ci.low, ci.high, ref.pvalue), rel=1e-10)


def _task(**kw):
    fields = {"name": "toy", "headline_metric": "hr@10", "cluster_by": None, "user_by": None,
              "fairness_by": ("activity",), "slice_values": lambda key, vals: sorted(vals)}
    return SimpleNamespace(**{**fields, **kw})


def test_largest_gap_names_the_worst_served_group_with_holm_over_the_pairs():
    rng = np.random.default_rng(1)
    groups = {"cold": rng.binomial(1, 0.2, 200).astype(float), "warm": rng.binomial(1, 0.3, 200).astype(float),
              "heavy": rng.binomial(1, 0.5, 200).astype(float)}
    r = attribute_gap(_task(), "hr@10", "activity", groups, None)
    assert r["worst"] == "cold" and r["run_a"] == "heavy" and r["run_b"] == "cold"
    d, lo, hi, p = welch(groups["heavy"], groups["cold"])
    assert (r["diff"], r["ci_low"], r["ci_high"], r["p_value"]) == pytest.approx((d, lo, hi, p))
    ps = [welch(groups[a], groups[b])[3] for a, b in [("cold", "warm"), ("cold", "heavy"), ("warm", "heavy")]]
    assert r["p_adjusted"] == pytest.approx(min(1.0, 3 * min(ps)))  # Holm: the smallest p times the family size
    assert r["family_size"] == 3 and r["verdict"] == "heavy better" and r["significant"]
    # a lower-is-better metric: the worst group is the one with the largest mean
    r = attribute_gap(_task(), "arp@10", "activity", {"a": np.array([1.0, 2, 3]), "b": np.array([5.0, 6, 7])}, None)
    assert r["worst"] == "b" and r["diff"] == pytest.approx(-4.0)


def test_a_user_with_several_examples_is_one_unit():
    recs = [SampleRecord(id=f"{u}-{q}", meta={"activity": "cold" if u < 3 else "heavy", "user": str(u)},
                         metrics={"hr@10": float((u + q) % 2)}) for u in range(6) for q in range(4)]
    out = group_gaps(_task(user_by="user"), recs)["activity"]["hr@10"]
    assert {g: v["n"] for g, v in out["groups"].items()} == {"cold": 3, "heavy": 3}
    assert out["cluster_by"] == "user"


def test_a_group_of_one_unit_is_shown_but_not_compared():
    groups = {"a": np.array([0.0, 1, 0, 1]), "b": np.array([1.0, 1, 1, 0]), "c": np.array([5.0])}
    r = attribute_gap(_task(), "hr@10", "activity", groups, None)
    assert r["groups"]["c"] == {"n": 1, "mean": 5.0} and {r["run_a"], r["run_b"]} == {"a", "b"}
    assert r["family_size"] == 1 and r["worst"] == "a"
