"""Order-audit statistics: agreement of rankings across presentation orders, first-slot bias, pairwise consistency."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def kendalls_w(ranks) -> float:
    """Kendall's W of K rankings of the same m items ((K, m) array of ranks 1..m, no ties): 12 S / (K^2 (m^3 - m)).

    1 = the K orders give the same ranking; 0 = no agreement. Mean pairwise Spearman rho = (K W - 1) / (K - 1).
    """
    r = np.asarray(ranks, dtype=float)
    if r.ndim != 2 or r.shape[0] < 2 or r.shape[1] < 2:
        raise ValueError(f"Kendall's W needs K >= 2 rankings of m >= 2 items, got shape {r.shape}")
    k, m = r.shape
    if not all(sorted(row) == list(range(1, m + 1)) for row in r.tolist()):
        raise ValueError("each ranking must hold the ranks 1..m exactly once (no ties)")
    totals = r.sum(axis=0)
    s = float(np.sum((totals - k * (m + 1) / 2) ** 2))
    return 12 * s / (k ** 2 * (m ** 3 - m))


def tied_kendalls_w(ranks) -> float:
    """Kendall's W with the tie correction: 12 S / (K^2 (m^3 - m) - K sum_j T_j), T_j = sum over tie groups of
    t^3 - t in ranking j (ranks averaged within ties). Equals kendalls_w without ties."""
    r = np.asarray(ranks, dtype=float)
    k, m = r.shape
    totals = r.sum(axis=0)
    s = float(np.sum((totals - k * (m + 1) / 2) ** 2))
    ties = sum(float(t ** 3 - t) for row in r for t in np.unique(row, return_counts=True)[1] if t > 1)
    denom = k ** 2 * (m ** 3 - m) - k * ties
    return 12 * s / denom if denom > 0 else math.nan


@dataclass(frozen=True)
class SlotTest:
    """How often each display slot was ranked first, against a uniform choice among each example's slots."""

    observed: list[int]
    expected: list[float]
    chi2: float
    p_value: float


def first_slot_test(first_slots: Sequence[int], sizes: Sequence[int]) -> SlotTest:
    """Chi-square test (scipy.stats.chisquare) of the slot (0-based) ranked first, example sizes may differ: under
    no position bias an example of m items puts each of its m slots first with probability 1/m."""
    if len(first_slots) != len(sizes) or not len(sizes):
        raise ValueError(f"need one first slot per example and one size per example, got {len(first_slots)} and "
                         f"{len(sizes)}")
    width = max(sizes)
    obs = np.bincount(np.asarray(first_slots, dtype=int), minlength=width)[:width]
    exp = np.zeros(width)
    for m in sizes:
        exp[:m] += 1.0 / m
    from scipy import stats  # imported here: scipy.stats is the costliest import of a run's start-up

    res = stats.chisquare(obs, exp)
    return SlotTest(obs.tolist(), exp.tolist(), float(res.statistic), float(res.pvalue))


@dataclass(frozen=True)
class PairConsistency:
    """Pairwise answers asked in both orders: share consistent, and which slot wins the inconsistent ones."""

    n: int
    consistent: float  # share of pairs where both orders prefer the same item
    first_slot_wins_inconsistent: float  # among inconsistent pairs: share where the first-shown item won both times


def pair_consistency(first_wins_ab: Sequence[bool], first_wins_ba: Sequence[bool]) -> PairConsistency:
    """From, per pair, whether the first-shown item won in order (a, b) and in order (b, a): consistent when the
    slot winners differ (the same item won); inconsistent pairs are won by slot 1 both times or slot 2 both times."""
    ab, ba = np.asarray(first_wins_ab, dtype=bool), np.asarray(first_wins_ba, dtype=bool)
    if ab.shape != ba.shape or ab.size == 0:
        raise ValueError("need one answer per pair in each order")
    consistent = ab != ba
    inc = ~consistent
    first = float(np.mean(ab[inc])) if inc.any() else float("nan")
    return PairConsistency(int(ab.size), float(consistent.mean()), first)
