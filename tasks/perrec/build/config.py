"""Selection parameters of a PerRecBench build (the paper's defaults) and split sizes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class BuildConfig:
    """Selection parameters (paper defaults) and split sizes."""

    gamma: int = 20  # a member needs MORE than gamma ratings strictly before the query rating
    lam: float = 0.6  # every pair's relative-rating gap must exceed lambda
    window_days: float = 30.0  # co-rating window (delta-t)
    sizes: tuple[int, ...] = (2, 3, 4)
    per_size: int = 200
    heldout_per_size: int = 50
    heldout_item_fraction: float = 0.2  # share of query items reserved for the held-out split (disjoint items)
    seed: int = 0
    avg: str = "prior"  # "prior" (no leakage) | "whole" (released data: average over the whole history)
    min_rating: Optional[float] = None  # keep only ratings in [min_rating, max_rating] (API only; not a check)
    max_rating: Optional[float] = None
    #: the scale every rating must lie in (a rating outside it is refused); None = the source's (build/checks.py SCALES)
    rating_scale: Optional[tuple[float, float]] = None
    time_unit: str = field(default="auto")  # "s" | "ms" | "auto" (ms when timestamps exceed 1e11)

