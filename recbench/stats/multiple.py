"""Multiple-comparison correction of a family of p-values (statsmodels.stats.multitest.multipletests)."""
from __future__ import annotations

import gc

import numpy as np

METHODS = {"holm": "holm", "bh": "fdr_bh", "none": None}


def adjust(p_values, method: str = "holm", alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """(adjusted p-values, rejected?) for Holm (default), Benjamini-Hochberg ('bh') or 'none'; NaN p stays NaN, never rejected."""
    if method not in METHODS:
        raise ValueError(f"unknown correction '{method}': choose one of {', '.join(METHODS)}")
    p = np.asarray(p_values, dtype=float)
    adj = np.full(p.shape, np.nan)
    rej = np.zeros(p.shape, dtype=bool)
    ok = ~np.isnan(p)
    if ok.any():
        if METHODS[method] is None:
            adj[ok] = p[ok]
            rej[ok] = p[ok] < alpha
        else:
            from statsmodels.stats.multitest import multipletests  # heavy: only when correcting

            gc.freeze()  # statsmodels' Holm calls gc.collect(): over the objects of 60,000 loaded examples, ~1 s each
            try:
                r, a, _, _ = multipletests(p[ok], alpha=alpha, method=METHODS[method])
            finally:
                gc.unfreeze()
            adj[ok], rej[ok] = a, r
    return adj, rej
