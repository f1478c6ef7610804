"""PTC on hand-computed fixtures: the fixed per-user-rank tau vs the legacy id-list tau of the released code
(recbench.stats.bootstrap.kendall_tau_ranks itself: tests/core/test_core_bootstrap.py)."""
import random

import pytest
from scipy import stats

from recbench.stats.bootstrap import kendall_tau_ranks
from recbench.tasks.perrec.metrics import kendall_tau_legacy

pytestmark = pytest.mark.fast


def test_documented_case_fixed_vs_legacy():
    # truth ranks users 1,3,2; prediction 3,1,2. Per-user ranks: truth (1,3,2) vs pred (2,3,1) -> tau = (2-1)/3
    assert kendall_tau_ranks([1, 3, 2], [3, 1, 2]) == pytest.approx(1 / 3)
    # the released code correlated the two id lists themselves: every pair discordant -> -1
    assert kendall_tau_legacy([1, 3, 2], [3, 1, 2]) == pytest.approx(-1.0)


def test_legacy_tau_equals_scipy_kendalltau_of_the_id_lists():
    rng = random.Random(0)
    for n in range(2, 9):
        for _ in range(50):
            truth, pred = list(range(n)), list(range(n))
            rng.shuffle(pred)
            rng.shuffle(truth)
            assert kendall_tau_legacy(truth, pred) == pytest.approx(stats.kendalltau(truth, pred).statistic)
