"""Statistics of LLM judges against hand-computed fixtures, scipy, statsmodels-free references, the `krippendorff`
package, Krippendorff's published worked example, and Bradley-Terry fits with known answers."""
import math

import krippendorff
import numpy as np
import pytest
from scipy import optimize, stats

from recbench.stats.bradley_terry import FALLBACK_ALPHA, bradley_terry
from recbench.stats.judging import (
                                    both_orders_verdict,
                                    krippendorff_alpha,
                                    length_bias,
                                    panel_majority,
                                    position_consistency,
                                    verdict_flip_rate,
                                    win_rate,
)

pytestmark = pytest.mark.fast

NAN = math.nan
#: Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4 observers x 12 units, missing
#: values; published alpha nominal 0.743, interval 0.849
KRIPPENDORFF_EXAMPLE = np.array([
    [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
    [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
])


def exact_ci(k, n, alpha=0.05):
    """Clopper-Pearson through scipy (an independent route to statsmodels' method="beta")."""
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=1 - alpha, method="exact")
    return ci.low, ci.high


# ---- win rate and the both-orders rule ------------------------------------------------------------------------------
def test_win_rate_hand_value_and_scipy_bootstrap():
    # (1 + 0.5 + 0 + 1 + 1 + 0) / 6 = 3.5 / 6
    x = [1, 0.5, 0, 1, 1, 0]
    res = win_rate(x, n_boot=2000, seed=3)
    assert res["estimate"] == pytest.approx(3.5 / 6) and res["n"] == 6
    ref = stats.bootstrap((np.array(x, dtype=float),), np.mean, n_resamples=2000, method="percentile",
                          random_state=np.random.default_rng(3)).confidence_interval
    assert (res["ci_low"], res["ci_high"]) == pytest.approx((ref.low, ref.high))
    one = win_rate([1.0], n_boot=10)  # one example: no interval
    assert one["estimate"] == 1.0 and math.isnan(one["ci_low"]) and math.isnan(one["ci_high"])


def test_win_rate_refuses_nan_and_out_of_range():
    with pytest.raises(ValueError, match="NaN"):
        win_rate([1, NAN, 0])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        win_rate([1, 2])


def test_both_orders_verdict_table_and_refusals():
    table = {("A", "B"): "win", ("B", "A"): "loss"}
    for first in ("A", "B", "tie"):
        for second in ("A", "B", "tie"):
            assert both_orders_verdict(first, second) == table.get((first, second), "tie")
    for bad in ("a", "C", "", None, 1):
        with pytest.raises(ValueError, match="one of A, B, tie"):
            both_orders_verdict(bad, "A")
        with pytest.raises(ValueError, match="one of A, B, tie"):
            both_orders_verdict("A", bad)


# ---- position consistency and the noise floor -----------------------------------------------------------------------
def test_position_consistency_hand_fixture():
    # pairs: (A,B) kept, (B,A) kept, (tie,tie) kept, (A,A) flipped, (A,tie) flipped: 3 of 5 consistent;
    # "A" labels: 1 + 1 + 0 + 2 + 1 = 5 of 10 verdicts
    first, swapped = ["A", "B", "tie", "A", "A"], ["B", "A", "tie", "A", "tie"]
    res = position_consistency(first, swapped)
    assert res["consistent"] == pytest.approx(3 / 5) and res["n_pairs"] == 5
    assert res["first_position_rate"] == pytest.approx(5 / 10)
    assert res["consistent_ci"] == pytest.approx(exact_ci(3, 5))
    assert res["first_position_ci"] == pytest.approx(exact_ci(5, 10))


def test_position_consistency_always_first_judge():
    # a judge that always answers "A": no pair survives the swap, every verdict picks the first slot
    res = position_consistency(["A"] * 20, ["A"] * 20)
    assert res["consistent"] == 0 and res["first_position_rate"] == 1
    assert res["consistent_ci"] == pytest.approx(exact_ci(0, 20))
    assert [both_orders_verdict("A", "A")] * 20 == ["tie"] * 20


def test_position_consistency_refusals():
    with pytest.raises(ValueError, match="one of A, B, tie"):
        position_consistency(["A", "winner"], ["B", "A"])
    with pytest.raises(ValueError, match="one swapped verdict per pair"):
        position_consistency(["A"], ["B", "A"])


def test_verdict_flip_rate_hand_and_exact_ci():
    # pairs (A,A) (B,A) (tie,tie) (A,None: dropped) (B,B): 1 of 4 changed
    res = verdict_flip_rate(["A", "B", "tie", "A", "B"], ["A", "A", "tie", None, "B"])
    assert (res["estimate"], res["n"], res["n_changed"], res["n_dropped"]) == (0.25, 4, 1, 1)
    assert (res["ci_low"], res["ci_high"]) == pytest.approx(exact_ci(1, 4))
    # scores: 4 -> 4, 3 -> 5, NaN dropped, 2 -> 2: 1 of 3 changed
    res = verdict_flip_rate([4, 3, NAN, 2], [4, 5, 1, 2.0])
    assert (res["estimate"], res["n"], res["n_dropped"]) == (pytest.approx(1 / 3), 3, 1)
    assert math.isnan(verdict_flip_rate([], [])["estimate"])


# ---- length bias ----------------------------------------------------------------------------------------------------
def test_length_bias_matches_scipy_and_its_bootstrap():
    rng = np.random.default_rng(7)
    lengths = rng.integers(20, 400, 60).astype(float)
    scores = np.clip(np.round(1 + lengths / 100 + rng.normal(0, 1, 60)), 1, 5)  # ties in scores, like 1-5 ratings
    scores[[3, 11]], lengths[20] = NAN, NAN
    res = length_bias(scores, lengths, n_boot=300, seed=5)
    keep = ~(np.isnan(scores) | np.isnan(lengths))
    ref = stats.spearmanr(scores[keep], lengths[keep])
    assert res["rho"] == pytest.approx(ref.statistic) and res["p_value"] == pytest.approx(ref.pvalue)
    assert (res["n"], res["n_dropped"], res["note"]) == (57, 3, None)
    s, n_len = scores[keep], lengths[keep]
    idx = np.random.default_rng(5).integers(0, 57, (300, 57))  # the same draws, one scipy call per resample
    boots = np.array([stats.spearmanr(s[r], n_len[r]).statistic for r in idx])
    assert (res["ci_low"], res["ci_high"]) == pytest.approx(tuple(np.quantile(boots, [0.025, 0.975])))


def test_length_bias_hand_and_degenerate():
    # lengths in the order of the scores: ranks agree exactly, rho = 1
    assert length_bias([1, 2, 3, 4], [10, 20, 35, 90], n_boot=50)["rho"] == pytest.approx(1.0)
    assert length_bias([4, 3, 2, 1], [10, 20, 35, 90], n_boot=50)["rho"] == pytest.approx(-1.0)
    short = length_bias([1, 2, NAN], [5, 6, 7])
    assert math.isnan(short["rho"]) and (short["n"], short["n_dropped"]) == (2, 1) and "needs 3" in short["note"]
    const = length_bias([3, 3, 3, 3], [1, 2, 3, 4])
    assert math.isnan(const["rho"]) and "constant scores" in const["note"]
    with pytest.raises(ValueError, match="one length per score"):
        length_bias([1, 2, 3], [1, 2])


# ---- Krippendorff's alpha and the panel's majority -----------------------------------------------------------------
def test_krippendorff_published_example():
    assert krippendorff_alpha(KRIPPENDORFF_EXAMPLE, level="nominal", n_boot=20)["estimate"] == pytest.approx(0.743,
                                                                                                              abs=5e-4)
    assert krippendorff_alpha(KRIPPENDORFF_EXAMPLE, level="interval", n_boot=20)["estimate"] == pytest.approx(0.849,
                                                                                                               abs=5e-4)
    res = krippendorff_alpha(KRIPPENDORFF_EXAMPLE, n_boot=20)  # ordinal, as the package computes it
    assert res["estimate"] == pytest.approx(krippendorff.alpha(KRIPPENDORFF_EXAMPLE, level_of_measurement="ordinal"))
    assert res["estimate"] == pytest.approx(0.815, abs=5e-4)
    assert (res["n_units"], res["n_raters"]) == (12, 4)


def test_krippendorff_hand_fixture():
    # 2 coders x 4 units, nominal: coincidences o11 = 2, o12 = o21 = 1, o22 = 4; n1 = 3, n2 = 5, n = 8
    # alpha = 1 - (n - 1) * (o12 + o21) / (2 * n1 * n2) = 1 - 7 * 2 / 30 = 8 / 15
    res = krippendorff_alpha(np.array([[1, 1, 2, 2], [1, 2, 2, 2]]), level="nominal", n_boot=20)
    assert res["estimate"] == pytest.approx(8 / 15)
    perfect = krippendorff_alpha(np.array([[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, NAN]]), n_boot=50)
    assert perfect["estimate"] == pytest.approx(1.0) and perfect["ci_low"] == pytest.approx(1.0)


def test_krippendorff_random_matrix_and_unit_bootstrap():
    rng = np.random.default_rng(11)
    truth = rng.integers(1, 6, 40)
    r = np.clip(truth + rng.integers(-1, 2, (3, 40)), 1, 5).astype(float)
    r[rng.random(r.shape) < 0.1] = NAN
    res = krippendorff_alpha(r, n_boot=200, seed=4)
    assert res["estimate"] == pytest.approx(krippendorff.alpha(r, level_of_measurement="ordinal"))
    domain = np.unique(r[~np.isnan(r)])
    idx = np.random.default_rng(4).integers(0, 40, (200, 40))  # resampling units: columns
    boots = [krippendorff.alpha(r[:, c], level_of_measurement="ordinal", value_domain=domain) for c in idx]
    assert (res["ci_low"], res["ci_high"]) == pytest.approx(tuple(np.quantile(boots, [0.025, 0.975])))
    assert res["ci_low"] < res["estimate"] < res["ci_high"]
    with pytest.raises(ValueError, match="raters x units"):
        krippendorff_alpha(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="nominal, ordinal"):
        krippendorff_alpha(r, level="ranked")


def test_panel_majority_labels_and_scores():
    labels = np.array([["A", "A", "B", "tie", None],
                       ["A", "B", "tie", "tie", None],
                       ["B", "tie", None, "A", None]], dtype=object)
    # units: A,A,B -> A; A,B,tie -> tie (three-way); B,tie -> tie; tie,tie,A -> tie (the label); none -> None
    assert panel_majority(labels).tolist() == ["A", "tie", "tie", "tie", None]
    scores = np.array([[3, 2, 1, 2, NAN],
                       [4, 2, 5, 2, NAN],
                       [5, 5, 5, 5, NAN],
                       [4, 1, 1, 5, NAN]])
    # units: 3,4,5,4 -> 4; 2,2,5,1 -> 2; 1,5,5,1 -> tie, median 3; 2,2,5,5 -> tie, median 3.5; none -> NaN
    got = panel_majority(scores)
    assert got[:4].tolist() == [4.0, 2.0, 3.0, 3.5] and math.isnan(got[4])
    with pytest.raises(ValueError, match="mix numbers and labels"):
        panel_majority(np.array([["A", 3]], dtype=object))


# ---- Bradley-Terry --------------------------------------------------------------------------------------------------
def test_bradley_terry_two_runs_hand_solvable():
    # 24 wins, 8 ties, 8 losses for a: a scores 24 + 4 = 28 of 40, so P(a beats b) = 7 / 10 = sigmoid(s_a - s_b),
    # s_a = -s_b = log(7 / 3) / 2
    comps = [("a", "b", 1)] * 24 + [("a", "b", 0.5)] * 8 + [("b", "a", 1)] * 8
    rows = bradley_terry(comps, n_boot=300, seed=2)
    assert [r["run"] for r in rows] == ["a", "b"] and [r["n_comparisons"] for r in rows] == [40, 40]
    assert rows[0]["strength"] == pytest.approx(math.log(7 / 3) / 2) == -rows[1]["strength"]
    assert 1 / (1 + math.exp(rows[1]["strength"] - rows[0]["strength"])) == pytest.approx(7 / 10)
    # the bootstrap resamples comparisons: each resample's strength of a is log(w / (40 - w)) / 2, w its score
    y = np.array([1.0] * 24 + [0.5] * 8 + [0.0] * 8)
    w = y[np.random.default_rng(2).integers(0, 40, (300, 40))].sum(axis=1)
    assert not rows[0]["regularised"] and 0 < w.min() and w.max() < 40  # no resample without a loss or a win
    ref = np.quantile(np.log(w / (40 - w)) / 2, [0.025, 0.975])
    assert (rows[0]["ci_low"], rows[0]["ci_high"]) == pytest.approx(tuple(ref))


def _neg_log_lik(s, i, j, y):
    d = s[i] - s[j]
    return -np.sum(y * -np.logaddexp(0, -d) + (1 - y) * -np.logaddexp(0, d))


def test_bradley_terry_recovers_known_strengths():
    true = {"x": 1.0, "y": 0.2, "z": -1.2}  # mean 0
    rng = np.random.default_rng(0)
    names, comps = list(true), []
    for _ in range(3000):
        a, b = rng.choice(3, 2, replace=False)
        p = 1 / (1 + math.exp(true[names[b]] - true[names[a]]))
        u = rng.random()
        comps.append((names[a], names[b], 1.0 if u < p - 0.05 else 0.5 if u < p + 0.05 else 0.0))
    rows = bradley_terry(comps, n_boot=100)
    assert [r["run"] for r in rows] == ["x", "y", "z"]
    got = {r["run"]: r["strength"] for r in rows}
    assert sum(got.values()) == pytest.approx(0, abs=1e-9)
    for r in rows:
        assert got[r["run"]] == pytest.approx(true[r["run"]], abs=0.15)
        assert r["ci_low"] < r["strength"] < r["ci_high"]
    # the same maximum by a general optimiser on the likelihood, ties as half a win each way
    ix = {n: k for k, n in enumerate(names)}
    i, j = np.array([ix[a] for a, _, _ in comps]), np.array([ix[b] for _, b, _ in comps])
    y = np.array([c[2] for c in comps])
    ml = optimize.minimize(_neg_log_lik, np.zeros(3), args=(i, j, y), method="BFGS", options={"gtol": 1e-9}).x
    ml -= ml.mean()
    assert [got[n] for n in names] == pytest.approx(list(ml), abs=1e-5)


def test_bradley_terry_unbeaten_run_is_regularised():
    # c never scores against anyone: maximum likelihood sends it to -infinity; the fit falls back to choix's
    # regularisation and says so
    comps = [("a", "b", 1)] * 5 + [("a", "b", 0)] * 3 + [("a", "c", 1)] * 4 + [("b", "c", 1)] * 4
    rows = bradley_terry(comps, n_boot=50)
    assert [r["run"] for r in rows] == ["a", "b", "c"] and FALLBACK_ALPHA > 0
    assert all(r["regularised"] and math.isfinite(r["strength"]) and math.isfinite(r["ci_low"]) for r in rows)


def test_bradley_terry_refusals():
    with pytest.raises(ValueError, match="1, 0.5 or 0"):
        bradley_terry([("a", "b", NAN)])
    with pytest.raises(ValueError, match="1, 0.5 or 0"):
        bradley_terry([("a", "b", 2)])
    with pytest.raises(ValueError, match="with itself"):
        bradley_terry([("a", "a", 1)])
    with pytest.raises(ValueError, match="at least 2 runs"):
        bradley_terry([])
