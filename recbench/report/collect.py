"""Collect run dirs (read through recbench.store.schema) into one tidy pandas table of cells."""
from __future__ import annotations

import json
import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Optional

from recbench.api.task import Task
from recbench.report.config_keys import ConfigKeys
from recbench.report.presentation import GENERIC, Presentation, presentation_of
from recbench.stats.bootstrap import summarize
from recbench.store.schema import RunDir
from recbench.store.schema import RunResult, SampleRecord, SchemaError, find_run_dirs, read_run

if TYPE_CHECKING:  # pandas is imported by the functions that build frames: the audits import this module on every run
    import pandas as pd

log = logging.getLogger(__name__)

OVERALL = ("all", "all")  # (slice key, slice value) of a run's overall metrics


@dataclass
class RunIdentity:
    """Who ran what, as every report row names a run (ReportedRun here, ResultsRow in results.json): the task, the
    model, the method as selected (method.name) and the seed."""

    task: str
    model: str
    method: str
    seed: Any

    def identity(self) -> "RunIdentity":
        """The identity alone (of a ReportedRun or a ResultsRow)."""
        return RunIdentity(self.task, self.model, self.method, self.seed)


@dataclass
class ReportedRun(RunIdentity):
    """One run dir as a report sees it: its identity within a report (RunIdentity), the typed result, the flattened
    config, and the presentation its benchmark declares."""

    dir: Path
    result: RunResult
    config: dict[str, Any]
    benchmark: str
    variant: dict[str, Any]
    subset: dict[str, Any]
    source: RunDir = field(repr=False)
    task_class: type = field(default=Task, repr=False)
    presentation: Presentation = field(default=GENERIC, repr=False)

    def samples(self) -> list[SampleRecord]:
        """The run's per-example records, read once through the schema."""
        return self.source.samples()


def task_class_of(target: Optional[str]) -> type:
    """The Task class a run's config names (task._target_), or the base Task when it cannot be imported."""
    if not target:
        return Task
    try:
        from hydra.utils import get_class

        cls = get_class(str(target))
    except Exception as e:  # noqa: BLE001 - a report of foreign runs still works with generic tables
        log.warning("report: task class %s not importable (%s); generic tables only", target, e)
        return Task
    return cls if isinstance(cls, type) and issubclass(cls, Task) else Task


def flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dict -> {'a.b.c': leaf}; lists stay leaves (as JSON text, so they are hashable)."""
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(flatten(v, f"{prefix}{k}."))
        if not d and prefix:
            out[prefix[:-1]] = "{}"
    else:
        out[prefix[:-1]] = json.dumps(d) if isinstance(d, (list, tuple)) else d
    return out


def load_run(run_dir: Path, keys: ConfigKeys) -> ReportedRun:
    """Read one run dir (through recbench.store.schema) into a ReportedRun; the subset keys are the configured ones and
    those the run's benchmark declares."""
    src = read_run(run_dir)
    res = src.result
    assert res is not None
    flat = flatten(src.config or {})
    task = res.task_name or str(flat.get("task.name"))
    model = res.model
    if model == "none":  # model-free reference rows: decoding settings do not apply
        flat = {k: v for k, v in flat.items() if not k.startswith("sampling.")}
    cls = task_class_of(flat.get("task._target_"))
    shown = presentation_of(cls)
    subset = {k: flat[k] for k in dict.fromkeys([*keys.subset_keys, *shown.subset_keys]) if k in flat}
    variant = {k: v for k, v in flat.items() if not keys.ignored(k) and k not in subset}
    return ReportedRun(dir=run_dir, result=res, config=flat, benchmark=shown.benchmark, task=task,
               # the method as selected (method.name); a task may share one Method class between names
               model=model, method=str(flat.get("method.name") or res.method), seed=flat.get("seed", 0),
               variant=variant, subset=subset, source=src, task_class=cls, presentation=shown)


