"""Equivalence (TOST) and non-inferiority verdicts on the records of a comparison, corrected within their families."""
from __future__ import annotations

import math

from recbench.api.metrics import RANKING_DIRECTIONS
from recbench.stats.equivalence import noninferiority_p, paired_margin_test
from recbench.stats.multiple import adjust
from recbench.stats.records import CompareError, Comparison, families


def check_margin(margin: float) -> float:
    """The margin as a float; CompareError unless it is a positive finite number."""
    try:
        d = float(margin)
    except (TypeError, ValueError):
        d = math.nan
    if not (math.isfinite(d) and d > 0):
        raise CompareError(f"--margin must be a positive finite number on the metric's scale (e.g. --margin 0.1 for "
                           f"PTC), got {margin!r}")
    return d


def margin_verdict_of(c: Comparison) -> str:
    """The margin verdicts in words: equivalence within +-margin, and non-inferiority of run_b to run_a."""
    if c.p_equivalence is None or not math.isfinite(c.p_equivalence):
        return f"no equivalence test ({c.margin_note or c.verdict or 'not compared'})"
    eq = f"{'equivalent' if c.equivalent else 'not shown equivalent'} within ±{c.margin:g}"
    if c.direction not in RANKING_DIRECTIONS:
        why = "no direction (descriptive)" if c.direction == "none" else "direction unknown"
        return f"{eq}; no non-inferiority verdict: {why}"
    return f"{eq}; {c.run_b} {'non-inferior' if c.noninferior else 'not shown non-inferior'} to {c.run_a}"


def add_margin(comparisons: list[Comparison], margin: float, *, method: str = "holm",
               alpha: float = 0.05) -> list[Comparison]:
    """Equivalence within +-margin (TOST) and non-inferiority of run_b to run_a on every record's units, each corrected
    within the record's family (task, metric, slice) like the difference test, as two families of their own (in
    place). The score test for the records the exact McNemar test gave (0/1 units), the paired t for the others."""
    margin = check_margin(margin)
    for c in comparisons:
        c.margin = margin
        if c.test == "none" or c.units_a is None or c.units_b is None:
            c.equivalence_test = "none"
            c.margin_note = c.note if c.test == "none" else \
                "corpus statistic: no equivalence test (not a mean of unit differences)"
            continue
        res = paired_margin_test(c.units_a, c.units_b, margin, binary=c.test == "mcnemar", alpha=alpha)
        c.equivalence_test, c.margin_note = res.test, res.note
        c.p_equivalence = res.p_equivalence if math.isfinite(res.p_equivalence) else None
        p_ni = noninferiority_p(res, c.direction)
        c.p_noninferior = p_ni if p_ni is not None and math.isfinite(p_ni) else None
    for comps in families(comparisons).values():
        for p_key, adj_key, ok_key in (("p_equivalence", "p_equivalence_adj", "equivalent"),
                                       ("p_noninferior", "p_noninferior_adj", "noninferior")):
            ps = [math.nan if getattr(c, p_key) is None else getattr(c, p_key) for c in comps]
            adj, rej = adjust(ps, method=method, alpha=alpha)
            for c, p, a, r in zip(comps, ps, adj, rej):
                setattr(c, adj_key, None if math.isnan(p) else float(a))
                setattr(c, ok_key, None if math.isnan(p) else bool(r))
        for c in comps:
            c.margin_verdict = margin_verdict_of(c)
    return comparisons
