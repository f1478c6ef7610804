"""Paired tests of two systems on the same units: bootstrap CI of the mean difference and two-sided p-values."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recbench.stats._lazy import lazy_module
from recbench.stats.lattice import lattice_steps, sign_flip_lattice_p
from recbench.stats.resample import batch_rows, integer_blocks, sign_flip_null, two_sided_p

stats = lazy_module("scipy.stats")  # imported on first use: a plain run needs no paired test

TESTS = ("permutation", "mcnemar", "wilcoxon", "t")
#: Monte Carlo standard error aimed at for permutation p-values below REFINE_BELOW (p to 3 decimals)
TARGET_MC_SE = 0.0005
REFINE_BELOW = 0.1
FIRST_RESAMPLES = 10_000
#: enough for TARGET_MC_SE at every p below REFINE_BELOW: 2 p (1 - p/2) / 0.0005^2 = 760,000 at p = 0.1
MAX_RESAMPLES = 800_000
#: sign flips (resamples x units) one Monte Carlo p may draw, refinement included: the cost of a p does not grow with
#: how small it is beyond this (800,000 resamples up to 250 units; 10,000, the first draw, from 20,000 units)
FLIP_BUDGET = 200_000_000
#: a paired difference with |d| <= ZERO_TOL x the largest |value| is 0 (floating-point rounding, e.g. PTC thirds)
ZERO_TOL = 1e-9


@dataclass(frozen=True)
class TestResult:
    """A two-sided p-value, the test that gave it, and how it was computed."""

    test: str
    p_value: float
    n_resamples: int | None = None  # Monte Carlo permutations used; None = exact or analytic
    mc_se: float | None = None  # Monte Carlo standard error of p_value; None = exact or analytic
    note: str = ""
    p_error: float | None = None  # bound on |p_value - exact p| when p is computed, not drawn (lattice: rounding)

    @property
    def precision(self) -> str:
        """How exact p_value is, in words: what the JSON record's p_precision and the tables state."""
        return p_precision(self.test, self.n_resamples, self.mc_se, self.p_error, self.note)


def p_precision(test: str, n_resamples: int | None, mc_se: float | None, p_error: float | None,
                note: str = "") -> str:
    """'exact', 'exact (lattice, error <= 1e-09)', 'Monte Carlo se 0.0013 (20,000 sign vectors)', or the test's own
    (McNemar: exact binomial; Wilcoxon: scipy, exact up to 50 units without ties, else normal approximation; t: the
    t distribution, exact for normal differences)."""
    if test == "permutation":
        if n_resamples is not None:
            return f"Monte Carlo se {mc_se:.2g} ({n_resamples:,} sign vectors)"
        return "exact" if p_error is None else f"exact (lattice, error <= {p_error:.0e})"
    return {"mcnemar": "exact (binomial)", "wilcoxon": "scipy (exact up to 50 units without ties, else normal approx.)",
            "t": "t distribution (exact for normal differences)"}.get(test, "exact" if "all differences" in note
                                                                         else "")


def _pair(a, b) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired values need two 1-D arrays of one length, got shapes {a.shape} and {b.shape}")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("paired values contain NaN: drop undefined examples before testing")
    return a, b


def _mean_diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def paired_bootstrap_ci(a, b, *, n_resamples: int = 9999, level: float = 0.95, seed: int = 0,
                        method: str = "percentile") -> tuple[float, float]:
    """Percentile CI of mean(a) - mean(b), resampling units with the same draw for both (scipy.stats.bootstrap, paired)."""
    a, b = _pair(a, b)
    if len(a) < 2:
        return (math.nan, math.nan)
    d = a - b
    if np.all(d == d[0]):  # every resample gives the same difference
        return (float(d[0]), float(d[0]))
    rng = np.random.default_rng(seed)
    theta = _few_valued_theta(a, b, n_resamples, rng)
    if theta is None:
        theta = np.concatenate([_mean_diff(a[i], b[i]) for i in integer_blocks(rng, len(a), n_resamples)])
    return percentile_interval((a, b), _mean_diff, theta, level=level, method=method)


#: from this many units, pairs (a, b) with few distinct values are resampled as multinomial counts (`_few_valued_theta`)
COUNTS_FROM_UNITS = 2_000
#: ... when they take at most this many distinct (a, b) pairs
COUNTS_MAX_PAIRS = 512


