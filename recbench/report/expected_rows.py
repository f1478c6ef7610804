"""'random (expected)' reference rows: the exact expectation of a uniformly random ranking, read from each run's
metrics.json extra.random_expectation, added to the per-task tables beside the sampled metrics (no CI)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

from recbench.api.facts import RANDOM_EXPECTATION
from recbench.report.collect import ReportedRun
from recbench.report.tables import Cell, Table

LABEL = "random (expected)"
NOTE = "exact (extra.random_expectation), no CI"


def _expectations(runs: list[ReportedRun]) -> dict[str, dict[str, float]]:
    """Resolved run dir -> its extra.random_expectation (numbers only, RunFacts); runs without one are absent."""
    return {str(Path(r.dir).resolve()): r.result.facts.random_expectation for r in runs
            if isinstance(r.result.extra.get(RANDOM_EXPECTATION), dict)}


def _column_value(cells: list[Cell], exp: dict[str, dict[str, float]]) -> Optional[tuple[float, list[str]]]:
    """(expected value, run dirs) for one column when every measured cell of it is an overall value
    (metrics.<m>.mean) of runs that all state the same expectation of <m>; else None (slices, derived or extra
    cells: the overall expectation is not theirs)."""
    measured = [c for c in cells if not c.missing and c.has_value]
    if not measured or any(c.derived or not c.sources for c in measured):
        return None
    metric = measured[0].metric
    dirs: list[str] = []
    for c in measured:
        if c.metric != metric:
            return None
        for s in c.sources:
            path = str(s.get("path", ""))
            if path != f"metrics.{metric}.mean" and path != f"pooled samples.jsonl:{metric}":
                return None
            dirs += str(s["run_dir"]).split(" ") if path.startswith("pooled") else [str(s["run_dir"])]
    vals = set()
    for d in dirs:
        e = exp.get(str(Path(d).resolve()), {})
        if metric not in e:
            return None
        vals.add(e[metric])
    if len(vals) != 1:
        return None
    v = vals.pop()
    return (v, list(dict.fromkeys(dirs))) if not math.isnan(v) else None


def add_expected_rows(tables: list[Table], runs: list[ReportedRun]) -> int:
    """Append a 'random (expected)' row to every benchmark table (not the summary) with at least one column it
    applies to; returns how many rows were added. Cells cite extra.random_expectation.<metric> of their runs."""
    exp = _expectations(runs)
    if not exp:
        return 0
    added = 0
    for t in tables:
        if t.section == "summary" or not t.rows:
            continue
        row: list[Cell] = []
        for j in range(len(t.columns)):
            col = [cells[j] for _, cells in t.rows]
            got = _column_value(col, exp)
            metric = next((c.metric for c in col if not c.missing), "")
            if got is None:
                row.append(Cell(metric=metric))
                continue
            v, dirs = got
            row.append(Cell(metric=metric, mean=v, note=NOTE,
                            sources=[{"run_dir": d, "path": f"extra.random_expectation.{metric}"} for d in dirs]))
        if all(c.missing for c in row):
            continue
        t.rows.append(([LABEL] + ["exact, no CI"] * (len(t.row_header) - 1), row))
        sep = "" if t.caption.rstrip().endswith(".") else "."
        t.caption += sep + (f" Row '{LABEL}': the exact expectation of a uniformly random ranking for the runs' "
                            "candidate counts (extra.random_expectation), no CI; a dash where it does not apply "
                            "(slices, averages).")
        added += 1
    return added

