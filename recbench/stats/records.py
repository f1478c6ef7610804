"""The records of a paired comparison: one Comparison per (pair, metric, slice), its family, verdict and letters."""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recbench.api.metrics import RANKING_DIRECTIONS
from recbench.stats.letters import compact_letters

RECORD_FIELDS = ("run_a", "run_b", "metric", "slice", "n", "mean_a", "mean_b", "diff", "ci_low", "ci_high", "test",
                 "p_value", "p_adjusted", "significant")
#: the record fields a margin adds (`add_margin`); absent from the JSON of a comparison without one
MARGIN_FIELDS = ("margin", "equivalence_test", "p_equivalence", "p_equivalence_adj", "equivalent", "p_noninferior",
                 "p_noninferior_adj", "noninferior", "margin_verdict", "margin_note")
#: the record fields a noise-floor audit adds (`mark_noise_floor`); absent from the JSON when neither run has one
NOISE_FIELDS = ("noise_floor", "below_noise_floor")
#: what the printed CI is, for captions and footnotes
CI_MEANING = "unadjusted 95% paired bootstrap CI (percentile; one comparison at a time)"


class CompareError(ValueError):
    """Runs that cannot be compared (one line: what is wrong and what to do)."""



@dataclass
class Comparison:
    """One (pair, metric, slice) record; diff = mean_a - mean_b over the shared units."""

    run_a: str
    run_b: str
    metric: str
    slice: str
    n: int  # resampling units (clusters) behind the CI and the p-value
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    test: str
    p_value: float
    p_adjusted: float = math.nan
    significant: bool = False
    higher_is_better: bool | None = True  # None when the metric has no direction ('none' or 'unknown')
    better: str | None = None  # run_a or run_b when significant and the metric has a direction, else None
    n_examples: int = 0
    cluster_by: str | None = None
    seeds_a: int = 1
    seeds_b: int = 1
    seed_var_share: float | None = None  # share of Var(unit differences) that is seed noise (pooled seeds)
    n_resamples: int | None = None
    p_mc_se: float | None = None
    p_precision: str = ""  # how exact p_value is: exact, exact (lattice, error <= e), Monte Carlo se s (B sign vectors)
    p_error: float | None = None  # bound on |p_value - exact p| for a computed p (lattice FFT rounding); None otherwise
    task: str = ""
    note: str = ""
    direction: str = "higher"  # higher | lower (is better) | none (declared without one) | unknown (not registered)
    family: str = ""  # what was corrected together: "<task> · <metric> · <slice>" (every pair of runs in it)
    family_size: int = 0  # p-values corrected together in the family (its pairs with a p-value)
    correction: str = ""  # holm | bh | none
    verdict: str = ""  # "<run> better", "n.s.", "no direction (descriptive)", "direction unknown", or why not compared
    margin: float | None = None  # equivalence margin on the metric's scale (--margin); None: no margin asked
    equivalence_test: str | None = None  # t (paired t) | score-exact | score (0/1 units) | none
    p_equivalence: float | None = None  # TOST: max of the one-sided p of diff <= -margin and of diff >= +margin
    p_equivalence_adj: float | None = None  # corrected within the family, like p_adjusted
    equivalent: bool | None = None  # p_equivalence_adj < alpha: |diff| < margin shown
    p_noninferior: float | None = None  # H0: run_b worse than run_a by margin or more (direction decides); None: none
    p_noninferior_adj: float | None = None
    noninferior: bool | None = None  # None when the metric has no direction or was not tested
    margin_verdict: str = ""  # the equivalence and non-inferiority verdicts in words
    margin_note: str = ""  # how the margin test went (test, discordant pairs, skewed units)
    noise_floor: float | None = None  # the larger noise floor of the two runs (audit.noise); None: neither has one
    below_noise_floor: bool | None = None  # |diff| < noise_floor: batch size alone moved the metric this much
    units_a: np.ndarray | None = field(default=None, repr=False, compare=False)  # per-unit values (not in JSON)
    units_b: np.ndarray | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON record (NaN as null)."""
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in asdict(self).items()
                if not k.startswith("units_") and (self.margin is not None or k not in MARGIN_FIELDS)
                and (self.noise_floor is not None or k not in NOISE_FIELDS)}


def family_key(c: Comparison) -> tuple[str, str, str]:
    """The family a record is corrected in: (task, metric, slice), over every pair of runs compared there."""
    return (c.task, c.metric, c.slice)


def families(comparisons: Iterable[Comparison]) -> dict[tuple[str, str, str], list[Comparison]]:
    """Records grouped by family, in order of first appearance."""
    out: dict[tuple[str, str, str], list[Comparison]] = {}
    for c in comparisons:
        out.setdefault(family_key(c), []).append(c)
    return out


def verdict_of(c: Comparison) -> str:
    """The verdict a record states: '<run> better', 'n.s.', or why there is none (no direction, not compared)."""
    if c.test == "none":
        return c.note or "not compared"
    if c.direction == "none":
        return "no direction (descriptive)"
    if c.direction not in RANKING_DIRECTIONS:
        return "direction unknown"
    return f"{c.better} better" if c.better else "n.s."


def letters(comparisons: Sequence[Comparison], metric: str, slice: str = "all",
            order: Sequence[str] | None = None, task: str | None = None) -> dict[str, str]:
    """Compact letter display for one metric and slice (and task, when the comparisons span several): rows
    best-first; rows sharing a letter are not significantly different after the correction already applied.
    A metric without a direction ('none' or 'unknown') has no letters (CompareError)."""
    comps = [c for c in comparisons if c.metric == metric and c.slice == slice and c.test != "none"
             and (task is None or c.task == task)]
    if not comps:
        raise CompareError(f"no comparisons of metric '{metric}' on slice '{slice}'")
    tasks = sorted({c.task for c in comps})
    if len(tasks) > 1:
        raise CompareError(f"metric '{metric}' is compared in several tasks ({', '.join(tasks)}); pass task=")
    if comps[0].direction not in RANKING_DIRECTIONS:
        raise CompareError(f"metric '{metric}' has no direction ({comps[0].direction}): no significance letters")
    if order is None:
        means: dict[str, list[float]] = {}
        for c in comps:
            means.setdefault(c.run_a, []).append(c.mean_a)
            means.setdefault(c.run_b, []).append(c.mean_b)
        sign = -1.0 if comps[0].higher_is_better else 1.0
        order = sorted(means, key=lambda r: sign * float(np.mean(means[r])))
    return compact_letters(order, [(c.run_a, c.run_b) for c in comps if c.significant])


def ci_disagrees(c: Comparison) -> bool:
    """True when the unadjusted CI and the adjusted verdict point different ways (CI excludes 0 but the family's
    adjusted p does not reject, or the reverse)."""
    lo, hi = c.ci_low, c.ci_high
    if c.test == "none" or lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return False
    return (lo > 0 or hi < 0) != c.significant


def family_line(comparisons: Sequence[Comparison]) -> str:
    """'family = one task, metric and slice; holm over its pairs of runs (ptc: 10 pairs x 9 slices; mae: 1 pair x 9
    slices)': what was corrected together, and how many."""
    fams = families(c for c in comparisons if c.test != "none")
    if not fams:
        return ""
    method = next(iter(fams.values()))[0].correction or "holm"
    by_metric: dict[tuple[str, str], list[int]] = {}
    for (task, metric, _), comps in fams.items():
        by_metric.setdefault((task, metric), []).append(comps[0].family_size)
    several_tasks = len({t for t, _ in by_metric}) > 1
    parts = []
    for (task, metric), sizes in by_metric.items():
        lo, hi = min(sizes), max(sizes)
        pairs = f"{lo} pair{'s' if hi != 1 else ''}" if lo == hi else f"{lo}-{hi} pairs"
        slices = f"{len(sizes)} slice{'s' if len(sizes) != 1 else ''}"
        parts.append(f"{task + ' ' if several_tasks else ''}{metric}: {pairs} x {slices}")
    return f"family = one task, metric and slice; {method} over its pairs of runs ({'; '.join(parts)})"


def write_json(comparisons: Sequence[Comparison], path: str | Path) -> None:
    """One JSON record per (pair, metric, slice)."""
    Path(path).write_text(json.dumps([c.to_dict() for c in comparisons], indent=1) + "\n", encoding="utf-8")
