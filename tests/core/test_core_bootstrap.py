"""recbench.stats.bootstrap: Kendall tau of two orders of the same ids (hand values, scipy.stats.kendalltau), the
percentile bootstrap (scipy.stats.bootstrap) and the summary that leaves NaN out and counts it."""
import math
import random

import numpy as np
import pytest
from scipy import stats

from recbench.stats.bootstrap import bootstrap_ci, kendall_tau_ranks, summarize

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("truth,pred,expected", [
    (["a", "b"], ["a", "b"], 1.0),
    (["a", "b"], ["b", "a"], -1.0),
    (["a", "b", "c", "d"], ["d", "c", "b", "a"], -1.0),
    (["a", "b", "c", "d"], ["b", "a", "c", "d"], 4 / 6),  # one discordant pair of six
    (["a", "b", "c"], ["a", "c", "b"], 1 / 3),
])
def test_hand_computed(truth, pred, expected):
    assert kendall_tau_ranks(truth, pred) == pytest.approx(expected)


def test_matches_scipy_on_rank_vectors():
    truth, pred = ["u4", "u1", "u3", "u2"], ["u1", "u4", "u2", "u3"]
    tr = {u: i for i, u in enumerate(truth)}
    pr = {u: i for i, u in enumerate(pred)}
    ids = sorted(truth)
    assert kendall_tau_ranks(truth, pred) == pytest.approx(stats.kendalltau([tr[u] for u in ids], [pr[u] for u in ids]).statistic)


def test_fast_tau_equals_scipy_kendalltau():
    rng = random.Random(0)
    for n in range(2, 9):
        for _ in range(50):
            truth = [f"u{i}" for i in range(n)]
            pred = truth[:]
            rng.shuffle(pred)
            rng.shuffle(truth)
            tr = {u: i for i, u in enumerate(truth)}
            pr = {u: i for i, u in enumerate(pred)}
            ref = stats.kendalltau([tr[u] for u in truth], [pr[u] for u in truth]).statistic
            assert kendall_tau_ranks(truth, pred) == pytest.approx(ref)


def test_mismatched_ids_are_an_error():
    with pytest.raises(ValueError, match="different ids"):
        kendall_tau_ranks(["a", "b"], ["a", "c"])


def test_summary_excludes_nan_and_counts_it():
    s = summarize([1.0, 0.0, math.nan, 0.5], n_boot=200)
    assert s["mean"] == pytest.approx(0.5) and s["n"] == 3 and s["n_undefined"] == 1
    lo, hi = bootstrap_ci([0.0, 1.0] * 50, n_boot=500)
    assert lo < 0.5 < hi and hi - lo < 0.3


def test_bootstrap_ci_equals_scipy_percentile_bootstrap():
    """bootstrap_ci is scipy.stats.bootstrap(method="percentile") without the import: same draws, same bounds."""
    rng = np.random.default_rng(7)
    cases = [[0.0, 1.0], [1.0, -1.0, 0.0], list(rng.normal(size=37)), list(rng.choice([-1.0, -1 / 3, 1 / 3, 1.0], 120)),
             list(rng.integers(0, 2, 500).astype(float))]
    for values in cases:
        for n_boot, level, seed in [(1000, 0.95, 0), (200, 0.9, 3), (999, 0.99, 11)]:
            ref = stats.bootstrap((np.asarray(values),), np.mean, n_resamples=n_boot, confidence_level=level,
                                  method="percentile", random_state=np.random.default_rng(seed), vectorized=True)
            got = bootstrap_ci(values, n_boot, level, seed)
            assert got == pytest.approx((ref.confidence_interval.low, ref.confidence_interval.high), rel=1e-12, abs=1e-15)
    assert all(math.isnan(v) for v in bootstrap_ci([1.0]))
