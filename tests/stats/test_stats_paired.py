"""recbench.stats.paired against scipy, statsmodels, exact enumeration and hand-computed values."""
import itertools
import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from recbench.stats.paired import (
    mcnemar_test,
    paired_bootstrap_ci,
    paired_test,
    sign_flip_test,
    t_test,
    wilcoxon_test,
)

pytestmark = pytest.mark.fast


def _exact_sign_flip(d):
    """Two-sided p by enumerating all 2^n sign vectors: 2 * min(P(T >= t), P(T <= t)), capped at 1."""
    d = np.asarray(d, dtype=float)
    t = d.sum()
    signs = np.array(list(itertools.product((-1.0, 1.0), repeat=len(d))))
    null = signs @ d
    eps = 1e-9 * max(1.0, abs(t))
    return min(1.0, 2 * min(np.mean(null >= t - eps), np.mean(null <= t + eps)))


def test_bootstrap_ci_is_scipy_paired_bootstrap_of_the_mean_difference():
    rng = np.random.default_rng(3)
    a = rng.normal(0.3, 1, 80)
    b = a + rng.normal(-0.2, 0.5, 80)
    lo, hi = paired_bootstrap_ci(a, b, n_resamples=4999, seed=11)
    ref = stats.bootstrap((a - b,), np.mean, n_resamples=4999, method="percentile",
                          random_state=np.random.default_rng(11)).confidence_interval
    # same index draws for both runs: the paired bootstrap of (a, b) is the bootstrap of the differences
    assert (lo, hi) == pytest.approx((ref.low, ref.high), abs=1e-12)
    # and it agrees with the t interval of the mean difference to within bootstrap noise
    t_lo, t_hi = stats.ttest_rel(a, b).confidence_interval()
    assert lo == pytest.approx(t_lo, abs=0.03) and hi == pytest.approx(t_hi, abs=0.03)


def test_bootstrap_ci_of_constant_differences_is_that_difference():
    a = np.array([1.0, 0.0, 0.5, 0.25])
    assert paired_bootstrap_ci(a, a - 0.125) == (0.125, 0.125)


def test_sign_flip_is_exact_for_small_n_and_matches_enumeration_and_scipy():
    d = np.array([0.9, -0.4, 1.3, 0.2, 0.7, -0.1, 1.1, 0.5, 0.0, 0.6])  # the zero is dropped
    a, b = d + 1.0, np.ones_like(d)
    res = sign_flip_test(a, b)
    assert res.note == "exact" and res.n_resamples is None
    assert res.p_value == pytest.approx(_exact_sign_flip(d[d != 0]), abs=1e-12)
    ref = stats.permutation_test((a, b), lambda x, y, axis: np.mean(x, axis=axis) - np.mean(y, axis=axis),
                                 permutation_type="samples", vectorized=True, n_resamples=10**6)
    assert res.p_value == pytest.approx(ref.pvalue, abs=1e-12)


def test_sign_flip_of_one_unit_is_the_exact_p_of_one():
    """One non-zero difference: +d and -d are equally extreme, p = 1 by enumeration (scipy refuses n=1; a report
    slice with one group must not crash on it)."""
    res = sign_flip_test([3.0, 1.0], [1.0, 1.0])
    assert res.p_value == _exact_sign_flip(np.array([2.0])) == 1.0


def test_sign_flip_monte_carlo_is_within_its_error_of_the_exact_p_and_refines_to_3_decimals():
    rng = np.random.default_rng(7)
    d = rng.normal(0.7, 1.0, 20)  # 2^20 sign vectors: exact by enumeration, Monte Carlo in the function
    exact = _exact_sign_flip(d)
    assert 0.005 < exact < 0.1  # the range where the function refines
    res = sign_flip_test(d, np.zeros_like(d), seed=1)
    assert res.n_resamples is not None and res.mc_se <= 0.0005 + 1e-12
    assert abs(res.p_value - exact) < 4 * res.mc_se
    fixed = sign_flip_test(d, np.zeros_like(d), n_resamples=2000, seed=1)
    assert fixed.n_resamples == 2000 and abs(fixed.p_value - exact) < 4 * fixed.mc_se


