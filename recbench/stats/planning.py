"""The sd of paired unit differences that power planning (`mode=plan`) reads from existing runs."""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recbench.stats.clusters import cluster_means
from recbench.stats.systems import System
from recbench.stats.verdicts import compare_pair, load_systems


@dataclass(frozen=True)
class PairedSd:
    """The sd of paired per-unit differences of a metric, for power planning, and where it came from."""

    sd: float
    n_units: int
    source: str


def _where(s: System) -> str:
    """The run dir a system was read from, relative to the working directory when it lies below it."""
    d = Path(s.runs[0].dir).resolve() if s.runs and s.runs[0] is not None else None
    if d is None:
        return s.label
    return str(d.relative_to(Path.cwd())) if Path.cwd() in d.parents else str(d)


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
            best = PairedSd(sd, c.n, f"paired runs {_where(a)} vs {_where(b)}")
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
                    f"one run ({_where(s)}): sqrt(2) x its sd, as if the two systems were independent")
