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


def two_sample_power(n_real: int, n_control: int, p_control: float, alpha: float, power: float,
                     effect: float) -> dict[str, Any]:
    """Power of the probe's own test, real against control items as two independent samples, one-sided (the normal
    approximation on Cohen's h, statsmodels NormalIndPower): the smallest coverage - control detectable with `power`
    and the power at `effect`, when the control rate is p_control."""
    import math

    from statsmodels.stats.power import NormalIndPower
    from statsmodels.stats.proportion import proportion_effectsize

    if n_real < 2 or n_control < 2:
        raise ValueError(f"the probe's power needs at least 2 real and 2 control items, got {n_real} and {n_control}")
    solver, ratio = NormalIndPower(), n_control / n_real
    h = float(solver.solve_power(nobs1=n_real, ratio=ratio, alpha=alpha, power=power, alternative="larger"))
    p1 = min(1.0, math.sin(min(math.pi / 2, math.asin(math.sqrt(p_control)) + h / 2)) ** 2)
    at = min(1.0, p_control + effect)
    h_at = float(proportion_effectsize(at, p_control))
    return {"test": "two independent samples (real vs control items), one-sided", "n": n_real,
            "n_control": n_control, "mdd": p1 - p_control, "effect": effect, "alpha": alpha, "power": power,
            "power_at_effect": float(solver.power(h_at, nobs1=n_real, ratio=ratio, alpha=alpha, alternative="larger")),
            "sd": None, "sd_source": f"no sd: proportions, with the control rate assumed {p_control:.3f}"}
