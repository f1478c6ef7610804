"""The meta-evaluation of a judge, as Zhang et al. 2024 define it (their corr.py): Pearson, Spearman and Kendall
correlation between the judge's scores and the users' own ratings of one aspect, at three levels:

- dataset: over all rated explanations;
- user: per user over that user's explanations, then the mean over users;
- pair: per (user, movie) over the explanation types shown for it, then the mean over pairs.

A group where either side is constant (or that has fewer than two rows) has no correlation: it is skipped and
counted, as the paper's pandas mean skips the NaN it gives. Computed with scipy.stats."""
from __future__ import annotations

import math
import warnings
from typing import Any, Hashable, Sequence

import numpy as np

#: the three correlation coefficients, by the name the metrics use
COEFFICIENTS = ("pearson", "spearman", "kendall")
#: the three levels, by the name the metrics use
LEVELS = ("dataset", "user", "pair")


def _defined(x: np.ndarray, y: np.ndarray) -> bool:
    """True when a correlation exists: two rows at least, and neither side constant."""
    return len(x) >= 2 and bool(np.ptp(x) > 0) and bool(np.ptp(y) > 0)


def coefficients(x: Sequence[float], y: Sequence[float]) -> dict[str, float]:
    """Pearson r, Spearman rho and Kendall tau-b of x against y (scipy.stats); NaN each where undefined."""
    from scipy import stats

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if not _defined(a, b):
        return dict.fromkeys(COEFFICIENTS, math.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"pearson": float(stats.pearsonr(a, b)[0]), "spearman": float(stats.spearmanr(a, b)[0]),
                "kendall": float(stats.kendalltau(a, b)[0])}


def grouped(x: np.ndarray, y: np.ndarray, groups: Sequence[Hashable]) -> tuple[dict[str, float], int, int]:
    """(mean of each coefficient over the groups where it is defined, groups used, groups skipped)."""
    rows: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        rows.setdefault(g, []).append(i)
    per = [coefficients(x[ix], y[ix]) for ix in rows.values() if _defined(x[ix], y[ix])]
    means = {c: float(np.mean([p[c] for p in per])) if per else math.nan for c in COEFFICIENTS}
    return means, len(per), len(rows) - len(per)


def three_levels(score: Sequence[float], rating: Sequence[float], users: Sequence[Hashable],
                 movies: Sequence[Hashable]) -> dict[str, Any]:
    """Every `<coefficient>_<level>` of one aspect's rows, with the groups used and skipped at the user and pair
    levels (`users_used`, `users_skipped`, `pairs_used`, `pairs_skipped`) and the rows (`n`)."""
    x, y = np.asarray(score, dtype=float), np.asarray(rating, dtype=float)
    out: dict[str, Any] = {f"{c}_dataset": v for c, v in coefficients(x, y).items()}
    by_user, u_used, u_skip = grouped(x, y, users)
    by_pair, p_used, p_skip = grouped(x, y, list(zip(users, movies)))
    out.update({f"{c}_user": v for c, v in by_user.items()})
    out.update({f"{c}_pair": v for c, v in by_pair.items()})
    out.update(n=len(x), users_used=u_used, users_skipped=u_skip, pairs_used=p_used, pairs_skipped=p_skip)
    return out


def metric_names() -> list[str]:
    """The nine correlation metrics, level-major: pearson_dataset, spearman_dataset, ..., kendall_pair."""
    return [f"{c}_{lv}" for lv in LEVELS for c in COEFFICIENTS]
