"""Paired comparison of runs: `python -m recbench.compare RUN_DIR RUN_DIR [...]` and the API the reports call.

For every pair of runs of one task that share example ids: paired per-unit differences of each metric (the unit is
the cluster named by the run's `cluster_by`, else the example), their mean, an unadjusted 95% paired bootstrap CI, a
two-sided p-value (exact McNemar for 0/1 metrics, else a sign-flip permutation test; Wilcoxon or paired t on
request), and a Holm (or Benjamini-Hochberg) correction within each family: one task, metric and slice, over its
pairs of runs. Overall and per breakdown slice. The sweep report uses exactly these records and families.
With a margin (`add_margin`), each record also gets equivalence (TOST) and non-inferiority p-values on the same units,
corrected within the same families.

The records and their families are recbench/stats/records.py, reading runs recbench/stats/systems.py, the margin
verdicts recbench/stats/margins.py; this module pairs, tests and corrects, and re-exports their public names.
"""
from __future__ import annotations

import functools
import itertools
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from recbench.api.metrics import RANKING_DIRECTIONS, MetricSpec
from recbench.stats.clusters import cluster_means, pool_seeds
from recbench.stats.margins import add_margin, check_margin, margin_verdict_of
from recbench.stats.multiple import adjust
from recbench.stats.paired import (
    is_binary,
    paired_bootstrap_ci,
    p_precision,
    paired_test,
    percentile_interval,
    resample_cap,
    sign_flip_mc_se,
    sign_flip_test,
)
from recbench.stats.records import (
    CI_MEANING,
    MARGIN_FIELDS,
    NOISE_FIELDS,
    RECORD_FIELDS,
    CompareError,
    Comparison,
    ci_disagrees,
    families,
    family_key,
    family_line,
    letters,
    verdict_of,
    write_json,
)
from recbench.stats.resample import batch_rows, integer_blocks
from recbench.stats.systems import (
    System,
    _check_metrics,
    _slices,
    _spec,
    comparable,
    load_systems,
    mark_noise_floor,
    noise_floor_of,
)

log = logging.getLogger(__name__)
MAX_REFINED_RESAMPLES = 1_000_000
__all__ = ["CI_MEANING", "MARGIN_FIELDS", "NOISE_FIELDS", "RECORD_FIELDS", "CompareError", "Comparison", "System",
           "add_margin", "check_margin", "ci_disagrees", "comparable", "compare_pair", "compare_runs", "correct",
           "families", "family_key", "family_line", "letters", "load_systems", "margin_verdict_of", "mark_noise_floor",
           "noise_floor_of", "refine_monte_carlo", "verdict_of", "write_json"]


def _corpus_comparison(spec: MetricSpec, a: System, b: System, ids: list[str], *, n_resamples: int,
                       seed: int) -> tuple[float, float, float, float, float, int, str]:
    """Corpus statistic of the per-example form: paired bootstrap CI and a paired swap permutation p-value."""
    from scipy import stats

    pa, pb = _index(a, ids), _index(b, ids)
    va = a.values[spec.per_example_name].mean(axis=0)[pa]
    vb = b.values[spec.per_example_name].mean(axis=0)[pb]
    ok = ~(np.isnan(va) | np.isnan(vb))
    va, vb = va[ok], vb[ok]
    f = spec.corpus
    if len(va) < 2:
        raise CompareError(f"corpus metric '{spec.name}' needs at least 2 examples defined in both runs, got {len(va)}")

    def stat(x, y):
        return f(list(x)) - f(list(y))

    rng = np.random.default_rng(seed)  # one stream: the bootstrap's draws, then the permutations'
    theta = np.array([stat(va[i], vb[i]) for idx in integer_blocks(rng, len(va), n_resamples) for i in idx])
    lo, hi = percentile_interval((va, vb), stat, theta, level=0.95, vectorized=False)
    p = stats.permutation_test((va, vb), stat, permutation_type="samples", vectorized=False,
                               n_resamples=n_resamples, random_state=rng,
                               batch=batch_rows(2 * len(va), n_resamples)).pvalue
    return f(list(va)), f(list(vb)), lo, hi, float(p), int(ok.sum()), \
        f"corpus statistic of '{spec.per_example_name}', examples resampled ({n_resamples} resamples)"