def test_mcnemar_matches_statsmodels_exact_mcnemar():
    rng = np.random.default_rng(5)
    a = (rng.random(300) < 0.30).astype(float)
    b = np.where(rng.random(300) < 0.8, a, 1 - a)
    b[:25] = 0.0
    table = [[np.sum((a == 1) & (b == 1)), np.sum((a == 1) & (b == 0))],
             [np.sum((a == 0) & (b == 1)), np.sum((a == 0) & (b == 0))]]
    ref = mcnemar(table, exact=True).pvalue
    res = mcnemar_test(a, b)
    assert res.p_value == pytest.approx(ref, rel=1e-10)
    assert paired_test(a, b, "auto", binary=True).test == "mcnemar"
    # hand-computed: 2 vs 7 discordant pairs -> 2 * P(X <= 2), X ~ Bin(9, 1/2) = 2 * (1 + 9 + 36) / 512
    a2 = np.array([1, 0, 0, 0, 0, 0, 0, 0, 1, 1], float)
    b2 = np.array([0, 1, 1, 1, 1, 1, 1, 1, 1, 0], float)
    only_a, only_b = 2, 7  # rows 0 and 9 favour a; rows 1-7 favour b
    assert mcnemar_test(a2, b2).p_value == pytest.approx(2 * (1 + 9 + 36) / 512, rel=1e-12)
    assert (only_a, only_b) == (int(np.sum((a2 == 1) & (b2 == 0))), int(np.sum((a2 == 0) & (b2 == 1))))


def test_mcnemar_refuses_non_binary_values():
    with pytest.raises(ValueError, match="0/1"):
        mcnemar_test([0.5, 1.0], [0.0, 1.0])


def test_wilcoxon_hand_computed_exact_value():
    # d = 1..5 and -6: W- = 6; subsets of {1..6} with sum <= 6: 14 of 64 -> two-sided p = 2 * 14/64
    d = np.array([1.0, 2.0, 3.0, 4.0, 5.0, -6.0])
    assert wilcoxon_test(d, np.zeros(6)).p_value == pytest.approx(2 * 14 / 64, abs=1e-12)


def test_t_test_hand_formula():
    a = np.array([0.2, 0.5, 0.9, 0.4, 0.7, 0.1])
    b = np.array([0.1, 0.6, 0.5, 0.2, 0.3, 0.2])
    d = a - b
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    assert t_test(a, b).p_value == pytest.approx(2 * stats.t.sf(abs(t), len(d) - 1), rel=1e-12)


def test_bad_input_names_the_problem():
    with pytest.raises(ValueError, match="NaN"):
        sign_flip_test([1.0, math.nan], [0.0, 0.0])
    with pytest.raises(ValueError, match="unknown test 'z'"):
        paired_test([1.0, 0.0], [0.0, 0.0], "z")


# ---- issue 20: Monte Carlo error of the two-sided p, zero up to rounding, help text --------------------------------
THIRDS = np.array([-1.0, -1 / 3, 1 / 3, 1.0])  # PTC of a 3-user group


def test_difference_that_is_zero_up_to_rounding_has_exact_p_one():
    """PTC thirds whose mean difference is 0 in exact arithmetic but 2.2e-16 in floating point: p is 1, as scipy
    gives on the same values scaled to exact integers (scipy on the floats gives 0.9375)."""
    a, b = THIRDS[[0, 1, 2, 3, 3, 0]], THIRDS[[2, 1, 1, 1, 2, 2]]
    assert (a - b).sum() != 0  # the rounding is really there
    d3 = np.round(3 * (a - b))  # exact integers: the theoretical differences
    assert d3.sum() == 0
    exact = stats.permutation_test((d3[d3 != 0],), np.sum, permutation_type="samples", n_resamples=10**6).pvalue
    assert exact == 1.0 and _exact_sign_flip(d3[d3 != 0]) == 1.0
    res = sign_flip_test(a, b)
    assert res.p_value == 1.0 and res.n_resamples is None
    assert sign_flip_test(a, b, n_resamples=2000).p_value == 1.0  # also with a fixed (Monte Carlo) budget


