"""Coverage against the control set: two independent proportions (real items recalled, fabricated items "recalled").

- each rate with a Wilson score interval (statsmodels proportion_confint, method='wilson'): unlike the bootstrap it
  is not [0, 0] when nothing was recalled;
- the difference with Newcombe's hybrid score interval (statsmodels confint_proportions_2indep, method='newcomb'),
  which keeps its coverage near 0 and 1 where the Wald interval collapses;
- the one-sided Fisher exact test of "real items are recalled more often than control items" (scipy fisher_exact,
  alternative='greater'): exact, so at most alpha of null probes are flagged whatever n."""
from __future__ import annotations

from typing import Any, Optional


def rate_summary(k: int, n: int, alpha: float) -> dict[str, Any]:
    """k of n with its Wilson interval at level 1 - alpha (None values when n is 0)."""
    if n == 0:
        return {"k": 0, "n": 0, "rate": None, "ci_low": None, "ci_high": None, "ci_level": 1 - alpha,
                "ci_method": "wilson"}
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(k, n, alpha=alpha, method="wilson")
    return {"k": k, "n": n, "rate": k / n, "ci_low": float(lo), "ci_high": float(hi), "ci_level": 1 - alpha,
            "ci_method": "wilson"}


def fisher_greater(k1: int, n1: int, k0: int, n0: int) -> float:
    """One-sided Fisher exact p-value that the first rate (k1/n1) is larger than the second (k0/n0)."""
    from scipy.stats import fisher_exact

    return float(fisher_exact([[k1, n1 - k1], [k0, n0 - k0]], alternative="greater").pvalue)


def difference_summary(k1: int, n1: int, k0: int, n0: int, alpha: float) -> dict[str, Any]:
    """Real (k1 of n1) against control (k0 of n0): both rates, their difference with a Newcombe interval, the
    one-sided Fisher exact p-value and whether it is below alpha ('flagged')."""
    diff: dict[str, Optional[Any]] = {
        "estimate": None, "ci_low": None, "ci_high": None, "ci_level": 1 - alpha,
        "ci_method": "Newcombe hybrid score interval", "p_value": None,
        "test": "one-sided Fisher exact", "alpha": alpha, "flagged": False}
    if n1 and n0:
        from statsmodels.stats.proportion import confint_proportions_2indep

        lo, hi = confint_proportions_2indep(k1, n1, k0, n0, method="newcomb", compare="diff", alpha=alpha)
        p = fisher_greater(k1, n1, k0, n0)
        diff.update(estimate=k1 / n1 - k0 / n0, ci_low=float(lo), ci_high=float(hi), p_value=p, flagged=p < alpha)
    return {"real": rate_summary(k1, n1, alpha), "control": rate_summary(k0, n0, alpha), "difference": diff}