def _index(s: System, ids: list[str]) -> np.ndarray:
    pos = {i: k for k, i in enumerate(s.ids)}
    return np.array([pos[i] for i in ids], dtype=int)


def compare_pair(a: System, b: System, *, metrics: Sequence[str] | None = None, test: str = "auto",
                 n_resamples: int | None = None, seed: int = 0, slices: bool = True,
                 level: float = 0.95, only_slices: Iterable[str] | None = None) -> list[Comparison]:
    """Uncorrected comparisons of two systems of one task, per metric and slice (p_adjusted left NaN); only_slices
    keeps the named slices (each record is computed on its own, so a subset gives the same records)."""
    if a.task != b.task:
        raise CompareError(f"runs '{a.label}' (task {a.task}) and '{b.label}' (task {b.task}) are of different tasks; "
                           "compare runs of one task")
    in_b = set(b.ids)
    ids = [i for i in a.ids if i in in_b]
    if not ids:
        raise CompareError(f"runs '{a.label}' ({len(a.ids)} examples) and '{b.label}' ({len(b.ids)} examples) share no "
                           "example ids; were they run on the same data and split?")
    note = ""
    if len(ids) != len(a.ids) or len(ids) != len(b.ids):
        note = f"compared on the {len(ids)} shared ids ({a.label}: {len(a.ids)}, {b.label}: {len(b.ids)})"
    shared = [m for m in a.values if m in b.values]
    names = shared if metrics is None else list(metrics)
    cluster_by = a.cluster_by or b.cluster_by
    wanted = None if only_slices is None else set(only_slices)
    jobs: list[Callable[[], Comparison]] = []
    for m in names:
        spec = _spec(m, a, b)
        for sl, sub in (_slices(a, b, ids) if slices else [("all", ids)]):
            if wanted is not None and sl not in wanted:
                continue
            base = {"run_a": a.label, "run_b": b.label, "metric": m, "slice": sl,
                    "higher_is_better": spec.higher_is_better if spec.ranks else None, "direction": spec.direction,
                    "seeds_a": a.k, "seeds_b": b.k, "task": a.task, "cluster_by": cluster_by}
            if spec.aggregation == "corpus":
                jobs.append(functools.partial(_corpus_record, spec, a, b, sub, base, n_resamples, seed, note))
            else:
                jobs.append(functools.partial(_floored_mean_record, m, spec, a, b, sub, base, test=test,
                                              n_resamples=n_resamples, seed=seed, level=level, note=note,
                                              cluster_by=cluster_by))
    # two records at a time: each record's draws are seeded on their own, so the records do not depend on the order;
    # numpy frees the GIL while it draws, so both cores stay busy between one record's test and the next's
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(job) for job in jobs]
        try:
            return [f.result() for f in futures]
        except BaseException:  # a refused record (or Ctrl-C): the records not started are not computed
            for f in futures:
                f.cancel()
            raise


def _floored_mean_record(m, spec, a, b, ids, base, **kw) -> Comparison:
    """_mean_record with the runs' noise floor marked on it."""
    c = _mean_record(m, spec, a, b, ids, base, **kw)
    mark_noise_floor(c, a, b)
    return c


def _corpus_record(spec, a, b, ids, base, n_resamples, seed, note) -> Comparison:
    have = spec.per_example_name and spec.corpus and spec.per_example_name in a.values \
        and spec.per_example_name in b.values
    if not have:
        return Comparison(**base, n=0, mean_a=math.nan, mean_b=math.nan, diff=math.nan, ci_low=math.nan,
                          ci_high=math.nan, test="none", p_value=math.nan, n_examples=len(ids),
                          note="not comparable per example (corpus metric without a per-example form)")
    ma, mb, lo, hi, p, n, how = _corpus_comparison(spec, a, b, ids, n_resamples=n_resamples or 1999, seed=seed)
    b = n_resamples or 1999
    se = sign_flip_mc_se(p, b)
    return Comparison(**base, n=n, mean_a=ma, mean_b=mb, diff=ma - mb, ci_low=lo, ci_high=hi, test="permutation",
                      p_value=p, n_examples=n, n_resamples=b, p_mc_se=se, note="; ".join(filter(None, [note, how])),
                      p_precision=f"Monte Carlo se {se:.2g} ({b:,} swaps)")


