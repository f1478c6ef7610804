"""Paired comparison of runs: `python -m recbench.compare RUN_DIR RUN_DIR [...]` and the API the reports call.

For every pair of runs of one task that share example ids: paired per-unit differences of each metric (the unit is
the cluster named by the run's `cluster_by`, else the example), their mean, an unadjusted 95% paired bootstrap CI, a
two-sided p-value (exact McNemar for 0/1 metrics, else a sign-flip permutation test; Wilcoxon or paired t on
request), and a Holm (or Benjamini-Hochberg) correction within each family: one task, metric and slice, over its
pairs of runs. Overall and per breakdown slice. The sweep report uses exactly these records and families.
With a margin (`add_margin`), each record also gets equivalence (TOST) and non-inferiority p-values on the same units,
corrected within the same families.

Long because reading runs, pairing them into units, the records, their families and corrections, the Monte Carlo
refinement and the letters are one contract that the CLI and the reports share.
"""
from __future__ import annotations

import itertools
import json
import logging
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recbench.api.errors import suggest
from recbench.api.metrics import RANKING_DIRECTIONS, MetricSpec, metric_spec
from recbench.stats.clusters import cluster_means, pool_seeds
from recbench.stats.equivalence import noninferiority_p, paired_margin_test
from recbench.stats.letters import compact_letters
from recbench.stats.multiple import adjust
from recbench.stats.paired import (
    is_binary,
    paired_bootstrap_ci,
    paired_test,
    percentile_interval,
    sign_flip_mc_se,
    sign_flip_test,
)
from recbench.stats.resample import batch_rows, integer_blocks
from recbench.store.schema import Run, SchemaError, find_run_dirs, read_run

log = logging.getLogger(__name__)
SEED_KEYS = (("seed",), ("sampling", "seed"))
MAX_REFINED_RESAMPLES = 1_000_000
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
class System:
    """One row of a comparison: a run, or several seeds of one configuration pooled per example."""

    label: str
    runs: list[Run]
    task: str
    cluster_by: str | None
    ids: list[str]  # examples finished in every pooled run, in the first run's order
    meta: dict[str, dict[str, Any]]
    values: dict[str, np.ndarray]  # metric -> (K seeds x len(ids)) values, NaN = undefined
    metric_info: dict[str, dict[str, Any]]
    breakdown_keys: list[str]
    result_metrics: set[str]  # metric names in metrics.json (corpus metrics included)

    @property
    def k(self) -> int:
        """Seeds pooled."""
        return len(self.runs)


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