def _few_valued_theta(a: np.ndarray, b: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray | None:
    """The bootstrap of mean(a) - mean(b) drawn as counts: a resample of n units takes each distinct pair (a_k, b_k)
    Multinomial(n, share_k) times, so its statistic is sum_k count_k (a_k - b_k) / n, the same distribution as
    resampling unit indices at O(pairs) per resample instead of O(n) (PTC of small groups: 49 pairs at 60,000 units).
    Not scipy's draws: used from COUNTS_FROM_UNITS units with at most COUNTS_MAX_PAIRS distinct pairs, else None."""
    n = len(a)
    if n < COUNTS_FROM_UNITS:
        return None
    pairs, counts = np.unique(np.stack([a, b], axis=1), axis=0, return_counts=True)
    if len(pairs) > COUNTS_MAX_PAIRS:
        return None
    draws = rng.multinomial(n, counts / n, size=n_resamples).astype(float)
    return draws @ pairs[:, 0] / n - draws @ pairs[:, 1] / n


@dataclass(frozen=True)
class _Distribution:
    bootstrap_distribution: np.ndarray


def percentile_interval(data, statistic, theta: np.ndarray, *, level: float, method: str = "percentile",
                        vectorized: bool = True) -> tuple[float, float]:
    """scipy.stats.bootstrap's paired CI from a bootstrap distribution drawn in batches (scipy's own quantiles)."""
    res = stats.bootstrap(data, statistic, paired=True, vectorized=vectorized, n_resamples=0, confidence_level=level,
                          method=method, bootstrap_result=_Distribution(theta), batch=batch_rows(len(data[0])))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _sum_stat(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.sum(x, axis=axis)


def _sign_flip_p(d: np.ndarray, n_resamples: int, seed: int) -> float:
    """scipy.stats.permutation_test's two-sided sign-flip p of sum(d): exact (scipy) when 2^n <= n_resamples, else
    its Monte Carlo p from the same draws in bounded batches (recbench.stats.resample)."""
    rng = np.random.default_rng(seed)
    if 2 ** min(len(d), 64) <= n_resamples:
        return float(stats.permutation_test((d,), _sum_stat, permutation_type="samples", vectorized=True,
                                            n_resamples=n_resamples, alternative="two-sided", random_state=rng,
                                            batch=batch_rows(2 * len(d), n_resamples)).pvalue)
    return two_sided_p(sign_flip_null(d, n_resamples, rng), float(_sum_stat(d)))


def sign_flip_mc_se(p: float, n_resamples: int) -> float:
    """Monte Carlo standard error of a two-sided sign-flip p from n_resamples random sign vectors.

    The two-sided p is a doubled one-sided proportion, p = 2 q with q = (count + 1) / (B + 1) estimating the smaller
    tail probability p/2, so Var(p) = 4 q (1 - q) / B = 2 p (1 - p/2) / B; that is 2 (1 - p/2) / (1 - p) times the
    binomial p (1 - p) / B (1.4x the se near p = 0). A p at its floor 2 / (B + 1) (no sign vector as extreme) is
    taken at that floor, so the se is never 0.
    """
    b = int(n_resamples)
    p = min(1.0, max(float(p), 2.0 / (b + 1)))
    return math.sqrt(2 * p * (1 - p / 2) / b)


def resample_cap(n_units: int, most: int = MAX_RESAMPLES) -> int:
    """The most sign vectors a Monte Carlo p of n_units units may draw: FLIP_BUDGET / n_units within
    [FIRST_RESAMPLES, most]."""
    return max(FIRST_RESAMPLES, min(most, FLIP_BUDGET // max(1, int(n_units))))


def resamples_for_se(p: float, target_se: float) -> int:
    """Sign vectors needed for a two-sided p near `p` to have Monte Carlo standard error `target_se`."""
    return math.ceil(2 * p * (1 - p / 2) / target_se ** 2)


def nonzero_differences(a, b) -> np.ndarray:
    """a - b without the units whose difference is 0 up to rounding (|d| <= ZERO_TOL x the largest |value|)."""
    a, b = _pair(a, b)
    d = a - b
    scale = float(max(np.max(np.abs(a), initial=0.0), np.max(np.abs(b), initial=0.0)))
    return d[np.abs(d) > ZERO_TOL * scale]


def sign_flip_test(a, b, *, n_resamples: int | None = None, seed: int = 0) -> TestResult:
    """Two-sided paired sign-flip permutation test of mean(a - b) = 0 (scipy.stats.permutation_test, samples).

    Units whose difference is 0 up to rounding (`nonzero_differences`) are dropped: flipping them changes nothing.
    A mean difference that is 0 up to rounding gives p = 1 exactly: the sign-flip distribution is symmetric about 0,
    so each tail holds at least half of it. Exact when 2^n <= the resamples. n_resamples=None (adaptive): exact too
    when every |d| is a whole multiple of one step (`recbench.stats.lattice`: the distribution by one FFT, p_error its
    rounding bound); otherwise seeded Monte Carlo that starts at 10,000 and, when p < REFINE_BELOW (0.1), adds
    resamples until the Monte Carlo standard error (`sign_flip_mc_se`) is at most TARGET_MC_SE (0.0005), p to 3
    decimals, within the flip budget (`resample_cap`: at most 800,000, fewer above 250 units). A fixed n_resamples
    is Monte Carlo (or enumeration) with exactly that many.
    """
    a, b = _pair(a, b)
    d = nonzero_differences(a, b)
    if len(d) == 0:
        return TestResult("permutation", 1.0, note="all differences are 0")
    scale = float(max(np.max(np.abs(a)), np.max(np.abs(b))))
    if abs(float(np.mean(d))) <= ZERO_TOL * scale:
        return TestResult("permutation", 1.0, note="exact (mean difference 0: the null is symmetric about it)")
    if len(d) == 1:  # the two sign flips give +d and -d, both as extreme as observed (scipy needs 2+ units)
        return TestResult("permutation", 1.0, note="exact (one non-zero difference)")
    fixed = n_resamples is not None
    n_res = int(n_resamples) if fixed else FIRST_RESAMPLES
    if 2 ** min(len(d), 64) <= n_res:
        return TestResult("permutation", _sign_flip_p(d, n_res, seed), note="exact")
    if not fixed and (steps := lattice_steps(d)) is not None:
        p, err = sign_flip_lattice_p(steps, np.sign(d))
        return TestResult("permutation", p, note="exact (lattice)", p_error=err)
    p = _sign_flip_p(d, n_res, seed)
    if not fixed and p < REFINE_BELOW:
        needed = resamples_for_se(p, TARGET_MC_SE)
        if needed > n_res and (cap := resample_cap(len(d))) > n_res:
            n_res = min(cap, max(needed, 2 * n_res))
            if 2 ** min(len(d), 64) <= n_res:
                return TestResult("permutation", _sign_flip_p(d, n_res, seed), note="exact")
            p = _sign_flip_p(d, n_res, seed)
    return TestResult("permutation", p, n_resamples=n_res, mc_se=sign_flip_mc_se(p, n_res))


def is_binary(*arrays) -> bool:
    """True when every value is 0 or 1."""
    return all(np.isin(np.asarray(x, dtype=float), (0.0, 1.0)).all() for x in arrays)


def mcnemar_test(a, b) -> TestResult:
    """Exact McNemar test for 0/1 outcomes: a two-sided binomial test (p=1/2) on the discordant pairs."""
    a, b = _pair(a, b)
    if not is_binary(a, b):
        raise ValueError("McNemar's test needs 0/1 values; use the permutation test for other metrics")
    only_a = int(np.sum((a == 1) & (b == 0)))
    only_b = int(np.sum((a == 0) & (b == 1)))
    if only_a + only_b == 0:
        return TestResult("mcnemar", 1.0, note="no discordant pairs")
    return TestResult("mcnemar", float(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue),
                      note=f"discordant {only_a}/{only_b}")


def wilcoxon_test(a, b) -> TestResult:
    """Wilcoxon signed-rank test of the paired differences (scipy.stats.wilcoxon; differences that are 0 up to
    rounding dropped)."""
    d = nonzero_differences(a, b)
    if not len(d):
        return TestResult("wilcoxon", 1.0, note="all differences are 0")
    return TestResult("wilcoxon", float(stats.wilcoxon(d, zero_method="wilcox").pvalue))


def t_test(a, b) -> TestResult:
    """Paired Student t-test (scipy.stats.ttest_rel), as IR toolkits such as ranx report it."""
    a, b = _pair(a, b)
    d = a - b
    if np.all(d == d[0]):
        return TestResult("t", 1.0 if d[0] == 0 else 0.0, note="constant differences")
    return TestResult("t", float(stats.ttest_rel(a, b).pvalue))


def paired_test(a, b, test: str = "auto", *, binary: bool = False, n_resamples: int | None = None,
                seed: int = 0) -> TestResult:
    """The requested test; 'auto' = exact McNemar for 0/1 metrics, else the sign-flip permutation test."""
    if test == "auto":
        test = "mcnemar" if binary and is_binary(a, b) else "permutation"
    if test == "permutation":
        return sign_flip_test(a, b, n_resamples=n_resamples, seed=seed)
    if test == "mcnemar":
        return mcnemar_test(a, b)
    if test == "wilcoxon":
        return wilcoxon_test(a, b)
    if test == "t":
        return t_test(a, b)
    raise ValueError(f"unknown test '{test}': choose one of auto, {', '.join(TESTS)}")
