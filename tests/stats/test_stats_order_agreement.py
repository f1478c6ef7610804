"""Order-audit statistics against scipy and hand-computed values."""
import itertools

import numpy as np
import pytest
from scipy import stats

from recbench.stats.order_agreement import first_slot_test, kendalls_w, pair_consistency

pytestmark = pytest.mark.fast


def test_kendalls_w_hand_and_spearman_identity():
    assert kendalls_w([[1, 2, 3], [1, 2, 3], [1, 2, 3]]) == pytest.approx(1.0)
    assert kendalls_w([[1, 2], [2, 1]]) == pytest.approx(0.0)
    # hand: K=3, m=3, rank totals 4, 6, 8 around the mean 6: S = 8; W = 12*8 / (9*24) = 4/9
    assert kendalls_w([[1, 2, 3], [2, 1, 3], [1, 3, 2]]) == pytest.approx(4 / 9)
    rng = np.random.default_rng(0)
    for k, m in ((4, 5), (3, 4), (6, 8)):
        r = np.array([rng.permutation(m) + 1 for _ in range(k)])
        rho = np.mean([stats.spearmanr(r[i], r[j])[0] for i, j in itertools.combinations(range(k), 2)])
        assert rho == pytest.approx((k * kendalls_w(r) - 1) / (k - 1))
    with pytest.raises(ValueError, match="ranks 1..m"):
        kendalls_w([[1, 1], [1, 2]])


def test_first_slot_test_mixed_sizes():
    # 6 groups of 2 and 6 of 3 users: expected first-slot counts 6/2 + 6/3 = 5, 5, 2
    res = first_slot_test([0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 2, 2], [2] * 6 + [3] * 6)
    assert res.observed == [7, 3, 2] and res.expected == pytest.approx([5, 5, 2])
    chi2 = (7 - 5) ** 2 / 5 + (3 - 5) ** 2 / 5 + 0
    assert res.chi2 == pytest.approx(chi2) and res.p_value == pytest.approx(stats.chi2.sf(chi2, 2))


def test_pair_consistency():
    # pair 1: first slot wins in both orders (inconsistent, slot 1); 2 and 3 consistent; 4: second slot both times
    res = pair_consistency([True, True, False, False], [True, False, True, False])
    assert res.n == 4 and res.consistent == 0.5 and res.first_slot_wins_inconsistent == 0.5