# ---- reading runs -------------------------------------------------------------------------------------
def _drop_seed(config: dict[str, Any]) -> dict[str, Any]:
    cfg = json.loads(json.dumps(config, default=str))
    for path in SEED_KEYS:
        node = cfg
        for key in path[:-1]:
            node = node.get(key, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(path[-1], None)
    return cfg


def _labels(dirs: Sequence[Path]) -> list[str]:
    if len(dirs) == 1:
        return [dirs[0].name]
    root = Path(os.path.commonpath([str(d) for d in dirs]))
    return [str(d.relative_to(root)) or d.name for d in dirs]


def load_systems(paths: Iterable[str | Path], *, pool_seeds_: bool = False) -> list[System]:
    """Every run under the paths (run or sweep dirs) as a System; with pool_seeds_, runs differing only in seed are one.
    A sweep job that failed at run time (job_failed.json beside a partial metrics.json) is left out, as in reports."""
    from recbench.store.schema import JOB_FAILED

    paths = list(paths)
    try:
        dirs = find_run_dirs(paths)
        for d in [d for d in dirs if (d / JOB_FAILED).exists()]:
            log.warning("%s: the sweep job failed (%s): not compared", d, JOB_FAILED)
        dirs = [d for d in dirs if not (d / JOB_FAILED).exists()]
        runs = [read_run(d) for d in dirs]
    except SchemaError as e:
        raise CompareError(str(e)) from e
    if not dirs:
        raise CompareError(f"no run dir (a folder with metrics.json) under {', '.join(map(str, paths))}")
    labels = dict(zip(dirs, _labels(dirs)))
    groups: dict[str, list[Run]] = {}
    for run in runs:
        key = str(run.dir)
        if pool_seeds_:
            r = run.result
            key = json.dumps([run.task, r.model if r else "", r.method if r else "", _drop_seed(run.config)],
                             sort_keys=True, default=str)
        groups.setdefault(key, []).append(run)
    out = []
    for members in groups.values():
        label = labels[members[0].dir.resolve()] if members[0].dir.resolve() in labels else members[0].dir.name
        if len(members) > 1:
            label += f" [{len(members)} seeds]"
        out.append(_system(label, members))
    return out


def _system(label: str, runs: list[Run]) -> System:
    per_run = [{s.id: s for s in run.samples()} for run in runs]
    ids = [i for i in per_run[0] if all(i in p for p in per_run[1:])]
    names = list(dict.fromkeys(m for p in per_run for s in p.values() for m in s.metrics))
    values = {m: np.array([[p[i].value(m) for i in ids] for p in per_run], dtype=float) for m in names}
    res = [r.result for r in runs if r.result is not None]
    info: dict[str, dict[str, Any]] = {}
    for r in res:
        info.update(r.metric_info)
    tasks = {run.task for run in runs}
    return System(label=label, runs=runs, task=runs[0].task if len(tasks) == 1 else "/".join(sorted(tasks)),
                  cluster_by=res[0].cluster_by if res else None, ids=ids,
                  meta={i: per_run[0][i].meta for i in ids}, values=values, metric_info=info,
                  breakdown_keys=list(dict.fromkeys(k for r in res for k in r.breakdown)),
                  result_metrics={m for r in res for m in r.metrics})


# ---- comparing --------------------------------------------------------------------------------------
def _spec(name: str, a: System, b: System) -> MetricSpec:
    return metric_spec(name, a.metric_info.get(name) or b.metric_info.get(name))


def _slices(a: System, b: System, ids: list[str]) -> list[tuple[str, list[str]]]:
    out = [("all", ids)]
    for key in dict.fromkeys(a.breakdown_keys + b.breakdown_keys):
        vals = sorted({str(a.meta[i][key]) for i in ids if key in a.meta[i]})
        out.extend((f"{key}={v}", [i for i in ids if str(a.meta[i].get(key)) == v]) for v in vals)
    return out


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
    out: list[Comparison] = []
    for m in names:
        spec = _spec(m, a, b)
        for sl, sub in (_slices(a, b, ids) if slices else [("all", ids)]):
            if wanted is not None and sl not in wanted:
                continue
            base = {"run_a": a.label, "run_b": b.label, "metric": m, "slice": sl,
                    "higher_is_better": spec.higher_is_better if spec.ranks else None, "direction": spec.direction,
                    "seeds_a": a.k, "seeds_b": b.k, "task": a.task, "cluster_by": cluster_by}
            if spec.aggregation == "corpus":
                out.append(_corpus_record(spec, a, b, sub, base, n_resamples, seed, note))
                continue
            out.append(_mean_record(m, spec, a, b, sub, base, test=test, n_resamples=n_resamples, seed=seed,
                                    level=level, note=note, cluster_by=cluster_by))
            mark_noise_floor(out[-1], a, b)
    return out


def noise_floor_of(s: System, metric: str, slice_: str = "all") -> float | None:
    """The largest noise floor of a system's runs for one metric and slice (metrics.json extra.noise_floor, written
    by the noise-floor audit, recbench.audits.noise), or None when no run has one."""
    floors = []
    for run in s.runs:
        result = getattr(run, "result", None)  # a System built in code may carry no run
        block = (result.extra if result is not None else {}).get("noise_floor")
        if isinstance(block, dict):
            table = block.get("metrics") if slice_ == "all" else (block.get("by_slice") or {}).get(slice_)
            v = ((table or {}).get(metric) or {}).get("floor")
            if isinstance(v, (int, float)) and math.isfinite(v):
                floors.append(float(v))
    return max(floors) if floors else None


def mark_noise_floor(c: Comparison, a: System, b: System) -> None:
    """Set the record's noise floor (the larger of the two runs') and whether |diff| is below it (in place)."""
    floors = [f for f in (noise_floor_of(a, c.metric, c.slice), noise_floor_of(b, c.metric, c.slice)) if f is not None]
    if floors:
        c.noise_floor = max(floors)
        c.below_noise_floor = bool(math.isfinite(c.diff) and abs(c.diff) < c.noise_floor)


def _corpus_record(spec, a, b, ids, base, n_resamples, seed, note) -> Comparison:
    have = spec.per_example_name and spec.corpus and spec.per_example_name in a.values \
        and spec.per_example_name in b.values
    if not have:
        return Comparison(**base, n=0, mean_a=math.nan, mean_b=math.nan, diff=math.nan, ci_low=math.nan,
                          ci_high=math.nan, test="none", p_value=math.nan, n_examples=len(ids),
                          note="not comparable per example (corpus metric without a per-example form)")
    ma, mb, lo, hi, p, n, how = _corpus_comparison(spec, a, b, ids, n_resamples=n_resamples or 1999, seed=seed)
    return Comparison(**base, n=n, mean_a=ma, mean_b=mb, diff=ma - mb, ci_low=lo, ci_high=hi, test="permutation",
                      p_value=p, n_examples=n, n_resamples=n_resamples or 1999, note="; ".join(filter(None, [note, how])))


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
    res = paired_test(xa, xb, test, binary=binary, n_resamples=n_resamples, seed=seed)
    lo, hi = paired_bootstrap_ci(xa, xb, n_resamples=n_resamples or 9999, level=level, seed=seed)
    if res.note and res.test == "mcnemar":
        notes.append(res.note)
    diff = float(xa.mean() - xb.mean())
    return Comparison(**base, n=n, mean_a=float(xa.mean()), mean_b=float(xb.mean()), diff=diff, ci_low=lo,
                      ci_high=hi, test=res.test, p_value=res.p_value, n_examples=len(kept),
                      seed_var_share=d_by_seed_share, n_resamples=res.n_resamples, p_mc_se=res.mc_se,
                      note="; ".join(notes), units_a=xa, units_b=xb)


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
    return (c.p_value - 3 * se) * factor < alpha <= (c.p_value + 3 * se) * factor and c.n_resamples < max_resamples


def refine_monte_carlo(comparisons: list[Comparison], *, method: str, alpha: float, seed: int = 0,
                       max_resamples: int = MAX_REFINED_RESAMPLES) -> list[Comparison]:
    """In each family, add permutations (4x, up to max_resamples) to every Monte Carlo p-value whose verdict after
    correction is within 3 Monte Carlo standard errors (`sign_flip_mc_se`) of alpha, then correct the family again;
    at most 8 rounds per family, so a family's result never depends on the other families of the invocation."""
    for comps in families(comparisons).values():
        for _ in range(8):
            unsure = [c for c in comps if _near_threshold(c, alpha, max_resamples)]
            if not unsure:
                break
            for c in unsure:
                b = min(max_resamples, 4 * c.n_resamples)
                res = sign_flip_test(c.units_a, c.units_b, n_resamples=b, seed=seed)
                c.p_value, c.n_resamples, c.p_mc_se = res.p_value, res.n_resamples, res.mc_se
            _correct_family(comps, method, alpha)
    return comparisons


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


def comparable(m: str, a: System, b: System) -> bool:
    """True when both systems have metric m per example (or as a corpus metric with a per-example form)."""
    return m in a.values and m in b.values or _corpus_ok(m, a, b)


def _corpus_ok(m: str, a: System, b: System) -> bool:
    return m in a.result_metrics and m in b.result_metrics and _spec(m, a, b).aggregation == "corpus"


def _check_metrics(metrics: Sequence[str], systems: list[System]) -> None:
    known = sorted({m for s in systems for m in s.values} | {m for s in systems for m in s.result_metrics})
    for m in metrics:
        if m not in known:
            raise CompareError(f"Unknown metric '{m}' for these runs.{suggest(m, known)} Metrics they have: "
                               f"{', '.join(known)}")


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


@dataclass(frozen=True)
class PairedSd:
    """The sd of paired per-unit differences of a metric, for power planning, and where it came from."""

    sd: float
    n_units: int
    source: str


def paired_sd_from_runs(paths: Iterable[str | Path], metric: str, task: str | None = None) -> PairedSd | None:
    """sd of paired unit differences from existing runs of one task: the pair sharing the most units; with a single
    run, sqrt(2) x the sd of its units (two independent systems; conservative when systems are positively
    correlated, as models on the same examples are); pairs equal on every unit and constant runs are passed over
    (an sd of 0 plans nothing); None when no run has the metric (or none has spread)."""
    systems = [s for s in load_systems(paths) if metric in s.values and (task is None or s.task == task)]
    if not systems:
        return None
    best: PairedSd | None = None
    for a, b in itertools.combinations(systems, 2):
        if a.task != b.task or not set(a.ids) & set(b.ids):
            continue
        c = compare_pair(a, b, metrics=[metric], slices=False, n_resamples=2)[0]  # only the units are used here
        if c.units_a is None or c.n < 2:
            continue
        sd = float(np.std(c.units_a - c.units_b, ddof=1))
        if not sd > 0:  # equal on every unit (the same system twice): says nothing of a difference's spread
            continue
        if best is None or c.n > best.n_units:
            best = PairedSd(sd, c.n, f"paired runs {a.label} vs {b.label}")
    if best is not None:
        return best
    s = max(systems, key=lambda s: len(s.ids))
    labels = [str(s.meta[i].get(s.cluster_by, i)) if s.cluster_by else i for i in s.ids]
    vals = s.values[metric].mean(axis=0)
    ok = ~np.isnan(vals)
    units, _ = cluster_means(vals[ok], [lab for lab, k in zip(labels, ok) if k])
    if len(units) < 2 or not np.std(units, ddof=1) > 0:  # a constant run: no spread to plan with
        return None
    return PairedSd(float(math.sqrt(2) * np.std(units, ddof=1)), len(units),
                    f"one run ({s.label}): sqrt(2) x its sd, as if the two systems were independent")


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
