"""Exact expectations of a uniformly random ranker, to print beside sampled ranking metrics."""
from __future__ import annotations

import math


def expected_hr_at_k(k: int, n_candidates: int) -> float:
    """E[HR@k] with 1 positive among C candidates ranked uniformly at random: min(k, C) / C."""
    _check(k, n_candidates)
    return min(k, n_candidates) / n_candidates


def expected_ndcg_at_k(k: int, n_candidates: int) -> float:
    """E[NDCG@k] with 1 positive among C candidates ranked at random: (1/C) * sum_{r<=min(k,C)} 1/log2(r+1)."""
    _check(k, n_candidates)
    return sum(1.0 / math.log2(r + 1) for r in range(1, min(k, n_candidates) + 1)) / n_candidates


def expected_ptc() -> float:
    """E[PTC] of a random ranking: Kendall tau of a uniformly random permutation has mean 0."""
    return 0.0


def _check(k: int, n_candidates: int) -> None:
    if k < 1 or n_candidates < 1:
        raise ValueError(f"k and the candidate count must be >= 1, got k={k}, C={n_candidates}")
