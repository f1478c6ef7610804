"""Equivalence (two one-sided tests, TOST) and non-inferiority of paired units within a margin on the metric's scale.

d = a - b per unit. Two one-sided nulls, each tested on its own:
  lower: mean(d) <= -margin  (rejected when d is credibly above -margin), p_lower
  upper: mean(d) >= +margin  (rejected when d is credibly below +margin), p_upper
Equivalence within +-margin: p = max(p_lower, p_upper) (Schuirmann 1987). Non-inferiority of b to a is one of the two:
for a higher-is-better metric b is worse when d > 0, so it is the upper test; for lower-is-better, the lower test.

Tests: 0/1 units (the units the exact McNemar test uses) get the score test of a difference of paired proportions
(Tango 1998, Stat Med 17:891; at margin 0 it is McNemar's z), as an exact unconditional test up to EXACT_MAX_UNITS
units (p = the largest tail probability over the nuisance discordance, so its size is at most alpha) and with its
normal approximation above; every other unit gets the paired t (= statsmodels ttost_paired). docs/verdicts.md says
why and what the simulations measured.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from recbench.stats._lazy import lazy_module

stats = lazy_module("scipy.stats")
special = lazy_module("scipy.special")

#: up to this many units a 0/1 metric gets the exact unconditional score test; above, its normal approximation
EXACT_MAX_UNITS = 400
#: points of the nuisance discordance q01 in [0, (1 - margin) / 2] over which the exact p takes its largest tail
NUISANCE_GRID = 200
#: one-sided size excess (Edgeworth estimate) above which a t record says its units are too skewed to trust near alpha
SKEW_NOTE_ABOVE = 0.01


@dataclass(frozen=True)
class MarginResult:
    """The two one-sided p-values of a paired margin test, the test that gave them and how it went."""

    test: str  # "t" | "score-exact" | "score" (normal approximation) | "none"
    p_lower: float  # H0: mean(a - b) <= -margin
    p_upper: float  # H0: mean(a - b) >= +margin
    note: str = ""

    @property
    def p_equivalence(self) -> float:
        """TOST p-value: the larger one-sided p (NaN when either is undefined)."""
        return max(self.p_lower, self.p_upper) if not (math.isnan(self.p_lower) or math.isnan(self.p_upper)) \
            else math.nan


def tost_t(d, margin: float, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """One-sided paired-t p-values (p_lower, p_upper) of mean(d) > -margin and mean(d) < +margin along axis
    (vectorized; statsmodels ttost_paired's pv1 and pv2). Constant differences give 0 or 1 (no spread to test)."""
    d = np.asarray(d, dtype=float)
    n = d.shape[axis]
    m = d.mean(axis=axis)
    sd = d.std(axis=axis, ddof=1) if n > 1 else np.full(m.shape, np.nan)
    se = sd / math.sqrt(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        p_lo = stats.t.sf((m + margin) / se, n - 1)
        p_up = stats.t.cdf((m - margin) / se, n - 1)
    const = sd == 0
    p_lo = np.where(const, np.where(m > -margin, 0.0, 1.0), p_lo)
    p_up = np.where(const, np.where(m < margin, 0.0, 1.0), p_up)
    return p_lo, p_up


def score_z(b, c, n: int, delta0: float) -> np.ndarray:
    """Tango's score statistic of H0: q10 - q01 = delta0 (0 <= delta0 < 1) for b units (1, 0) and c units (0, 1) out
    of n: (b - c - n delta0) / sqrt(n (2 q01~ + delta0 (1 - delta0))), q01~ the restricted maximum likelihood."""
    b, c = np.asarray(b, dtype=float), np.asarray(c, dtype=float)
    a2 = 2.0 * n
    bb = -b - c + (2.0 * n - b + c) * delta0
    cc = -c * delta0 * (1.0 - delta0)
    q01 = (np.sqrt(bb * bb - 4.0 * a2 * cc) - bb) / (2.0 * a2)
    var = n * (2.0 * q01 + delta0 * (1.0 - delta0))
    num = b - c - n * delta0
    with np.errstate(divide="ignore", invalid="ignore"):
        z = num / np.sqrt(var)
    return np.where(var > 0, z, np.where(num > 0, np.inf, np.where(num < 0, -np.inf, 0.0)))


@functools.lru_cache(maxsize=32)
def exact_score_upper(n: int, margin: float) -> np.ndarray:
    """(n+1) x (n+1) table of the exact unconditional p of H0: q10 - q01 >= margin against < margin for each (b, c):
    tables ordered by Tango's z at the margin, p = the largest P(z <= observed z) over q01 on NUISANCE_GRID points of
    [0, (1 - margin) / 2] with q10 = q01 + margin (the boundary of the null). NaN where b + c > n."""
    bb, cc = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = bb + cc <= n
    b, c = bb[keep], cc[keep]
    z = np.round(score_z(b, c, n, margin), 10)  # equal statistics up to rounding are ties
    order = np.argsort(z, kind="stable")
    last = np.searchsorted(z[order], z[order], side="right") - 1  # a tail includes every table tied with it
    bo, co = b[order][:, None], c[order][:, None]
    ro = n - bo - co
    logc = special.gammaln(n + 1) - special.gammaln(bo + 1) - special.gammaln(co + 1) - special.gammaln(ro + 1)
    tail = np.zeros(len(b))
    for q01 in np.array_split(np.linspace(0.0, (1.0 - margin) / 2, NUISANCE_GRID), 8):
        q10, qr = q01 + margin, np.clip(1.0 - 2 * q01 - margin, 0.0, 1.0)
        pmf = np.exp(logc + special.xlogy(bo, q10) + special.xlogy(co, q01) + special.xlogy(ro, qr))
        tail = np.maximum(tail, np.cumsum(pmf, axis=0)[last].max(axis=1))
    p = np.empty(len(b))
    p[order] = np.minimum(tail, 1.0)
    table = np.full((n + 1, n + 1), np.nan)
    table[b, c] = p
    table.setflags(write=False)
    return table


def score_tost(b, c, n: int, margin: float, *, exact: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One-sided score p-values (p_lower, p_upper) for b units (1, 0) and c units (0, 1) of n (vectorized over b, c):
    exact unconditional up to EXACT_MAX_UNITS units (exact=None), else the normal approximation. The lower test of
    (b, c) is the upper test of (c, b)."""
    b, c = np.asarray(b, dtype=int), np.asarray(c, dtype=int)
    if margin >= 1:  # every 0/1 difference lies within +-1: only all-discordant-one-way data sits on the null
        return (np.where((c == n) & (margin == 1), 1.0, 0.0), np.where((b == n) & (margin == 1), 1.0, 0.0))
    if exact if exact is not None else n <= EXACT_MAX_UNITS:
        table = exact_score_upper(int(n), float(margin))
        return table[c, b], table[b, c]
    return stats.norm.cdf(score_z(c, b, n, margin)), stats.norm.cdf(score_z(b, c, n, margin))


def skew_excess(d, alpha: float = 0.05) -> float:
    """Edgeworth estimate of how far a one-sided t-test's size at the margin exceeds alpha for units this skewed:
    phi(z) |g| (2 z^2 + 1) / (6 sqrt(n)), z the normal quantile of 1 - alpha and g the sample skewness of d."""
    d = np.asarray(d, dtype=float)
    if len(d) < 3 or np.all(d == d[0]):
        return 0.0
    z = stats.norm.ppf(1 - alpha)
    g = float(stats.skew(d))
    return float(stats.norm.pdf(z) * abs(g) * (2 * z * z + 1) / (6 * math.sqrt(len(d))))


def paired_margin_test(a, b, margin: float, *, binary: bool = False, alpha: float = 0.05) -> MarginResult:
    """Both one-sided tests of mean(a - b) against -margin and +margin on paired units: the score test for 0/1 units
    when binary (exact up to EXACT_MAX_UNITS units), else the paired t; a t record notes units skewed enough to move
    its one-sided size at alpha by more than SKEW_NOTE_ABOVE (`skew_excess`)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired values need two 1-D arrays of one length, got shapes {a.shape} and {b.shape}")
    n = len(a)
    if n < 2:
        return MarginResult("none", math.nan, math.nan, note=f"{n} unit(s): no equivalence test")
    if binary:
        if not np.isin(a, (0.0, 1.0)).all() or not np.isin(b, (0.0, 1.0)).all():
            raise ValueError("the score test needs 0/1 values; use the paired t for other metrics")
        only_a, only_b = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
        exact = n <= EXACT_MAX_UNITS
        lo, up = score_tost(only_a, only_b, n, margin, exact=exact)
        how = "exact unconditional" if exact else f"normal approximation (over {EXACT_MAX_UNITS} units)"
        return MarginResult("score-exact" if exact else "score", float(lo), float(up),
                            note=f"score test, {how}; discordant {only_a}/{only_b}")
    d = a - b
    lo, up = tost_t(d, margin)
    note = ""
    excess = skew_excess(d, alpha)
    if excess > SKEW_NOTE_ABOVE:
        note = (f"unit differences skewed (skewness {float(stats.skew(d)):.2f}, n {n}): a one-sided t at the margin may "
                f"reject about {100 * (alpha + excess):.0f}% instead of {100 * alpha:g}% on one side (Edgeworth)")
    return MarginResult("t", float(lo), float(up), note=note)


def noninferiority_p(result: MarginResult, direction: str) -> float | None:
    """p of 'b is not worse than a by the margin or more': the upper test when higher is better (worse = smaller),
    the lower test when lower is better (worse = larger); None for a metric without a direction."""
    if direction == "higher":
        return result.p_upper
    if direction == "lower":
        return result.p_lower
    return None
