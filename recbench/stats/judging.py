"""Statistics of LLM judges: win rates, the both-orders rule, position consistency, length bias, panel agreement
(Krippendorff's alpha), panel majority and the re-ask noise floor. Pure functions over numpy inputs.

Confidence intervals: percentile bootstrap over the resampling unit each function names (an example, a unit of a
panel), drawn by `recbench.stats.resample.integer_blocks` (the draws of one `rng.integers(0, n, (B, n))` call);
proportions of independent verdicts get Clopper-Pearson intervals (statsmodels `proportion_confint`, "beta").
scipy, statsmodels and krippendorff are imported on first use (start-up time).
"""
from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from recbench.stats.bootstrap import bootstrap_ci
from recbench.stats.bradley_terry import bradley_terry
from recbench.stats.resample import integer_blocks

#: the labels a pairwise judge answers: the answer shown first, the one shown second, or neither
LABELS = ("A", "B", "tie")

__all__ = ["LABELS", "both_orders_verdict", "bradley_terry", "krippendorff_alpha", "length_bias", "panel_majority",
           "position_consistency", "verdict_flip_rate", "win_rate"]


def _clopper_pearson(count: int, nobs: int, alpha: float) -> tuple[float, float]:
    """Clopper-Pearson interval of count / nobs (statsmodels method="beta"); (nan, nan) when nobs is 0."""
    if nobs == 0:
        return math.nan, math.nan
    from statsmodels.stats.proportion import proportion_confint
    lo, hi = proportion_confint(count, nobs, alpha=alpha, method="beta")
    return float(lo), float(hi)


def _check_label(label: Any) -> str:
    if label not in LABELS:
        raise ValueError(f"a pairwise verdict is one of {', '.join(LABELS)}; got {label!r}")
    return label


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and math.isnan(v))


def win_rate(outcomes: Sequence[float], *, n_boot: int = 2000, seed: int = 0, alpha: float = 0.05) -> dict:
    """Mean outcome per example (1 win, 0.5 tie, 0 loss) with a percentile bootstrap CI over examples.

    Returns {"estimate", "ci_low", "ci_high", "n"}; NaN or a value outside [0, 1] is refused (ValueError): an
    example the judge could not decide is the caller's to drop or to count as a tie, said where it is decided.
    The CI is `recbench.stats.bootstrap.bootstrap_ci` at level 1 - alpha ((nan, nan) below 2 examples).
    """
    x = np.asarray(outcomes, dtype=float).ravel()
    if np.isnan(x).any():
        raise ValueError(f"win_rate: {int(np.isnan(x).sum())} outcome(s) are NaN; each example is 1 (win), "
                         "0.5 (tie) or 0 (loss)")
    if ((x < 0) | (x > 1)).any():
        raise ValueError(f"win_rate: outcomes must lie in [0, 1] (1 win, 0.5 tie, 0 loss), got {x[(x < 0) | (x > 1)][:3]}")
    lo, hi = bootstrap_ci(x, n_boot=n_boot, level=1 - alpha, seed=seed)
    return {"estimate": float(x.mean()) if x.size else math.nan, "ci_low": lo, "ci_high": hi, "n": int(x.size)}


def both_orders_verdict(first: str, second_swapped: str) -> str:
    """The judged answer's verdict from both display orders: "win", "loss", or "tie" unless both orders agree.

    `first` is the judge's label with the judged answer shown as A, `second_swapped` with it shown as B: a win is
    ("A", "B"), a loss ("B", "A"); every other pair (a tie in either order, or the same slot preferred twice) is a
    tie. Labels other than "A", "B", "tie" raise ValueError.
    """
    first, second = _check_label(first), _check_label(second_swapped)
    if (first, second) == ("A", "B"):
        return "win"
    if (first, second) == ("B", "A"):
        return "loss"
    return "tie"


