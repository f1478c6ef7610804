"""Contamination split (`contamination.probe_run=DIR`): a run's headline metric on the examples whose item a
memorization probe run of the same model recalled, and on those whose item it did not recall (the clean subset).

The task names the items an example is about (`Task.contamination_items`: the item a group is asked about, the
held-out target item, the rated item), id -> title as it shows them. The probe run is read through its files only
(recbench.store.schema): every sample of a memorization probe holds meta `set` (real | control) and `item_id`, the
metric `recalled` (0/1) and truth `title`. An item is recalled when a real-set sample naming it was recalled; items of
the fabricated control set never count. Each example gets meta `recalled`: `yes` (one of its items recalled), `no`
(each of its items asked and none recalled) or `unprobed` (an item the probe did not ask about, none recalled), set
before the loop, so samples.jsonl carries it and the split is one more breakdown: metrics.json, the terminal summary,
`recbench.compare` (slices `recalled=yes|no|unprobed`) and the reports show it like difficulty. metrics.json
`extra.contamination` adds the gap test and the clean-subset score (`contamination_block`).

Refused with one line (a ConfigError): a probe run that is missing or not a memorization probe, of another model
(backend identity up to decoding-only fields; a model-free reference row is split by the probe model's recall, the
control for item easiness), or of another catalogue (no item of the run asked, or an item whose title differs).
The probe is not run automatically: it is a run of its own (its own cost, cache, report and plan-mode count); the
refusal names the command that runs it.

Reading the probe run and its refusals: audits/contamination_probe.py; the typed block and its report table:
audits/contamination_blocks.py.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable, Optional

import numpy as np

from recbench.api.audits import Audit, register
from recbench.api.errors import ConfigError
from recbench.audits.contamination_probe import (  # noqa: F401 - the probe's reading is part of this audit
    DECODING_ONLY,
    ProbeRecall,
    check_catalogue,
    check_model,
    label,
    norm_title,
    probe_command,
    read_probe,
    same_title,
)
from recbench.audits.contamination_blocks import (BLOCK, CONTAMINATION_TABLE, ContaminationBlock, Gap, Score,
                                                  summary_line)
from recbench.api.types import Example
from recbench.store.schema import SampleRecord, SchemaError, read_run

#: the example-meta key of the split and its values in display order
KEY = "recalled"
ORDER = ("yes", "no", "unprobed")
#: why the gap is tested this way (metrics.json and the report caption say it)
TEST_NAME = "two-sided permutation test of the difference in means (scipy.stats.permutation_test, labels permuted)"


def enabled(cfg: Any) -> bool:
    """True when the config names a probe run (contamination.probe_run)."""
    return bool(((cfg.get("contamination") if cfg is not None else None) or {}).get("probe_run"))


def split_breakdown(task: Any) -> None:
    """Add `recalled` to the task's breakdowns (last, so run.limit_strategy=stratified keeps its own first key)."""
    if KEY not in task.breakdown_by:  # on this instance only: the class's declarations stay as they are
        task.breakdown_by = (*task.breakdown_by, KEY)
        task.breakdown_order = {**task.breakdown_order, KEY: ORDER}


def split_examples(cfg: Any, task: Any, examples: list[Example], run_dir: str | Path, model: Any) -> list[Example]:
    """The examples with meta `recalled` from the probe run (unchanged when the split is off), after every check:
    the task declares items, the probe is of this model (`model`: the backend or its lazy factory; None for a
    model-free method) and of this catalogue, and finished examples in run_dir were split the same way."""
    if not enabled(cfg):
        return examples
    c = cfg.contamination
    where = f"contamination.probe_run={c.probe_run}"
    name = str(cfg.model.name)
    items = {e.id: {str(k): v for k, v in task.contamination_items(e).items()} for e in examples}
    if examples and not any(items.values()):
        raise ConfigError(f"{where}: task {task.name} declares no item an example is about "
                          f"({type(task).__name__}.contamination_items): it has no contamination split")
    probe = read_probe(str(c.probe_run), name)
    if model is not None:
        check_model(probe, name, model.identity(), where)
    check_catalogue(items, probe, where, float(c.title_similarity))
    labels = {i: label(per, probe) if per else "unprobed" for i, per in items.items()}
    _check_finished(Path(run_dir), labels, probe)
    split_breakdown(task)
    return [Example(e.id, e.data, {**e.meta, KEY: labels[e.id]}) for e in examples]


def _check_finished(run_dir: Path, labels: dict[str, str], probe: ProbeRecall) -> None:
    """Refuse a run dir whose finished examples were split by another state of the probe run (it changed since)."""
    if not (run_dir / "samples.jsonl").is_file():
        return
    try:
        done = read_run(run_dir, require_result=False).samples()
    except SchemaError:
        return  # the run store reports a damaged file itself
    stale = [r for r in done if r.id in labels and r.meta.get(KEY) != labels[r.id]]
    if stale:
        r = stale[0]
        raise ConfigError(f"{run_dir / 'samples.jsonl'}: {len(stale)} finished example(s) were split by another state "
                          f"of the probe run {probe.dir} (e.g. {r.id}: recalled={r.meta.get(KEY)} there, "
                          f"{labels[r.id]} now): delete {run_dir} and run again (the answers come from the cache)")