def load_runs(paths: Iterable[str | Path], keys: Optional[ConfigKeys] = None) -> list[ReportedRun]:
    """Every run under the given dirs; unreadable ones are skipped with a warning."""
    keys = keys or ConfigKeys.load()
    runs = []
    for d in find_run_dirs(paths):
        try:
            runs.append(load_run(d, keys))
        except (OSError, SchemaError) as e:
            log.warning("skipping %s: %s", d, e)
    return runs


def variant_labels(runs: list[ReportedRun]) -> dict[int, str]:
    """A short label per run: the config values that differ among runs of the same task, model and method."""
    groups: dict[tuple, list[ReportedRun]] = {}
    for r in runs:
        groups.setdefault((r.task, r.model, r.method), []).append(r)
    labels: dict[int, str] = {}
    for rs in groups.values():
        keys = sorted({k for r in rs for k in r.variant})
        varying = [k for k in keys if len({json.dumps(r.variant.get(k), default=str) for r in rs}) > 1]
        for r in rs:
            labels[id(r)] = ", ".join(f"{k}={r.variant.get(k)}" for k in varying)
    return labels


# ---- the tidy table ----------------------------------------------------------------------------
CELL_COLUMNS = ["benchmark", "task", "model", "method", "variant", "seed", "slice", "value", "metric", "mean",
                "ci_low", "ci_high", "n", "examples", "parse_failed", "pooled", "source", "run_dir"]


def _slice_counts(run: ReportedRun, key: str, value: str) -> tuple[int, int]:
    """(examples, parse failures) of one breakdown slice, from samples.jsonl."""
    recs = [r for r in run.samples() if str(r.meta.get(key)) == value]
    return len(recs), sum(1 for r in recs if r.parse_status == "failed")


def run_cells(run: ReportedRun, label: str) -> list[dict[str, Any]]:
    """Tidy rows of one run: overall metrics (+ scalar extras), and every breakdown slice's metrics."""
    m = run.result
    c = m.counts
    base = {"benchmark": run.benchmark, "task": run.task, "model": run.model, "method": run.method,
            "variant": label, "seed": run.seed, "pooled": False, "run_dir": str(run.dir)}
    rows = []
    for name, s in m.metrics.items():
        rows.append({**base, "slice": OVERALL[0], "value": OVERALL[1], "metric": name, "mean": s.mean,
                     "ci_low": s.ci_low, "ci_high": s.ci_high, "n": s.n, "examples": c.examples,
                     "parse_failed": c.parse_failed, "source": f"metrics.{name}.mean"})
    for name, v in m.extra.items():
        if name in m.metrics or isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        rows.append({**base, "slice": OVERALL[0], "value": OVERALL[1], "metric": name, "mean": float(v),
                     "ci_low": math.nan, "ci_high": math.nan, "n": c.examples, "examples": c.examples,
                     "parse_failed": c.parse_failed, "source": f"extra.{name}"})
    for key, vals in m.breakdown.items():
        for val, b in vals.items():
            ex, pf = _slice_counts(run, key, val)
            for name, s in b.metrics.items():
                rows.append({**base, "slice": key, "value": val, "metric": name, "mean": s.mean,
                             "ci_low": s.ci_low, "ci_high": s.ci_high, "n": s.n, "examples": b.n or ex,
                             "parse_failed": pf, "source": f"breakdown.{key}.{val}.metrics.{name}.mean"})
    return rows


