"""Per-user fairness within one run: for each user attribute a task declares (`Task.fairness_by`: activity level,
gender, age, ...), each group's mean of the headline and the list metrics, the largest gap between two groups (the
best-served minus the worst-served group) with a CI and a test, and the worst-served group named.

The gap is a Comparison record (recbench/stats/records.py) with the groups in place of the runs: the groups are
independent samples of users, so each pair of groups gets Welch's t-test and its CI (the unit is the cluster named by
the task's `cluster_by`, a user asking several queries, else the sample), and the pairs of one (metric, attribute) are
one family, Holm-corrected like compare's pairs of runs; the record keeps the best-vs-worst pair, the largest gap.
Groups of a single unit are shown with their mean but take no part in the gap (Welch needs two units a group).
"""
from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np

from recbench.api.item_lists import LIST_METRICS
from recbench.api.metrics import family as family_of
from recbench.api.metrics import metric_spec
from recbench.stats._lazy import lazy_module
from recbench.stats.clusters import cluster_means
from recbench.stats.multiple import adjust
from recbench.stats.records import Comparison, verdict_of

stats = lazy_module("scipy.stats")
_LIST_FAMILIES = {family_of(s.name) for s in LIST_METRICS if s.aggregation == "mean"}
CI_MEANING = "Welch 95% CI of the difference of the two groups' means (unadjusted)"


def welch(a: np.ndarray, b: np.ndarray, level: float = 0.95) -> tuple[float, float, float, float]:
    """(mean(a) - mean(b), CI low, CI high, two-sided p) of Welch's unequal-variance t-test (scipy's ttest_ind with
    equal_var=False); NaN where either group has fewer than two units or both have no variance."""
    if len(a) < 2 or len(b) < 2:
        return float(np.mean(a) - np.mean(b)) if len(a) and len(b) else math.nan, math.nan, math.nan, math.nan
    d = float(a.mean() - b.mean())
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return d, d, d, (1.0 if d == 0 else 0.0)
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    t = stats.t.ppf(0.5 + level / 2, df)
    p = 2 * stats.t.sf(abs(d / se), df)
    return d, d - t * se, d + t * se, float(p)


def gap_metrics(task: Any, names: Sequence[str]) -> list[str]:
    """The metrics a fairness table states: the headline and the per-sample list metrics with a direction."""
    out = [m for m in names if m == task.headline_metric or family_of(m) in _LIST_FAMILIES]
    return [m for m in out if metric_spec(m).ranks]


def _units(values: np.ndarray, clusters: list[Any] | None) -> np.ndarray:
    ok = ~np.isnan(values)
    if clusters is None:
        return values[ok]
    return cluster_means(values[ok], [c for c, keep in zip(clusters, ok) if keep])[0]


def attribute_gap(task: Any, metric: str, attribute: str, groups: dict[str, np.ndarray],
                  clusters: dict[str, list[Any]] | None) -> dict[str, Any]:
    """The largest gap of `metric` between the groups of one attribute, as a Comparison's JSON plus each group's
    n and mean and the worst-served group."""
    spec = metric_spec(metric)
    units = {g: _units(v, None if clusters is None else clusters[g]) for g, v in groups.items()}
    shown = {g: {"n": int(len(u)), "mean": float(u.mean())} for g, u in units.items() if len(u)}
    means = {g: v["mean"] for g, v in shown.items() if v["n"] >= 2}  # a group of one unit has no variance: not tested
    if len(means) < 2:
        return {"groups": shown, "worst": None, "note": "fewer than two groups with two or more units"}
    sign = 1 if spec.higher_is_better else -1
    best = max(means, key=lambda g: sign * means[g])
    worst = min((g for g in means if g != best), key=lambda g: sign * means[g])  # all equal: another group
    pairs = [(a, b) for a, b in itertools.combinations(means, 2)]
    tests = {p: welch(units[p[0]], units[p[1]]) for p in pairs}
    p_adj, rejected = adjust([tests[p][3] for p in pairs])
    key = (best, worst) if (best, worst) in tests else (worst, best)
    k = pairs.index(key)
    d, lo, hi, p = tests[key]
    if key != (best, worst):  # state the gap as best minus worst
        d, lo, hi = -d, -hi, -lo
    c = Comparison(run_a=best, run_b=worst, metric=metric, slice=attribute, n=len(units[best]) + len(units[worst]),
                   mean_a=means[best], mean_b=means[worst], diff=d, ci_low=lo, ci_high=hi, test="welch",
                   p_value=p, p_adjusted=float(p_adj[k]), significant=bool(rejected[k]),
                   higher_is_better=spec.higher_is_better, direction=spec.direction,
                   better=best if rejected[k] else None, n_examples=int(sum(len(v) for v in groups.values())),
                   cluster_by=task.user_by or task.cluster_by, task=str(task.name), correction="holm", family_size=len(pairs),
                   family=f"{task.name} · {metric} · {attribute} groups", note=CI_MEANING)
    c.verdict = verdict_of(c)
    tied = means[best] == means[worst]  # every group has the same mean: no group is served worse
    return {"groups": shown, "worst": None if tied else worst, **c.to_dict()}


def group_gaps(task: Any, records: Sequence[Any]) -> dict[str, dict[str, Any]]:
    """{attribute: {metric: gap record}} for every attribute of `task.fairness_by` the records carry."""
    out: dict[str, dict[str, Any]] = {}
    names = list(dict.fromkeys(m for r in records for m in r.metrics))
    metrics = gap_metrics(task, names)
    for attribute in task.fairness_by:
        labels = [str(r.meta[attribute]) if attribute in r.meta else None for r in records]
        values = [v for v in task.slice_values(attribute, {x for x in labels if x is not None})]
        if len(values) < 2:
            continue
        rows = {g: np.array([i for i, x in enumerate(labels) if x == g], dtype=np.intp) for g in values}
        clusters = None
        unit = task.user_by or task.cluster_by
        if unit:
            clusters = {g: [records[i].meta.get(unit, records[i].id) for i in idx] for g, idx in rows.items()}
        out[attribute] = {}
        for m in metrics:
            col = np.array([r.value(m) for r in records], dtype=float)
            out[attribute][m] = attribute_gap(task, m, attribute, {g: col[idx] for g, idx in rows.items()}, clusters)
    return out
