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
    return bootstrap_cis([values], n_boot, level, seed)[0]


def bootstrap_cis(columns: Sequence[Sequence[float]], n_boot: int = 1000, level: float = 0.95,
                  seed: int = 0) -> list[tuple[float, float]]:
    """bootstrap_ci of each column, value for value; columns of one length share one draw of the index rows (the
    draws depend only on the length and the seed, and cost more than the means)."""
    xs = [np.asarray(v, dtype=float) for v in columns]
    out: list[tuple[float, float]] = [(math.nan, math.nan)] * len(xs)
    by_len: dict[int, list[int]] = {}
    for k, x in enumerate(xs):
        by_len.setdefault(len(x), []).append(k)
    alpha = (1 - level) / 2
    for n, ks in by_len.items():
        if n < 2:
            continue
        means: dict[int, list[np.ndarray]] = {k: [] for k in ks}
        for idx in integer_blocks(np.random.default_rng(seed), n, n_boot):
            # a gather per column, never a matrix product over several: a column's CI must not depend on which other
            # columns share its draws (a product rounds otherwise, ~1e-15, and two outputs of one CI then differ)
            for k in ks:
                means[k].append(xs[k][idx].mean(axis=-1))
        for k in ks:
            lo, hi = np.quantile(np.concatenate(means[k]), [alpha, 1 - alpha])
            out[k] = (float(lo), float(hi))
    return out


def summarize(values: Iterable[float], n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Mean, 95% bootstrap CI, and counts of defined / undefined (NaN) values."""
    return summarize_many({"": values}, n_boot, level, seed)[""]


def summarize_many(columns: dict[str, Iterable[float]], n_boot: int = 1000, level: float = 0.95,
                   seed: int = 0) -> dict[str, dict[str, Any]]:
    """summarize of each named column, value for value (columns with as many defined values share the draws)."""
    return summarize_arrays({m: np.array([float(v) for v in col], dtype=float) for m, col in columns.items()},
                            n_boot, level, seed)


def summarize_arrays(columns: dict[str, np.ndarray], n_boot: int = 1000, level: float = 0.95,
                     seed: int = 0) -> dict[str, dict[str, Any]]:
    """summarize_many of float arrays (NaN = undefined), without a pass in Python over the values."""
    defined = {m: x[~np.isnan(x)] for m, x in columns.items()}
    cis = dict(zip(defined, bootstrap_cis(list(defined.values()), n_boot, level, seed)))
    return {m: {"mean": float(np.mean(d)) if d.size else math.nan, "ci_low": cis[m][0], "ci_high": cis[m][1],
                "n": int(d.size), "n_undefined": int(columns[m].size - d.size)} for m, d in defined.items()}
