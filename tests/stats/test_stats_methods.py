"""Corrections, compact letters, power, clustering/seeds and random-ranker expectations against references."""
import itertools
import math

import numpy as np
import pytest
from recbench.tasks.llmrec.metrics import hit_at_k, ndcg_at_k
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from recbench.stats import (
    adjust,
    cluster_means,
    compact_letters,
    expected_hr_at_k,
    expected_ndcg_at_k,
    min_detectable_difference,
    min_detectable_difference_normal,
    paired_sd_with_seeds,
    pool_seeds,
    power,
)

pytestmark = pytest.mark.fast


# ---- multiple comparisons -------------------------------------------------------------------------
def test_holm_and_bh_hand_computed():
    p = [0.01, 0.04, 0.03, 0.2]
    # Holm: sorted 0.01, 0.03, 0.04, 0.2 times 4, 3, 2, 1 -> 0.04, 0.09, 0.08 -> running max 0.09, 0.2
    holm, rej = adjust(p, "holm")
    assert holm == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert rej.tolist() == [True, False, False, False]
    # BH: p * 4 / rank = 0.04, 0.06, 0.0533, 0.2 -> running min from the top: 0.04, 0.0533, 0.0533, 0.2
    bh, rej = adjust(p, "bh")
    assert bh == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.2])
    assert rej.tolist() == [True, False, False, False]


def test_adjust_matches_statsmodels_and_leaves_nan_out_of_the_family():
    rng = np.random.default_rng(0)
    p = rng.random(30) ** 3
    for method, sm in (("holm", "holm"), ("bh", "fdr_bh")):
        assert adjust(p, method)[0] == pytest.approx(multipletests(p, method=sm)[1])
    with_nan = np.array([0.01, np.nan, 0.02])
    adj, rej = adjust(with_nan, "holm")
    assert adj[0] == pytest.approx(0.02) and math.isnan(adj[1]) and not rej[1]
    with pytest.raises(ValueError, match="unknown correction 'bonf'"):
        adjust(p, "bonf")


# ---- compact letter display ---------------------------------------------------------------------------
def test_letters_hand_worked_example():
    # A > B > C > D; significant: A-C, A-D, B-D.
    # insert A-C: {ABCD} -> {BCD}, {ABD}; insert A-D: {ABD} -> {BD}, {AB}; absorb {BD} (inside {BCD});
    # insert B-D: {BCD} -> {CD}, {BC}. Columns by best member: {AB}=a, {BC}=b, {CD}=c.
    got = compact_letters("ABCD", [("A", "C"), ("D", "A"), ("B", "D")])
    assert got == {"A": "a", "B": "ab", "C": "bc", "D": "c"}


def test_letters_no_difference_and_all_different():
    assert compact_letters(["x", "y", "z"], []) == {"x": "a", "y": "a", "z": "a"}
    every = list(itertools.combinations("wxyz", 2))
    assert compact_letters("wxyz", every) == {"w": "a", "x": "b", "y": "c", "z": "d"}


def test_letters_share_a_letter_exactly_when_not_significant():
    rng = np.random.default_rng(1)
    names = [f"m{i}" for i in range(7)]
    for _ in range(200):
        # significance that respects the order (as after a correction on sorted means): far pairs more often
        sig = [(names[i], names[j]) for i, j in itertools.combinations(range(7), 2) if rng.random() < (j - i) / 7]
        got = compact_letters(names, sig)
        for x, y in itertools.combinations(names, 2):
            shares = bool(set(got[x]) & set(got[y]))
            assert shares == ((x, y) not in sig), (sig, got, x, y)
        assert got[names[0]].startswith("a")


def test_letters_bad_names():
    with pytest.raises(ValueError, match="not in"):
        compact_letters(["a", "b"], [("a", "c")])


# ---- power --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,sd,effect", [(120, 1.05, 0.25), (600, 0.8, 0.05), (30, 0.5, 0.3), (10, 1.0, 0.9)])
def test_power_matches_statsmodels_ttestpower(n, sd, effect):
    ref = TTestPower().power(effect_size=effect / sd, nobs=n, alpha=0.05, alternative="two-sided")
    assert power(effect, n, sd) == pytest.approx(ref, abs=1e-9)


@pytest.mark.parametrize("n,sd", [(120, 1.05), (600, 0.8), (40, 0.3), (8, 1.0)])
def test_min_detectable_difference_matches_statsmodels_solve_power(n, sd):
    ref = TTestPower().solve_power(effect_size=None, nobs=n, alpha=0.05, power=0.8, alternative="two-sided") * sd
    mdd = min_detectable_difference(n, sd)
    assert mdd == pytest.approx(ref, rel=1e-6)
    assert power(mdd, n, sd) == pytest.approx(0.8, abs=1e-9)
    normal = min_detectable_difference_normal(n, sd)
    assert normal == pytest.approx(2.8016 * sd / math.sqrt(n), rel=1e-4)  # (1.95996 + 0.84162)
    assert normal < mdd  # t needs a larger effect than the normal approximation, most at small n


def test_paired_sd_with_seeds_is_millers_variance_sum():
    assert paired_sd_with_seeds(0.3, 0.2, 0.1, k=5) == pytest.approx(math.sqrt(0.09 + 0.3 / 5))


# ---- clusters and seeds ----------------------------------------------------------------------------------
def test_cluster_means_average_within_cluster_in_first_appearance_order():
    means, labels = cluster_means([1.0, 0.0, 1.0, 1.0, 0.5], ["u2", "u1", "u2", "u3", "u1"])
    assert labels == ["u2", "u1", "u3"]
    assert means.tolist() == [1.0, 0.25, 1.0]


def test_pool_seeds_variance_decomposition():
    rng = np.random.default_rng(2)
    x = rng.normal(0, 0.5, 4000)  # each example's expected score, Var(x) = 0.25
    k, sigma = 4, 1.0  # seed noise, sigma^2 = 1
    scores = x[None, :] + rng.normal(0, sigma, (k, 4000))
    pool = pool_seeds(scores)
    assert pool.k == k and pool.means == pytest.approx(scores.mean(axis=0))
    assert pool.within_var == pytest.approx(1.0, abs=0.05)
    # Miller 2024 eq.: Var(per-example mean) = Var(x) + E[sigma^2]/K = 0.25 + 0.25
    assert np.var(pool.means, ddof=1) == pytest.approx(0.5, abs=0.03)
    assert pool.seed_share_of_var == pytest.approx(0.5, abs=0.04)


# ---- random-ranker expectations ---------------------------------------------------------------------------
@pytest.mark.parametrize("k,c", [(1, 100), (5, 100), (10, 100), (20, 20), (10, 7)])
def test_random_ranker_expectations_equal_the_task_metrics_averaged_over_every_position(k, c):
    cands = [f"i{j}" for j in range(c)]
    # a uniformly random ranking puts the positive at each position with probability 1/C: average over positions
    hr = np.mean([hit_at_k(cands, cands[pos], k) for pos in range(c)])
    nd = np.mean([ndcg_at_k(cands, cands[pos], k) for pos in range(c)])
    assert expected_hr_at_k(k, c) == pytest.approx(hr, abs=1e-12)
    assert expected_ndcg_at_k(k, c) == pytest.approx(nd, abs=1e-12)
    assert expected_hr_at_k(10, 100) == 0.1
