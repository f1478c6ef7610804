"""Power of the paired comparison: the power for an effect, and the minimum detectable difference for n.

The paired t-test with n units (clusters) and sd of the paired unit differences: the statistic is noncentral t
with n-1 degrees of freedom and noncentrality delta/sd*sqrt(n); both tails count (two-sided). The normal
approximation (z_{1-alpha/2} + z_{power}) * sd / sqrt(n) is given too; it is smaller for small n.
"""
from __future__ import annotations

import math
from typing import Any

from recbench.stats._lazy import lazy_module

# scipy.special's t / noncentral t / normal functions (the ones scipy.stats' t, nct and norm call): a quarter of
# scipy.stats' import time, which `mode=plan` paid for one power figure (1 s of its 3.6 at load 0.4, issue 44)
special = lazy_module("scipy.special")  # imported on first use


def power(effect: float, n: int, sd: float, alpha: float = 0.05) -> float:
    """Power of a two-sided paired t-test at level alpha to detect a true mean difference `effect`."""
    if n < 2 or sd <= 0:
        raise ValueError(f"power needs n >= 2 units and sd > 0, got n={n}, sd={sd}")
    df = n - 1
    nc = abs(effect) / sd * math.sqrt(n)
    crit = float(special.stdtrit(df, 1 - alpha / 2))
    p = float((1.0 - special.nctdtr(df, nc, crit)) + special.nctdtr(df, nc, -crit))
    if math.isnan(p):  # scipy's nct is NaN far in the tail (huge noncentrality): the normal limit is exact enough
        p = float(special.ndtr(nc - crit) + special.ndtr(-crit - nc))
    return p


def min_detectable_difference(n: int, sd: float, power_target: float = 0.8, alpha: float = 0.05) -> float:
    """Smallest true paired mean difference detected with `power_target` by a two-sided paired t-test (noncentral t)."""
    if not 0 < power_target < 1:
        raise ValueError(f"power_target must be in (0, 1), got {power_target}")
    lo, hi = 0.0, 2 * min_detectable_difference_normal(n, sd, power_target, alpha)
    while power(hi, n, sd, alpha) < power_target:
        hi *= 2
    if power(lo, n, sd, alpha) >= power_target:
        return 0.0
    return _bisect(lambda d: power(d, n, sd, alpha) - power_target, lo, hi, xtol=1e-12)


def _bisect(f: Any, lo: float, hi: float, xtol: float) -> float:
    """The root of an increasing f between lo (f < 0) and hi (f >= 0) within xtol (scipy.optimize's import cost
    more than the 40-odd evaluations)."""
    while hi - lo > xtol:
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if f(mid) < 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def min_detectable_difference_normal(n: int, sd: float, power_target: float = 0.8, alpha: float = 0.05) -> float:
    """Normal approximation of the minimum detectable difference: (z_{1-alpha/2} + z_power) * sd / sqrt(n)."""
    return float((special.ndtri(1 - alpha / 2) + special.ndtri(power_target)) * sd / math.sqrt(n))


def paired_sd_with_seeds(sd_between: float, seed_var_a: float = 0.0, seed_var_b: float = 0.0, k: int = 1) -> float:
    """sd of a unit's paired difference when each system's score is the mean of k seeds (Miller 2024, sec. 4):
    sqrt(sd_between^2 + (seed_var_a + seed_var_b) / k), sd_between being the sd of the expected differences."""
    return math.sqrt(sd_between ** 2 + (seed_var_a + seed_var_b) / max(1, k))