# ---- metrics.json extra.contamination -------------------------------------------------------------------------
def gap_test(recalled: Iterable[float], clean: Iterable[float], *, n_resamples: int, alpha: float, seed: int,
             level: float, n_boot: int) -> dict[str, Any]:
    """Recalled minus clean mean with a percentile bootstrap CI (each group resampled on its own; n_boot 0: none) and
    the two-sided permutation test of the difference in means (exact when the label arrangements number at most
    n_resamples).

    A permutation test because the per-unit values are bounded and lumpy (Kendall tau of 2-4 users, 0/1 hits), the
    groups small and unequal: Welch's t leans on normality there, while permuting the labels is valid whatever the
    distribution (exchangeable under no gap), so at most alpha of null runs are flagged."""
    from scipy import stats

    x, y = np.asarray(list(recalled), float), np.asarray(list(clean), float)
    out: dict[str, Any] = {"diff": float(x.mean() - y.mean()) if len(x) and len(y) else None, "ci_low": None,
                           "ci_high": None, "ci_level": level, "n_recalled": len(x), "n_clean": len(y),
                           "test": TEST_NAME, "p_value": None, "exact": None, "n_resamples": n_resamples,
                           "alpha": alpha, "significant": False}
    if len(x) < 2 or len(y) < 2:
        out["note"] = "fewer than 2 units in a group: no interval, no test"
        return out

    def diff(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean(a, axis=axis) - np.mean(b, axis=axis)

    rng = np.random.default_rng(seed)
    res = stats.permutation_test((x, y), diff, permutation_type="independent", alternative="two-sided",
                                 n_resamples=n_resamples, vectorized=True, random_state=rng)
    out.update(p_value=float(res.pvalue), exact=bool(math.comb(len(x) + len(y), len(x)) <= n_resamples),
               significant=bool(res.pvalue < alpha))
    if n_boot:
        ci = stats.bootstrap((x, y), diff, n_resamples=n_boot, confidence_level=level, method="percentile",
                             vectorized=True, random_state=rng).confidence_interval
        out.update(ci_low=float(ci.low), ci_high=float(ci.high))
    return out


def units(records: list[SampleRecord], metric: str, cluster_by: Optional[str]) -> dict[str, list[float]]:
    """Per split value, the metric's per-unit values: each example's, or with cluster_by each cluster's mean over its
    examples of that value (NaN values left out)."""
    out: dict[str, list[float]] = {v: [] for v in ORDER}
    groups: dict[tuple[str, str], list[float]] = {}
    for r in records:
        v = r.value(metric)
        if str(r.meta.get(KEY)) not in out or math.isnan(v):
            continue
        unit = str(r.meta.get(cluster_by, r.id)) if cluster_by else r.id
        groups.setdefault((str(r.meta[KEY]), unit), []).append(v)
    for (value, _), vals in groups.items():
        out[value].append(float(np.mean(vals)))
    return out


def contamination_block(cfg: Any, task: Any, records: list[SampleRecord]) -> dict[str, ContaminationBlock]:
    """metrics.json extra.contamination, typed ({} when the split is off): the probe, the examples per split value, the
    headline on recalled examples and on the clean subset (mean and bootstrap CI, as the breakdown has them), and the
    gap with its test, on per-example (or per-cluster) values."""
    if not enabled(cfg):
        return {}
    from recbench.api.metrics import run_info
    from recbench.stats.bootstrap import summarize

    c = cfg.contamination
    probe = read_probe(str(c.probe_run), str(cfg.model.name))
    records = sorted(records, key=lambda r: r.id)  # as the aggregation sorts them: the same numbers as the breakdown
    head = task.headline_metric
    n_boot, level, seed = int(cfg.run.bootstrap_resamples), float(cfg.run.ci_level), int(cfg.seed)
    by = {v: [r for r in records if r.meta.get(KEY) == v] for v in ORDER}
    score = {v: summarize([r.value(head) for r in by[v]], n_boot, level, seed) for v in ("yes", "no")}
    per_unit = units(records, head, task.cluster_by)
    k0, n0 = probe.control
    real = probe.verdict.get("real") or {}
    return {BLOCK: ContaminationBlock(
        probe_run=str(probe.dir), probe_task=probe.task, probe_method=probe.method, probe_model=probe.model,
        probe={"items_asked": len(probe.recalled), "items_recalled": sum(probe.recalled.values()),
               "coverage": real.get("rate"), "control_recalled": k0, "control_asked": n0,
               "flagged": (probe.verdict.get("difference") or {}).get("flagged")},
        metric=head, direction=run_info(task, [head])[head].direction,
        unit=task.cluster_by or "example", examples={v: len(by[v]) for v in ORDER},
        recalled=Score.from_dict(score["yes"]), clean=Score.from_dict(score["no"]),
        gap=Gap.from_dict(gap_test(per_unit["yes"], per_unit["no"], n_resamples=int(c.n_resamples),
                                   alpha=float(c.alpha), seed=seed, level=level, n_boot=n_boot)))}


class ContaminationSplit(Audit):
    """contamination.probe_run=DIR as an audit: the `recalled` labels and breakdown, the gap block, its line."""

    key = BLOCK
    rank = 40
    blocks = {BLOCK: ContaminationBlock}
    tables = (CONTAMINATION_TABLE,)

    def enabled(self, cfg: Any) -> bool:
        """contamination.probe_run is set."""
        return enabled(cfg)

    def label(self, cfg: Any, task: Any, examples: list[Example], run_dir: str | Path, model: Any) -> list[Example]:
        """Meta `recalled` from the probe run, after its checks."""
        return split_examples(cfg, task, examples, run_dir, model)

    def prepare_task(self, cfg: Any, task: Any) -> None:
        """The `recalled` slices."""
        split_breakdown(task)

    def aggregate(self, cfg: Any, task: Any, records: list[Any]) -> dict[str, Any]:
        """extra.contamination."""
        return contamination_block(cfg, task, records)

    def terminal_line(self, blocks: dict[str, Any]) -> Optional[str]:
        """The gap test."""
        return summary_line(blocks)


AUDIT = register(ContaminationSplit())