def _pooled_overall(parts: list[ReportedRun], label: str) -> list[dict[str, Any]]:
    """Overall metrics of a configuration split over subset runs, recomputed from their pooled samples."""
    recs = [r for p in parts for r in p.samples()]
    cfg = parts[0].config
    n_boot, level = int(cfg.get("run.bootstrap_resamples", 1000)), float(cfg.get("run.ci_level", 0.95))
    seed = int(parts[0].seed or 0)
    names = list(dict.fromkeys(k for r in recs for k in r.metrics))
    p0 = parts[0]
    base = {"benchmark": p0.benchmark, "task": p0.task, "model": p0.model, "method": p0.method, "variant": label,
            "seed": p0.seed, "pooled": True, "run_dir": " ".join(str(p.dir) for p in parts)}
    status = Counter(r.parse_status for r in recs)
    rows = []
    for name in names:
        s = summarize([r.value(name) for r in sorted(recs, key=lambda r: r.id)], n_boot, level, seed)
        rows.append({**base, "slice": OVERALL[0], "value": OVERALL[1], "metric": name, "mean": s["mean"],
                     "ci_low": s["ci_low"], "ci_high": s["ci_high"], "n": s["n"], "examples": len(recs),
                     "parse_failed": status.get("failed", 0), "source": f"pooled samples.jsonl:{name}"})
    return rows


def cells_table(runs: list[ReportedRun]) -> pd.DataFrame:
    """One row per (run configuration, seed, slice, metric); subset runs of one configuration are combined."""
    import pandas as pd

    labels = variant_labels(runs)
    parts: dict[tuple, list[ReportedRun]] = {}
    for r in runs:
        key = (r.task, r.model, r.method, labels[id(r)], json.dumps(r.seed, default=str))
        parts.setdefault(key, []).append(r)
    rows: list[dict[str, Any]] = []
    for key, rs in parts.items():
        if len(rs) == 1:
            rows += run_cells(rs[0], labels[id(rs[0])])
            continue
        # several subset runs (e.g. task.difficulties=[easy] and [medium]): their breakdown slices side by side
        seen: set[tuple] = set()
        for r in sorted(rs, key=lambda r: str(r.dir)):
            for row in run_cells(r, labels[id(r)]):
                if (row["slice"], row["value"]) == OVERALL:
                    continue
                k = (row["slice"], row["value"], row["metric"])
                if k in seen:
                    log.warning("slice %s=%s of %s given by several runs; keeping the first", *k[:2], key[:3])
                    continue
                seen.add(k)
                rows.append(row)
        rows += _pooled_overall(rs, labels[id(rs[0])])
    df = pd.DataFrame(rows, columns=CELL_COLUMNS)
    return df


def aggregate_seeds(cells: pd.DataFrame) -> pd.DataFrame:
    """Runs that differ only in seed become one row: mean and sd over seeds, per-seed CI bounds averaged."""
    import pandas as pd

    keys = ["benchmark", "task", "model", "method", "variant", "slice", "value", "metric"]
    if cells.empty:
        return pd.DataFrame(columns=keys + ["mean", "sd", "n_seeds", "ci_low", "ci_high", "n", "examples",
                                            "parse_failed", "pooled", "sources", "seeds"])

    def combine(g: pd.DataFrame) -> pd.Series:
        means = g["mean"].astype(float)
        return pd.Series({
            "mean": means.mean() if means.notna().any() else math.nan,
            "sd": means.std(ddof=1) if means.notna().sum() >= 2 else math.nan,
            "n_seeds": int(g["seed"].nunique()),
            "ci_low": g["ci_low"].astype(float).mean(),
            "ci_high": g["ci_high"].astype(float).mean(),
            "n": int(g["n"].max()) if g["n"].notna().any() else None,  # per seed
            "examples": int(g["examples"].fillna(0).sum()) if g["examples"].notna().any() else None,
            "parse_failed": int(g["parse_failed"].fillna(0).sum()) if g["parse_failed"].notna().any() else None,
            "pooled": bool(g["pooled"].any()),
            "sources": json.dumps([{"run_dir": d, "path": s} for d, s in zip(g["run_dir"], g["source"])]),
            "seeds": json.dumps(sorted(map(str, g["seed"].unique()))),
        })

    out = cells.groupby(keys, dropna=False, sort=False).apply(combine, include_groups=False).reset_index()
    return out
