"""Paired verdicts whose cost does not depend on the answer (issue 44): the exact sign-flip p of lattice differences
(recbench.stats.lattice) against full enumeration and the normal approximation's Berry-Esseen bound, the flip budget
of the Monte Carlo p, the counts bootstrap of few-valued units, and the precision every record states."""
import itertools
import math
import time

import numpy as np
import pytest
from scipy import stats

from recbench.stats.lattice import lattice_steps, sign_flip_lattice_p
from recbench.stats.paired import (
    FIRST_RESAMPLES,
    FLIP_BUDGET,
    MAX_RESAMPLES,
    paired_bootstrap_ci,
    resample_cap,
    sign_flip_test,
)

pytestmark = pytest.mark.fast


def _enumerated(d: np.ndarray) -> float:
    """P(|S| >= |s|) over all 2^n sign vectors (integers: no rounding)."""
    k = np.rint(np.abs(d) * 6).astype(np.int64)
    signs = np.array(list(itertools.product((-1, 1), repeat=len(d))), dtype=np.int64)
    s = abs(int(np.rint(d.sum() * 6)))
    return float(np.mean(np.abs(signs @ k) >= s))


def test_lattice_p_equals_full_enumeration_for_thirds_and_sixths():
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(150):
        d = rng.integers(-12, 13, rng.integers(2, 15)) / 6.0  # PTC of groups of 4: sixths, -2 .. 2
        d = d[d != 0]
        if len(d) < 2:
            continue
        steps = lattice_steps(d)
        assert steps is not None and steps.min() >= 1
        p, err = sign_flip_lattice_p(steps, np.sign(d))
        worst = max(worst, abs(p - _enumerated(d)))
        assert err < 1e-10
    assert worst < 1e-13


def test_values_off_any_lattice_are_left_to_monte_carlo():
    rng = np.random.default_rng(1)
    assert lattice_steps(rng.normal(0, 1, 50)) is None
    assert lattice_steps(np.array([1.0, math.pi])) is None  # no step min/q, q <= 60, fits pi
    assert lattice_steps(np.array([0.5, 1.5, 2.0])).tolist() == [1, 3, 4]


def test_lattice_p_at_60000_units_is_within_berry_esseen_of_the_normal_approximation_and_costs_no_resamples():
    """S = sum e_i |d_i| has variance sum d^2; |P(|S| >= s) - 2 Phi(-s / sd)| <= 2 x 0.56 x sum|d|^3 / sd^3
    (Berry-Esseen, Shevtsova's constant for non-identical summands). The lattice p is exact, so it must lie inside;
    a clearly significant and a null difference take the same path (no resamples) and a similar time."""
    rng = np.random.default_rng(2)
    base = rng.integers(-6, 7, 60_000) / 3.0
    timings = []
    for shift in (0, 2_000):  # null, then 2,000 units made positive: clearly significant
        d = base.copy()
        d[:shift] = np.abs(d[:shift])
        t = time.process_time()
        res = sign_flip_test(d, np.zeros_like(d))
        timings.append(time.process_time() - t)
        nz = d[d != 0]
        sd = math.sqrt(float((nz ** 2).sum()))
        normal = 2 * stats.norm.sf(abs(nz.sum()) / sd)
        bound = 2 * 0.56 * float((np.abs(nz) ** 3).sum()) / sd ** 3
        assert res.n_resamples is None and res.mc_se is None and res.note == "exact (lattice)"
        assert abs(res.p_value - normal) <= bound
        assert res.p_error is not None and res.p_error < 1e-8 and res.precision.startswith("exact (lattice")
    assert max(timings) < 2.0


@pytest.mark.full
def test_monte_carlo_p_draws_at_most_the_flip_budget_whatever_the_p():
    """Off a lattice, a p below 0.1 is refined only within FLIP_BUDGET sign flips: 25,000 units keep the first
    10,000 sign vectors, 500 units may draw up to FLIP_BUDGET / 500, 40 units the full 800,000 as before."""
    assert resample_cap(40) == MAX_RESAMPLES
    assert resample_cap(500) == FLIP_BUDGET // 500
    assert resample_cap(25_000) == FIRST_RESAMPLES
    rng = np.random.default_rng(3)
    d = rng.normal(0.012, 1.0, 25_000)  # p near 0.05, continuous
    res = sign_flip_test(d, np.zeros_like(d))
    assert res.p_value < 0.1 and res.n_resamples == FIRST_RESAMPLES
    assert res.precision == f"Monte Carlo se {res.mc_se:.2g} (10,000 sign vectors)"


def test_counts_bootstrap_of_few_valued_units_matches_the_index_bootstrap_and_the_t_interval():
    rng = np.random.default_rng(4)
    a = rng.integers(-3, 4, 20_000) / 3.0
    b = np.clip(a + rng.integers(-1, 2, 20_000) / 3.0, -1, 1)
    lo, hi = paired_bootstrap_ci(a, b, n_resamples=4999, seed=1)
    t_lo, t_hi = stats.ttest_rel(a, b).confidence_interval()
    se = (t_hi - t_lo) / (2 * 1.96)
    assert abs(lo - t_lo) < 0.1 * se and abs(hi - t_hi) < 0.1 * se
    assert paired_bootstrap_ci(a, b, n_resamples=4999, seed=1) == (lo, hi)  # seeded


@pytest.mark.full
def test_every_compare_record_states_the_precision_of_its_p(tmp_path, capsys):
    """Thirds (lattice: exact), a continuous metric (Monte Carlo: se), a 0/1 metric (McNemar: exact), a corpus metric
    (swaps: se): the JSON record's p_precision and the terminal's 'p ±' column say which."""
    from tests.stats.test_stats_compare import write_run

    from recbench.cli.compare import main

    rng = np.random.default_rng(5)
    n = 300
    thirds, cont, hits = rng.integers(-3, 4, (2, n)) / 3.0, rng.normal(0, 1, (2, n)), rng.integers(0, 2, (2, n))
    runs = [write_run(tmp_path / lbl, {"ptc": thirds[k].tolist(), "score": (cont[k] + 0.2 * (k == 0)).tolist(),
                                       "hit": hits[k].tolist()}, method=lbl,
                      info={"ptc": {"direction": "higher", "binary": False, "aggregation": "mean"},
                            "score": {"direction": "higher", "binary": False, "aggregation": "mean"},
                            "hit": {"direction": "higher", "binary": True, "aggregation": "mean"}})
            for k, lbl in enumerate(("x", "y"))]
    out = tmp_path / "v.json"
    assert main([str(r) for r in runs] + ["--no-slices", "--json", str(out)]) == 0
    recs = {r["metric"]: r for r in __import__("json").loads(out.read_text())}
    assert recs["ptc"]["p_precision"].startswith("exact (lattice, error <= ") and recs["ptc"]["p_error"] < 1e-9
    assert recs["score"]["p_precision"].startswith("Monte Carlo se ") and recs["score"]["p_mc_se"] > 0
    assert recs["hit"]["p_precision"] == "exact (binomial)"
    text = capsys.readouterr().out
    assert "p ±" in text and "p ± = precision of p: exact (all sign vectors; lattice FFT, rounding <=" in text
    assert f"±{recs['score']['p_mc_se']:.1g}" in text