def _mean_record(m, spec, a, b, ids, base, *, test, n_resamples, seed, level, note, cluster_by) -> Comparison:
    pa, pb = _index(a, ids), _index(b, ids)
    va, vb = a.values[m][:, pa], b.values[m][:, pb]
    ok = ~(np.isnan(va).any(axis=0) | np.isnan(vb).any(axis=0))
    notes = [note] if note else []
    if (~ok).any():
        notes.append(f"{int((~ok).sum())} example(s) undefined in a run left out")
    kept = [i for i, keep in zip(ids, ok) if keep]
    pool_a, pool_b = pool_seeds(va[:, ok]), pool_seeds(vb[:, ok])
    d_by_seed_share = None
    labels = [str(a.meta[i].get(cluster_by, i)) if cluster_by else i for i in kept]
    if cluster_by and (missing := sum(cluster_by not in a.meta[i] for i in kept)):
        notes.append(f"cluster key '{cluster_by}' missing from the meta of {missing} example(s): each is its own unit")
    xa, _ = cluster_means(pool_a.means, labels)
    xb, _ = cluster_means(pool_b.means, labels)
    n = len(xa)
    if n == 0:
        return Comparison(**base, n=0, mean_a=math.nan, mean_b=math.nan, diff=math.nan, ci_low=math.nan,
                          ci_high=math.nan, test="none", p_value=math.nan, n_examples=0,
                          note="; ".join(notes + ["no example defined in both runs"]))
    if a.k > 1 or b.k > 1:
        var_d = float(np.var(xa - xb, ddof=1)) if n > 1 else 0.0
        seed_part = pool_a.within_var / pool_a.k + pool_b.within_var / pool_b.k
        d_by_seed_share = seed_part / var_d if var_d > 0 else None
    binary = spec.binary and is_binary(xa, xb)
    if test == "mcnemar" and not is_binary(xa, xb):
        raise CompareError(f"--test mcnemar needs 0/1 values per unit, but metric '{m}' has others "
                           "(or clusters average them); use --test permutation")
    with ThreadPoolExecutor(1) as pool:  # the CI's resamples on a second core while the test runs (numpy frees the GIL)
        ci = pool.submit(paired_bootstrap_ci, xa, xb, n_resamples=n_resamples or 9999, level=level, seed=seed)
        res = paired_test(xa, xb, test, binary=binary, n_resamples=n_resamples, seed=seed)
        lo, hi = ci.result()
    if res.note and res.test == "mcnemar":
        notes.append(res.note)
    diff = float(xa.mean() - xb.mean())
    return Comparison(**base, n=n, mean_a=float(xa.mean()), mean_b=float(xb.mean()), diff=diff, ci_low=lo,
                      ci_high=hi, test=res.test, p_value=res.p_value, n_examples=len(kept),
                      seed_var_share=d_by_seed_share, n_resamples=res.n_resamples, p_mc_se=res.mc_se,
                      p_precision=res.precision, p_error=res.p_error, note="; ".join(notes), units_a=xa, units_b=xb)


def _correct_family(comps: list[Comparison], method: str, alpha: float) -> None:
    adj, rej = adjust([c.p_value for c in comps], method=method, alpha=alpha)
    size = int(sum(1 for c in comps if math.isfinite(c.p_value)))
    for c, p, r in zip(comps, adj, rej):
        c.p_adjusted, c.significant = float(p), bool(r)
        c.family, c.family_size, c.correction = " · ".join(family_key(c)), size, method
        c.better = None
        if r and c.diff != 0 and c.direction in RANKING_DIRECTIONS:
            a_wins = (c.diff > 0) == (c.direction == "higher")
            c.better = c.run_a if a_wins else c.run_b
        c.verdict = verdict_of(c)


def correct(comparisons: list[Comparison], method: str = "holm", alpha: float = 0.05) -> list[Comparison]:
    """Fill p_adjusted / significant / better / verdict within each family, one (task, metric, slice) over its pairs
    of runs (in place; returns the list). A metric without a direction keeps its p-values but never a 'better'."""
    for comps in families(comparisons).values():
        _correct_family(comps, method, alpha)
    return comparisons


