"""Coverage against the control set, checked against the formulas written out here: Wilson score intervals,
Newcombe's hybrid score interval of a difference (his method 10, built from the two Wilson intervals) and the
one-sided Fisher exact p-value as a hypergeometric tail."""
from __future__ import annotations

import math

import pytest
from scipy.stats import norm

from recbench.tasks.memorization.stats import difference_summary, fisher_greater, rate_summary

pytestmark = pytest.mark.fast


def wilson(k: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    z = norm.ppf(1 - alpha / 2)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def newcombe(k1: int, n1: int, k0: int, n0: int) -> tuple[float, float]:
    p1, p0 = k1 / n1, k0 / n0
    l1, u1 = wilson(k1, n1)
    l0, u0 = wilson(k0, n0)
    d = p1 - p0
    return d - math.sqrt((p1 - l1) ** 2 + (u0 - p0) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p0 - l0) ** 2)


@pytest.mark.parametrize("k1,n1,k0,n0", [(0, 50, 0, 50), (15, 50, 0, 50), (7, 25, 2, 25), (40, 40, 1, 60)])
def test_rates_and_difference_match_the_formulas(k1, n1, k0, n0):
    s = difference_summary(k1, n1, k0, n0, alpha=0.05)
    assert (s["real"]["ci_low"], s["real"]["ci_high"]) == pytest.approx(wilson(k1, n1), abs=1e-9)
    assert (s["control"]["ci_low"], s["control"]["ci_high"]) == pytest.approx(wilson(k0, n0), abs=1e-9)
    d = s["difference"]
    assert d["estimate"] == pytest.approx(k1 / n1 - k0 / n0)
    assert (d["ci_low"], d["ci_high"]) == pytest.approx(newcombe(k1, n1, k0, n0), abs=1e-9)
    assert d["flagged"] == (d["p_value"] < 0.05)


def test_fisher_one_sided_is_the_hypergeometric_tail():
    # 5 of 25 real recalled, 0 of 25 control: all 5 recalls in the real row has probability C(25,5) / C(50,5)
    assert fisher_greater(5, 25, 0, 25) == pytest.approx(math.comb(25, 5) / math.comb(50, 5))
    assert fisher_greater(4, 25, 0, 25) == pytest.approx(math.comb(25, 4) / math.comb(50, 4))  # 0.0549: not < 0.05
    # more control than real recalls: no evidence at all
    assert fisher_greater(0, 25, 3, 25) == 1.0


def test_nothing_recalled_still_has_an_interval():
    s = difference_summary(0, 50, 0, 50, alpha=0.05)
    assert s["real"]["rate"] == 0 and s["real"]["ci_high"] == pytest.approx(0.0713, abs=1e-4)  # not the bootstrap's 0
    assert s["difference"]["p_value"] == 1.0 and not s["difference"]["flagged"]
    assert rate_summary(0, 0, 0.05)["rate"] is None
    assert difference_summary(3, 10, 0, 0, 0.05)["difference"]["estimate"] is None
