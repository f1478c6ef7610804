"""Variance components of a score over examples, templates (and display orders): the template audit's decomposition.

The model is a balanced random-effects ANOVA. Without orders, y[e, t] = mu + a_e + b_t + r_et (example and template
crossed, one value per cell, so the example x template interaction is the residual). With orders, y[e, t, o] =
mu + a_e + b_t + ab_et + c_o(e) + r_eto: order o is a permutation drawn per example, so it is nested in the example
(order 1 of two examples has nothing in common), and crossed with the template (every template is asked in the same
K display orders of an example); the template x order-within-example interaction is the residual. Every effect is
random (the templates stand for the paraphrases one could have written). The components are the ANOVA (method of
moments) estimators: mean squares set equal to their expectations, solved, negative estimates set to 0. For a
balanced table they equal REML whenever no estimate is truncated (tests/audits/test_audits_variance.py checks the sums
of squares against statsmodels `anova_lm` and the components against statsmodels `MixedLM` REML).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from recbench.stats._lazy import lazy_module
from recbench.stats.resample import batch_rows, integer_blocks

stats = lazy_module("scipy.stats")


@dataclass(frozen=True)
class Decomposition:
    """Sums of squares, mean squares, variance components and their shares of the total, per source."""

    sources: tuple[str, ...]
    df: dict[str, int]
    ss: dict[str, float]
    ms: dict[str, float]
    components: dict[str, float]  # estimated variance of each random effect (>= 0)
    shares: dict[str, float]  # component / sum of components (NaN when every component is 0)
    n_examples: int
    n_templates: int
    n_orders: int = 1
    truncated: tuple[str, ...] = field(default=())  # components whose moment estimate was negative, set to 0

    def to_dict(self) -> dict:
        """JSON-ready (NaN stays NaN; the run store writes it as null)."""
        return {"model": "random-effects ANOVA, method-of-moments components (balanced)",
                "sources": list(self.sources), "df": self.df, "ss": self.ss, "ms": self.ms,
                "components": self.components, "shares": self.shares, "n_examples": self.n_examples,
                "n_templates": self.n_templates, "n_orders": self.n_orders, "truncated": list(self.truncated)}


def _table(y) -> np.ndarray:
    a = np.asarray(y, dtype=float)
    if a.ndim == 2:
        a = a[:, :, None]
    if a.ndim != 3 or a.shape[0] < 2 or a.shape[1] < 2:
        raise ValueError(f"need a (examples, templates[, orders]) table with >= 2 examples and >= 2 templates, got "
                         f"shape {np.shape(y)}")
    if np.isnan(a).any():
        raise ValueError("the table holds NaN: drop the examples with an undefined value first")
    return a


def decompose(y) -> Decomposition:
    """The decomposition of a (examples, templates) or (examples, templates, orders) table of one metric."""
    a = _table(y)
    n, t, o = a.shape
    m = a.mean()
    ye = a.mean(axis=(1, 2))  # example means
    yt = a.mean(axis=(0, 2))  # template means
    yet = a.mean(axis=2)  # example x template cells (over orders)
    yeo = a.mean(axis=1)  # example x order (over templates)
    ss = {"example": t * o * float(np.sum((ye - m) ** 2)), "template": n * o * float(np.sum((yt - m) ** 2))}
    inter = yet - ye[:, None] - yt[None, :] + m
    if o == 1:
        ss["residual"] = float(np.sum(inter ** 2))
        df = {"example": n - 1, "template": t - 1, "residual": (n - 1) * (t - 1)}
    else:
        ss["example:template"] = o * float(np.sum(inter ** 2))
        ss["order(example)"] = t * float(np.sum((yeo - ye[:, None]) ** 2))
        ss["residual"] = float(np.sum((a - yet[:, :, None] - yeo[:, None, :] + ye[:, None, None]) ** 2))
        df = {"example": n - 1, "template": t - 1, "example:template": (n - 1) * (t - 1),
              "order(example)": n * (o - 1), "residual": n * (t - 1) * (o - 1)}
    ms = {k: ss[k] / df[k] if df[k] else math.nan for k in ss}
    if o == 1:
        raw = {"example": (ms["example"] - ms["residual"]) / t, "template": (ms["template"] - ms["residual"]) / n,
               "residual": ms["residual"]}
    else:
        raw = {"example": (ms["example"] - ms["example:template"] - ms["order(example)"] + ms["residual"]) / (t * o),
               "template": (ms["template"] - ms["example:template"]) / (n * o),
               "example:template": (ms["example:template"] - ms["residual"]) / o,
               "order(example)": (ms["order(example)"] - ms["residual"]) / t,
               "residual": ms["residual"]}
    truncated = tuple(k for k, v in raw.items() if v < 0)
    comp = {k: max(0.0, float(v)) for k, v in raw.items()}
    total = sum(comp.values())
    shares = {k: (v / total if total > 0 else math.nan) for k, v in comp.items()}
    return Decomposition(tuple(ss), df, ss, ms, comp, shares, n, t, o, truncated)


def template_share_ci(y, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the template's share of variance, examples resampled (NaN when it is undefined)."""
    a = _table(y)
    rng = np.random.default_rng(seed)
    rows = batch_rows(a[0].size * a.shape[0], n_boot)  # a block of resampled tables holds at most BLOCK_FLOATS values
    shares = np.array([decompose(a[i]).shares["template"] for idx in integer_blocks(rng, a.shape[0], n_boot, rows)
                       for i in idx])
    shares = shares[np.isfinite(shares)]
    if not len(shares):
        return (math.nan, math.nan)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(shares, [alpha, 1 - alpha])
    return float(lo), float(hi)


@dataclass(frozen=True)
class TemplateTest:
    """Is there a template effect on the mean? Permutation test of the spread of the template means."""

    statistic: float  # variance (ddof 0) of the K template means
    p_value: float
    n_resamples: int | None  # None: exact (every within-example permutation enumerated)
    test: str = "permutation of template labels within each example (scipy.stats.permutation_test, samples)"


def _spread(*samples, axis: int = -1):
    return np.var(np.stack([np.mean(s, axis=axis) for s in samples]), axis=0)


def template_effect_test(y, n_resamples: int = 9999, seed: int = 0) -> TemplateTest:
    """Permutation test of 'no template effect': the K values of each example (averaged over its orders) are
    exchangeable; statistic = variance of the template means, whose order under these permutations is that of the
    F ratio MS_template / MS_example:template (each example's total is fixed). Exact when (K!)^n <= n_resamples."""
    a = _table(y).mean(axis=2)
    if np.all(a == a[:, :1]):  # every template gives every example the same value: no spread to test
        return TemplateTest(0.0, 1.0, None)
    res = stats.permutation_test(tuple(a.T), _spread, permutation_type="samples", vectorized=True,
                                 n_resamples=n_resamples, alternative="greater",
                                 random_state=np.random.default_rng(seed), batch=batch_rows(a.size, n_resamples))
    exact = math.factorial(a.shape[1]) ** a.shape[0] <= n_resamples
    return TemplateTest(float(res.statistic), float(res.pvalue), None if exact else n_resamples)