def compare_runs(paths_or_systems: Sequence[Any], *, metrics: Sequence[str] | None = None, test: str = "auto",
                 correction: str = "holm", alpha: float = 0.05, n_resamples: int | None = None, seed: int = 0,
                 slices: bool = True, pool_seeds_: bool = False, progress: bool = False,
                 margin: float | None = None) -> list[Comparison]:
    """Every pair of runs of one task that share ids, per metric and slice; corrected within each (task, metric,
    slice) family over its pairs, with the Monte Carlo p-values near the threshold refined (as the report does);
    with a margin, also equivalence and non-inferiority (`add_margin`)."""
    if margin is not None:
        check_margin(margin)
    systems = (list(paths_or_systems) if paths_or_systems and isinstance(paths_or_systems[0], System)
               else load_systems(paths_or_systems, pool_seeds_=pool_seeds_))
    if len(systems) < 2:
        raise CompareError(f"need at least two runs to compare, found {len(systems)}"
                           + (f" ({systems[0].label})" if systems else ""))
    if metrics:
        _check_metrics(metrics, systems)
    pairs = [(a, b) for a, b in itertools.combinations(systems, 2) if a.task == b.task]
    if not pairs:
        a, b = systems[0], systems[1]
        raise CompareError(f"runs '{a.label}' (task {a.task}) and '{b.label}' (task {b.task}) are of different tasks; "
                           "compare runs of one task")
    out: list[Comparison] = []
    skipped = []
    if progress:
        from tqdm.auto import tqdm

        pairs = tqdm(pairs, desc="compare", unit="pair")
    for a, b in pairs:
        if not set(a.ids) & set(b.ids):
            skipped.append((a, b))
            continue
        names = None if not metrics else [m for m in metrics if comparable(m, a, b)]
        out.extend(compare_pair(a, b, metrics=names, test=test, n_resamples=n_resamples, seed=seed, slices=slices))
    if not out:
        a, b = skipped[0]
        compare_pair(a, b)  # raises the no-shared-ids error
    for a, b in skipped:
        log.warning("runs '%s' and '%s' share no example ids: not compared", a.label, b.label)
    correct(out, method=correction, alpha=alpha)
    if n_resamples is None:
        refine_monte_carlo(out, method=correction, alpha=alpha, seed=seed)
    if margin is not None:
        add_margin(out, margin, method=correction, alpha=alpha)
    return out


def _near_threshold(c: Comparison, alpha: float, max_resamples: int) -> bool:
    """True when a Monte Carlo p's verdict after correction lies within 3 Monte Carlo standard errors of alpha."""
    if c.n_resamples is None or c.test != "permutation" or c.units_a is None or not math.isfinite(c.p_value):
        return False
    factor = c.p_adjusted / c.p_value if c.p_value > 0 else 1.0
    se = sign_flip_mc_se(c.p_value, c.n_resamples)  # the two-sided p's error; a p at its floor counts at 2/(B+1)
    return (c.p_value - 3 * se) * factor < alpha <= (c.p_value + 3 * se) * factor \
        and c.n_resamples < resample_cap(c.n, max_resamples)


def refine_monte_carlo(comparisons: list[Comparison], *, method: str, alpha: float, seed: int = 0,
                       max_resamples: int = MAX_REFINED_RESAMPLES) -> list[Comparison]:
    """In each family, add permutations (4x, up to max_resamples and the flip budget `resample_cap`) to every Monte
    Carlo p-value whose verdict after correction is within 3 Monte Carlo standard errors (`sign_flip_mc_se`) of alpha,
    then correct the family again; at most 8 rounds per family, so a family's result never depends on the other
    families of the invocation. Exact p-values (enumeration, lattice) are never near-threshold-refined."""
    for comps in families(comparisons).values():
        for _ in range(8):
            unsure = [c for c in comps if _near_threshold(c, alpha, max_resamples)]
            if not unsure:
                break
            for c in unsure:
                b = min(resample_cap(c.n, max_resamples), 4 * c.n_resamples)
                res = sign_flip_test(c.units_a, c.units_b, n_resamples=b, seed=seed)
                c.p_value, c.n_resamples, c.p_mc_se = res.p_value, res.n_resamples, res.mc_se
                c.p_precision = p_precision(res.test, res.n_resamples, res.mc_se, res.p_error, res.note)
            _correct_family(comps, method, alpha)
    return comparisons
