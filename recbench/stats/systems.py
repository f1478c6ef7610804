"""Runs as the systems a comparison pairs: per-example values by metric (seeds pooled on request), ids, slices."""
from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from recbench.api.errors import suggest
from recbench.api.facts import MetricInfo
from recbench.api.metrics import MetricSpec, metric_spec
from recbench.stats.records import CompareError, Comparison
from recbench.store.schema import RunDir, SchemaError, find_run_dirs, read_run

log = logging.getLogger(__name__)
SEED_KEYS = (("seed",), ("sampling", "seed"))


@dataclass
class System:
    """One row of a comparison: a run, or several seeds of one configuration pooled per example."""

    label: str
    runs: list[RunDir]
    task: str
    cluster_by: str | None
    ids: list[str]  # examples finished in every pooled run, in the first run's order
    meta: dict[str, dict[str, Any]]
    values: dict[str, np.ndarray]  # metric -> (K seeds x len(ids)) values, NaN = undefined
    metric_info: dict[str, MetricInfo]
    breakdown_keys: list[str]
    result_metrics: set[str]  # metric names in metrics.json (corpus metrics included)
    #: breakdown key -> its values in the task's display order (metrics.json writes them in Task.breakdown_order)
    breakdown_order: dict[str, list[str]] = field(default_factory=dict)

    @property
    def k(self) -> int:
        """Seeds pooled."""
        return len(self.runs)



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


def _in_argument_order(paths: list, dirs: list[Path], runs: list[RunDir]) -> tuple[list[Path], list[RunDir]]:
    """Run dirs in the order of the arguments that named them (a = the first argument), sorted within a sweep dir."""
    roots = [Path(p).resolve() for p in paths]

    def position(d: Path) -> int:
        return next((k for k, r in enumerate(roots) if d == r or r in d.parents), len(roots))

    order = sorted(range(len(dirs)), key=lambda k: position(dirs[k]))  # stable: sorted within one argument
    return [dirs[k] for k in order], [runs[k] for k in order]


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
    dirs, runs = _in_argument_order(paths, dirs, runs)
    labels = dict(zip(dirs, _labels(dirs)))
    groups: dict[str, list[RunDir]] = {}
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


def _system(label: str, runs: list[RunDir]) -> System:
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
                  result_metrics={m for r in res for m in r.metrics},
                  breakdown_order={k: list(dict.fromkeys(str(v) for r in res for v in r.breakdown.get(k, {})))
                                   for r in res for k in r.breakdown})


def _spec(name: str, a: System, b: System) -> MetricSpec:
    return metric_spec(name, a.metric_info.get(name) or b.metric_info.get(name))


def _slices(a: System, b: System, ids: list[str]) -> list[tuple[str, list[str]]]:
    """'all', then each breakdown key's slices in the task's order (as metrics.json lists them; values it does not
    list after them, sorted)."""
    out = [("all", ids)]
    for key in dict.fromkeys(a.breakdown_keys + b.breakdown_keys):
        by_value: dict[str, list[str]] = {}
        for i in ids:
            if key in a.meta[i]:
                by_value.setdefault(str(a.meta[i][key]), []).append(i)
        declared = [v for v in a.breakdown_order.get(key, []) + b.breakdown_order.get(key, []) if v in by_value]
        order = list(dict.fromkeys(declared)) + sorted(set(by_value) - set(declared))
        out.extend((f"{key}={v}", by_value[v]) for v in order)
    return out



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


def noise_floor_of(s: System, metric: str, slice_: str = "all") -> float | None:
    """The largest noise floor of a system's runs for one metric and slice (metrics.json extra.noise_floor, written
    by the noise-floor audit, recbench.audits.noise), or None when no run has one."""
    floors = []
    for run in s.runs:
        result = getattr(run, "result", None)  # a System built in code may carry no run
        block = result.audits.get("noise_floor") if result is not None else None  # recbench.audits.noise's NoiseBlock
        if block is not None:
            shift = (block.metrics if slice_ == "all" else block.by_slice.get(slice_) or {}).get(metric)
            v = shift.floor if shift is not None else None
            if isinstance(v, (int, float)) and math.isfinite(v):
                floors.append(float(v))
    return max(floors) if floors else None


def mark_noise_floor(c: Comparison, a: System, b: System) -> None:
    """Set the record's noise floor (the larger of the two runs') and whether |diff| is below it (in place)."""
    floors = [f for f in (noise_floor_of(a, c.metric, c.slice), noise_floor_of(b, c.metric, c.slice)) if f is not None]
    if floors:
        c.noise_floor = max(floors)
        c.below_noise_floor = bool(math.isfinite(c.diff) and abs(c.diff) < c.noise_floor)
