"""Bradley-Terry strengths of runs judged pairwise, by maximum likelihood (choix), with bootstrap CIs.

Under the model, run i beats run j with probability 1 / (1 + exp(s_j - s_i)); the strengths s are log-strengths
normalised to mean 0. The fit is choix's `ilsr_pairwise_dense` (iterative Luce spectral ranking, which converges to
the maximum-likelihood estimate) on the matrix of wins, a tie counted as half a win each way.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from recbench.stats.resample import integer_blocks

#: the choix regularisation (a rate added to every pair of the LSR Markov chain) used only where maximum likelihood
#: has no finite answer: some group of runs never scored against the rest (e.g. a run that lost every comparison)
FALLBACK_ALPHA = 0.1
_MAX_ITER = 10_000


def _wins_matrix(i: np.ndarray, j: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    """(k, k) matrix whose [a, b] is what a scored against b: y for i over j, 1 - y for j over i."""
    flat = np.bincount(i * k + j, weights=y, minlength=k * k) + np.bincount(j * k + i, weights=1 - y, minlength=k * k)
    return flat.reshape(k, k)


def _finite_ml(wins: np.ndarray) -> bool:
    """Maximum likelihood is finite iff the graph a -> b (a scored against b) is strongly connected (Zermelo, Ford)."""
    from scipy.sparse.csgraph import connected_components
    n, _ = connected_components(wins > 0, directed=True, connection="strong")
    return n == 1


def _fit(wins: np.ndarray) -> np.ndarray:
    """Mean-zero log-strengths: maximum likelihood when it is finite, else choix's regularised estimate."""
    import choix
    alpha = 0.0 if _finite_ml(wins) else FALLBACK_ALPHA
    return choix.ilsr_pairwise_dense(wins, alpha=alpha, max_iter=_MAX_ITER, tol=1e-10)


def _parse(wins: Sequence[tuple[str, str, float]]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    runs: dict[str, int] = {}
    i, j, y = [], [], []
    for row in wins:
        a, b, out = row
        out = float(out)
        if math.isnan(out) or not 0 <= out <= 1:
            raise ValueError(f"bradley_terry: the outcome for {a!r} against {b!r} is 1, 0.5 or 0; got {row[2]!r}")
        if a == b:
            raise ValueError(f"bradley_terry: a comparison of {a!r} with itself")
        i.append(runs.setdefault(str(a), len(runs)))
        j.append(runs.setdefault(str(b), len(runs)))
        y.append(out)
    return list(runs), np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64), np.asarray(y, dtype=float)


def bradley_terry(wins: Sequence[tuple[str, str, float]], *, n_boot: int = 500, seed: int = 0,
                  alpha: float = 0.05) -> list[dict]:
    """Bradley-Terry strength of each run from (run_i, run_j, outcome_for_i) comparisons, strongest first.

    One row per comparison (one judged example of a pair of runs): outcome 1 = run_i won, 0.5 = tie (half a win
    each way), 0 = run_i lost. "strength" is the mean-zero log-strength (maximum likelihood, choix); the CI is the
    percentile interval over n_boot bootstrap resamples of the comparisons (rows drawn with replacement; each
    resample fitted the same way). Where some runs never scored against the others, maximum likelihood is infinite
    and the fit uses choix's regularisation (FALLBACK_ALPHA); "regularised" says so for the point estimate.
    Returns [{"run", "strength", "ci_low", "ci_high", "n_comparisons", "regularised"}], sorted by strength.
    """
    names, i, j, y = _parse(wins)
    k = len(names)
    if k < 2:
        raise ValueError(f"bradley_terry needs comparisons between at least 2 runs, got {names}")
    full = _wins_matrix(i, j, y, k)
    strength = _fit(full)
    regularised = not _finite_ml(full)
    boots = np.concatenate([np.stack([_fit(_wins_matrix(i[row], j[row], y[row], k)) for row in idx])
                            for idx in integer_blocks(np.random.default_rng(seed), len(y), n_boot)])
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2], axis=0)
    counts = np.bincount(i, minlength=k) + np.bincount(j, minlength=k)
    rows = [{"run": names[a], "strength": float(strength[a]), "ci_low": float(lo[a]), "ci_high": float(hi[a]),
             "n_comparisons": int(counts[a]), "regularised": regularised} for a in range(k)]
    return sorted(rows, key=lambda r: -r["strength"])