def position_consistency(first: Sequence[str], swapped: Sequence[str], *, alpha: float = 0.05) -> dict:
    """Share of pairs whose verdict survives the swap, and the share of all verdicts that pick the first slot.

    first[k] / swapped[k]: the labels of pair k with the judged answer shown as A / as B. A pair is consistent when
    both orders prefer the same answer (("A", "B") or ("B", "A")) or both say "tie". The first-position rate counts
    the "A" labels among all 2n verdicts (0.5 for an unbiased judge that never ties); its Clopper-Pearson CI treats the
    2n verdicts as independent, which the two verdicts of a pair need not be. Returns {"consistent",
    "consistent_ci", "first_position_rate", "first_position_ci", "n_pairs"}; CIs are (low, high) tuples.
    """
    if len(first) != len(swapped):
        raise ValueError(f"position_consistency needs one swapped verdict per pair, got {len(first)} and "
                         f"{len(swapped)}")
    pairs = [(_check_label(a), _check_label(b)) for a, b in zip(first, swapped)]
    n = len(pairs)
    same = sum(p in (("A", "B"), ("B", "A"), ("tie", "tie")) for p in pairs)
    firsts = sum((a == "A") + (b == "A") for a, b in pairs)
    return {"consistent": same / n if n else math.nan, "consistent_ci": _clopper_pearson(same, n, alpha),
            "first_position_rate": firsts / (2 * n) if n else math.nan,
            "first_position_ci": _clopper_pearson(firsts, 2 * n, alpha), "n_pairs": n}


