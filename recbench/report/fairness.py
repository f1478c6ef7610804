"""The fairness table of a report: for every run whose task groups its users (metrics.json extra.fairness, written by
recbench/stats/group_gaps.py), each metric's group means, the largest gap between two groups with its Welch CI,
Holm-adjusted p and verdict, and the group the model serves worst."""
from __future__ import annotations

from typing import Any, Sequence

from recbench.report.numbers import fmt
from recbench.report.tables import Cell, Table

COLUMNS = ("groups (mean, n)", "largest gap (best - worst)", "95% CI", "p (Holm)", "verdict", "worst-served")


def _text(metric: str, shown: str) -> Cell:
    return Cell(metric, shown=shown)


def fairness_rows(label: str, block: dict[str, Any]) -> list[tuple[list[str], list[Cell]]]:
    """One row per (attribute, metric) of a run's fairness block."""
    rows = []
    for attribute, by_metric in block.items():
        for metric, r in by_metric.items():
            groups = " · ".join(f"{g} {fmt(v['mean'])} ({v['n']})" for g, v in r.get("groups", {}).items())
            if "diff" not in r:
                cells = [_text(metric, groups)] + [_text(metric, "—")] * 4 + [_text(metric, r.get("note", "—"))]
            else:
                cells = [_text(metric, groups), _text(metric, f"{r['run_a']} - {r['run_b']} = {fmt(r['diff'])}"),
                         _text(metric, f"[{fmt(r['ci_low'])}, {fmt(r['ci_high'])}]"),
                         _text(metric, fmt(r.get("p_adjusted"))), _text(metric, r.get("verdict", "")),
                         _text(metric, "none (equal means)" if r["worst"] is None else str(r["worst"]))]
            rows.append(([label, attribute, metric], cells))
    return rows


def fairness_tables(runs: Sequence[Any], label_of: Any) -> list[Table]:
    """One table per task with fairness blocks, in the runs' order; `label_of(run)` names a run's row."""
    by_task: dict[str, list[tuple[list[str], list[Cell]]]] = {}
    section: dict[str, str] = {}
    for run in runs:
        block = run.result.extra.get("fairness")
        if isinstance(block, dict) and block:
            by_task.setdefault(run.task, []).extend(fairness_rows(label_of(run), block))
            section[run.task] = run.presentation.benchmark
    return [Table(id=f"fairness-{task}", title=f"{task}: user groups (fairness)",
                  caption="Per user group: each metric's group means (units: users), the largest gap between two "
                          "groups, best-served minus worst-served, with Welch's 95% CI (unadjusted) and its p-value "
                          "Holm-adjusted over every pair of groups of the attribute; the verdict says whether the "
                          "gap is significant; worst-served = the group with the worst mean (recbench/stats/"
                          "group_gaps.py).",
                  row_header=["run", "attribute", "metric"], header=[[(c, 1) for c in COLUMNS]],
                  columns=[(c,) for c in COLUMNS], rows=rows, section=section[task])
            for task, rows in by_task.items()]
