"""Resampling units: average per-example values within a cluster, and pool several seeds of one system (Miller 2024)."""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np


def cluster_means(values, clusters: Sequence[Hashable]) -> tuple[np.ndarray, list[Hashable]]:
    """Mean of the values in each cluster, clusters in order of first appearance; (means, cluster labels)."""
    v = np.asarray(values, dtype=float)
    if len(v) != len(clusters):
        raise ValueError(f"{len(v)} values but {len(clusters)} cluster labels")
    order: dict[Hashable, int] = {}
    idx = np.array([order.setdefault(c, len(order)) for c in clusters], dtype=int)
    sums = np.bincount(idx, weights=v, minlength=len(order))
    counts = np.bincount(idx, minlength=len(order))
    return sums / counts, list(order)


@dataclass(frozen=True)
class SeedPool:
    """Per-example means over K seeds, and the seed (within-example) variance that they carry."""

    means: np.ndarray  # per example: the mean over the K seeds
    k: int  # seeds
    within_var: float  # mean over examples of the unbiased variance across seeds (sigma_i^2 averaged); 0 when K = 1

    @property
    def seed_share_of_var(self) -> float:
        """Share of the variance of the per-example means that is seed noise: E[sigma_i^2]/K over Var(means)."""
        total = float(np.var(self.means, ddof=1)) if len(self.means) > 1 else 0.0
        return (self.within_var / self.k) / total if total > 0 else 0.0


def pool_seeds(values_by_seed) -> SeedPool:
    """Average a (K seeds x n examples) array per example, the unit Miller 2024 (arXiv 2411.00640, sec. 4) resamples.

    With K samples per example, Var(mean score) = (Var(x) + E[sigma_i^2] / K) / n, where x is an example's expected
    score and sigma_i^2 its variance across seeds; the sample variance of the per-example means estimates exactly the
    bracket, so a bootstrap or permutation over examples of these means includes the seed variance with weight 1/K.
    """
    m = np.asarray(values_by_seed, dtype=float)
    if m.ndim == 1:
        m = m[None, :]
    k = m.shape[0]
    within = float(np.mean(np.var(m, axis=0, ddof=1))) if k > 1 else 0.0
    return SeedPool(means=m.mean(axis=0), k=k, within_var=within)
