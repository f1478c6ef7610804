"""Explanation judging in reports, declared: the correlations over the run, abs_error by aspect, and the paper's
table layout per aspect (every correlation at dataset, user and pair level, read from metrics.json extra
`by_aspect`), with the groups each level skipped."""
from __future__ import annotations

from typing import Any, Optional

from recbench.report.audit_tables import AuditCell, row_labels, sort_runs
from recbench.report.numbers import number
from recbench.report.presentation import Breakdown, Presentation, TableSpec
from recbench.report.tables import Table, _header
from recbench.tasks.explanation_judging.correlations import COEFFICIENTS, LEVELS, metric_names
from recbench.tasks.explanation_judging.settings import ASPECTS

ASPECT = Breakdown("aspect", order=ASPECTS, subset_key="task.aspects")

OVERALL = TableSpec(
    id="explanation_judging-{task}", title="Explanation judging: {task}, judges against the users' own ratings",
    per_task=True, columns=("metric",), metrics=(*metric_names(), "abs_error"),
    caption=("Correlation of the judge's 1-5 scores with the users' own ratings (Zhang et al. 2024): dataset = over "
             "all explanations, user = mean of per-user correlations, pair = mean of per-(user, movie) correlations "
             "(groups where either side is constant skipped); each averaged over the run's aspects (per aspect: the "
             "table below). A constant judge has no correlation (empty cells). abs_error: mean |score - rating|."))

ERRORS = TableSpec(
    id="explanation_judging-{task}-aspects", title="Explanation judging: {task}, abs_error by aspect",
    per_task=True, columns=("value",), metrics=("abs_error",), breakdown=ASPECT,
    caption="mean |judge score - user rating| per aspect, 95% bootstrap CI in the CSV.")

BY_ASPECT_COLUMNS = [*((lv, c) for lv in LEVELS for c in COEFFICIENTS),
                     ("skipped", "users"), ("skipped", "pairs")]


def _row(aspect: str, v: dict[str, Any]) -> list[AuditCell]:
    cells = [AuditCell(metric=f"{c}_{lv}", mean=number(v.get(f"{c}_{lv}")), n=v.get("n"))
             for lv in LEVELS for c in COEFFICIENTS]
    return cells + [AuditCell(metric="users_skipped", mean=number(v.get("users_skipped")), style="int"),
                    AuditCell(metric="pairs_skipped", mean=number(v.get("pairs_skipped")), style="int")]


def by_aspect_table(runs: list[Any]) -> Optional[Table]:
    """One row per (run, aspect): the nine correlations of that aspect (the paper's table rows) and the user and
    pair groups skipped because a side was constant."""
    judged = sort_runs([r for r in runs if isinstance(r.result.extra.get("by_aspect"), dict)])
    if not judged:
        return None
    labels = row_labels(judged)
    rows = [([*labels[id(r)], aspect], _row(aspect, v))
            for r in judged for aspect, v in r.result.extra["by_aspect"].items()]
    caption = ("Per aspect, as Zhang et al. 2024 report them: Pearson / Spearman / Kendall of judge scores against "
               "the users' ratings over all explanations (dataset), per user (user) and per (user, movie) (pair), "
               "the last two averaged over the groups where both sides vary; 'skipped' counts the groups left out. "
               "Empty: undefined (a judge that gives one score to every explanation).")
    return Table(id="explanation_judging-by-aspect", title="Explanation judging: correlations per aspect",
                 caption=caption, row_header=["task", "model", "method", "aspect"],
                 header=_header(BY_ASPECT_COLUMNS), columns=BY_ASPECT_COLUMNS, rows=rows,
                 section="explanation_judging")


PRESENTATION = Presentation(benchmark="explanation_judging", title="Explanation judging (LLM judges vs users)",
                            order=6, tables=(OVERALL, ERRORS), run_tables=(by_aspect_table,))
