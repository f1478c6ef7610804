"""Shared metric helpers: Kendall tau between two orderings, bootstrap confidence intervals, summaries."""
from __future__ import annotations

import math
from typing import Any, Hashable, Iterable, Sequence

import numpy as np

from recbench.stats.resample import integer_blocks


def ranks_from_order(order: Sequence[Hashable]) -> dict[Hashable, int]:
    """Rank (1 = first) of each id in a best-first ordering."""
    return {u: i + 1 for i, u in enumerate(order)}


def tau_permutation(ranks: Sequence[int]) -> float:
    """Kendall tau between positions 0..n-1 and `ranks` (distinct values, so tau-a = tau-b = scipy's kendalltau).

    Computed directly because scipy's per-call overhead (~ms) dominates on lists of 2-4 items; the tests check
    equality with scipy.stats.kendalltau.
    """
    n = len(ranks)
    if n < 2:
        return math.nan
    s = sum((ranks[j] > ranks[i]) - (ranks[j] < ranks[i]) for i in range(n) for j in range(i + 1, n))
    return s / (n * (n - 1) / 2)


def kendall_tau_ranks(true_order: Sequence[Hashable], pred_order: Sequence[Hashable]) -> float:
    """Kendall tau between the true and predicted RANKS of the same ids (both best-first orderings)."""
    if sorted(map(str, true_order)) != sorted(map(str, pred_order)):
        raise ValueError(f"orderings name different ids: {list(true_order)} vs {list(pred_order)}")
    pr = ranks_from_order(pred_order)
    return tau_permutation([pr[u] for u in true_order])


def bootstrap_ci(values: Sequence[float], n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean (NaN-free input; resampling unit: one value); (nan, nan) for fewer than 2.

    The same draws and quantiles as scipy.stats.bootstrap(method="percentile", vectorized, one batch) with
    default_rng(seed), drawn in bounded batches (recbench.stats.resample), written out because importing scipy.stats costs more start-up time than the rest of a run;
    tests/core/test_core_bootstrap.py checks equality with scipy on many inputs.
    """
    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    means = np.concatenate([x[idx].mean(axis=-1) for idx in integer_blocks(rng, len(x), n_boot)])
    alpha = (1 - level) / 2
    lo, hi = np.quantile(means, [alpha, 1 - alpha])
    return float(lo), float(hi)


def summarize(values: Iterable[float], n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Mean, 95% bootstrap CI, and counts of defined / undefined (NaN) values."""
    vals = [float(v) for v in values]
    defined = [v for v in vals if not math.isnan(v)]
    lo, hi = bootstrap_ci(defined, n_boot, level, seed)
    return {
        "mean": float(np.mean(defined)) if defined else math.nan,
        "ci_low": lo,
        "ci_high": hi,
        "n": len(defined),
        "n_undefined": len(vals) - len(defined),
    }