def test_units_whose_difference_is_rounding_noise_are_dropped_like_exact_zeros():
    rng = np.random.default_rng(8)
    a = rng.normal(0.4, 1.0, 12)
    b = a - rng.normal(0.5, 1.0, 12)
    b[:4] = a[:4]  # four exact ties
    noisy = b.copy()
    noisy[:4] = a[:4] + np.array([4.4e-16, -2.2e-16, 1e-17, -5.5e-17])  # the same ties, up to rounding
    clean, dirty = sign_flip_test(a, b), sign_flip_test(a, noisy)
    assert clean.note == dirty.note == "exact" and dirty.p_value == clean.p_value
    assert clean.p_value == pytest.approx(_exact_sign_flip((a - b)[4:]), abs=1e-12)
    assert wilcoxon_test(a, noisy).p_value == wilcoxon_test(a, b).p_value == pytest.approx(
        stats.wilcoxon((a - b)[4:]).pvalue)


def test_monte_carlo_se_of_the_two_sided_p_matches_its_spread_over_seeds():
    """300 seeds x 2,000 sign vectors on a 16-unit difference whose exact p (scipy, all 65,536 sign vectors) is
    about 0.03: the reported se, sqrt(2 p (1 - p/2) / B), equals the sd of the Monte Carlo p over seeds within 12%
    (the binomial sqrt(p (1 - p) / B) is 1.41x too small), and 1.96 se covers the exact p about 95% of the time."""
    from recbench.stats.paired import sign_flip_mc_se

    d = np.random.default_rng(11).normal(0.0, 1.0, 16) + 0.35
    exact = stats.permutation_test((d,), np.sum, permutation_type="samples", n_resamples=2**16).pvalue
    assert exact == pytest.approx(_exact_sign_flip(d), abs=1e-12) and 0.01 < exact < 0.06
    res = [sign_flip_test(d, np.zeros(16), n_resamples=2000, seed=s) for s in range(300)]
    p = np.array([r.p_value for r in res])
    se = np.array([r.mc_se for r in res])
    assert all(r.n_resamples == 2000 for r in res)
    assert np.mean(se) == pytest.approx(np.std(p, ddof=1), rel=0.12)
    assert np.mean(se) == pytest.approx(sign_flip_mc_se(exact, 2000), rel=0.1)
    covered = np.mean(np.abs(p - exact) <= 1.96 * se)
    assert 0.90 <= covered <= 0.99
    binomial = np.sqrt(p * (1 - p) / 2000)
    assert np.mean(np.abs(p - exact) <= 1.96 * binomial) < covered  # the old error was too small


def test_refinement_reaches_the_target_se_for_every_p_it_refines():
    """Below REFINE_BELOW the Monte Carlo p gets enough sign vectors for TARGET_MC_SE with the two-sided error (up
    to 760,000 at p = 0.1); at or above it, the first 10,000 are kept."""
    from recbench.stats.paired import (
        FIRST_RESAMPLES,
        MAX_RESAMPLES,
        REFINE_BELOW,
        TARGET_MC_SE,
        resamples_for_se,
        sign_flip_mc_se,
    )

    assert resamples_for_se(REFINE_BELOW, TARGET_MC_SE) <= MAX_RESAMPLES
    rng = np.random.default_rng(3)
    base = rng.normal(0.0, 1.0, 40)
    base -= base.mean()
    got = {}
    for shift in (0.33, 0.25):  # p near 0.084 and 0.19 (40 units: Monte Carlo)
        r = sign_flip_test(base + shift, np.zeros(40), seed=2)
        got[shift] = r
        assert r.mc_se == pytest.approx(sign_flip_mc_se(r.p_value, r.n_resamples))
    low, high = got[0.33], got[0.25]
    assert 0.03 < low.p_value < REFINE_BELOW <= high.p_value
    assert low.n_resamples > 300_000 and low.mc_se <= TARGET_MC_SE * 1.05
    assert high.n_resamples == FIRST_RESAMPLES


def test_compare_help_states_the_refinement_the_code_does():
    from recbench.cli.compare import build_parser
    from recbench.stats.paired import FIRST_RESAMPLES, REFINE_BELOW, TARGET_MC_SE

    text = " ".join(build_parser().format_help().split())
    assert f"below p {REFINE_BELOW:g} more until the Monte Carlo standard error is at most {TARGET_MC_SE:g}" in text
    assert f"{FIRST_RESAMPLES:,} sign vectors" in text
    assert "0.2" not in text