def _row_spearman(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman rho of each row pair of (B, n) arrays: Pearson on average ranks (NaN for a constant row)."""
    from scipy import stats
    rx, ry = stats.rankdata(x, axis=1), stats.rankdata(y, axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(axis=1) / np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))


def _percentile_ci(values: np.ndarray, alpha: float) -> tuple[float, float]:
    """Percentile interval of the defined bootstrap values ((nan, nan) when none is defined)."""
    v = values[~np.isnan(values)]
    if not v.size:
        return math.nan, math.nan
    lo, hi = np.quantile(v, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def length_bias(scores: Sequence[float], lengths: Sequence[float], *, n_boot: int = 2000, seed: int = 0,
                alpha: float = 0.05) -> dict:
    """Spearman rho of judge score (or win) against answer length, with a bootstrap CI over examples.

    rho and "p_value" are scipy.stats.spearmanr's; the CI is the percentile interval of rho over n_boot resamples of
    the examples (resamples with a constant column are left out). Pairs with a NaN are dropped and counted.
    Returns {"rho", "ci_low", "ci_high", "p_value", "n", "n_dropped", "note"}; with fewer than 3 pairs or a constant
    column rho is NaN and "note" says why (else None).
    """
    s, n_len = np.asarray(scores, dtype=float).ravel(), np.asarray(lengths, dtype=float).ravel()
    if s.shape != n_len.shape:
        raise ValueError(f"length_bias needs one length per score, got {s.size} and {n_len.size}")
    keep = ~(np.isnan(s) | np.isnan(n_len))
    s, n_len = s[keep], n_len[keep]
    out = {"rho": math.nan, "ci_low": math.nan, "ci_high": math.nan, "p_value": math.nan, "n": int(s.size),
           "n_dropped": int((~keep).sum()), "note": None}
    if s.size < 3:
        out["note"] = f"{s.size} pair(s) with a score and a length: rank correlation needs 3"
        return out
    if np.ptp(s) == 0 or np.ptp(n_len) == 0:
        out["note"] = "constant " + ("scores" if np.ptp(s) == 0 else "lengths") + ": rank correlation undefined"
        return out
    from scipy import stats
    res = stats.spearmanr(s, n_len)
    rhos = np.concatenate([_row_spearman(s[idx], n_len[idx])
                           for idx in integer_blocks(np.random.default_rng(seed), s.size, n_boot)])
    out["rho"], out["p_value"] = float(res.statistic), float(res.pvalue)
    out["ci_low"], out["ci_high"] = _percentile_ci(rhos, alpha)
    return out


def _alpha_or_nan(krippendorff: Any, data: np.ndarray, level: str, domain: np.ndarray) -> float:
    """krippendorff.alpha, NaN where it is undefined (a resample with no pairable values or no variation)."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return float(krippendorff.alpha(data, level_of_measurement=level, value_domain=domain))
    except (ValueError, ZeroDivisionError):
        return math.nan


def krippendorff_alpha(ratings: np.ndarray, *, level: str = "ordinal", n_boot: int = 1000, seed: int = 0,
                       alpha: float = 0.05) -> dict:
    """Krippendorff's alpha of a raters x units matrix (NaN = missing) as the `krippendorff` package computes it.

    level: nominal, ordinal, interval or ratio. The CI is the percentile interval over n_boot resamples of the units
    (columns), the value domain fixed to the full matrix's values (resamples where alpha is undefined are left out).
    Returns {"estimate", "ci_low", "ci_high", "n_units", "n_raters"}.
    """
    import krippendorff
    r = np.asarray(ratings, dtype=float)
    if r.ndim != 2:
        raise ValueError(f"krippendorff_alpha needs a raters x units matrix, got shape {r.shape}")
    if level not in ("nominal", "ordinal", "interval", "ratio"):
        raise ValueError(f"level is nominal, ordinal, interval or ratio; got {level!r}")
    domain = np.unique(r[~np.isnan(r)])
    out = {"estimate": math.nan, "ci_low": math.nan, "ci_high": math.nan, "n_units": int(r.shape[1]),
           "n_raters": int(r.shape[0])}
    if domain.size < 2 or r.shape[1] < 1:
        return out  # one value (or none) in the whole matrix: alpha is undefined
    out["estimate"] = _alpha_or_nan(krippendorff, r, level, domain)
    boots = [_alpha_or_nan(krippendorff, r[:, row], level, domain)
             for idx in integer_blocks(np.random.default_rng(seed), r.shape[1], n_boot) for row in idx]
    out["ci_low"], out["ci_high"] = _percentile_ci(np.asarray(boots, dtype=float), alpha)
    return out


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _unit_majority(values: list[Any], numeric: bool) -> Any:
    if not values:
        return math.nan if numeric else None
    counts = Counter(values).most_common()
    top = [v for v, c in counts if c == counts[0][1]]
    if len(top) == 1:
        return float(top[0]) if numeric else top[0]
    return float(np.median(values)) if numeric else "tie"


def panel_majority(verdicts: np.ndarray) -> np.ndarray:
    """The panel's verdict per unit of a raters x units matrix: the most frequent label among the raters.

    Missing verdicts (None, NaN) are skipped. A tie between the most frequent labels gives "tie" for string labels
    and the median of the unit's scores for numeric scores (so [3, 4, 5] -> 4.0, [2, 2, 5, 5] -> 3.5). Numeric input
    gives a float array (NaN for a unit without a verdict), string labels an object array (None for such a unit).
    """
    v = np.asarray(verdicts, dtype=object)
    if v.ndim != 2:
        raise ValueError(f"panel_majority needs a raters x units matrix, got shape {v.shape}")
    present = [[x for x in v[:, j] if not _missing(x)] for j in range(v.shape[1])]
    flat = [x for col in present for x in col]
    numeric = all(_is_number(x) for x in flat)
    if not numeric and any(_is_number(x) for x in flat):
        raise ValueError("panel_majority: verdicts mix numbers and labels; pass one kind")
    out = [_unit_majority(col, numeric) for col in present]
    return np.asarray(out, dtype=float) if numeric else np.asarray(out, dtype=object)


def verdict_flip_rate(first: Sequence[Any], again: Sequence[Any], *, alpha: float = 0.05) -> dict:
    """Noise floor: the share of verdicts (or scores) that change when the judge is asked the same thing again.

    Pairs where either answer is missing (None, NaN) are dropped and counted. Returns {"estimate", "ci_low",
    "ci_high", "n", "n_changed", "n_dropped"}, the CI Clopper-Pearson over the n pairs.
    """
    if len(first) != len(again):
        raise ValueError(f"verdict_flip_rate needs one repeated verdict per verdict, got {len(first)} and "
                         f"{len(again)}")
    pairs = [(a, b) for a, b in zip(first, again) if not (_missing(a) or _missing(b))]
    n, changed = len(pairs), sum(a != b for a, b in pairs)
    lo, hi = _clopper_pearson(changed, n, alpha)
    return {"estimate": changed / n if n else math.nan, "ci_low": lo, "ci_high": hi, "n": n, "n_changed": changed,
            "n_dropped": len(first) - n}
