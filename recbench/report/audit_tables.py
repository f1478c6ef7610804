"""Audits in reports: every registered audit's declared tables (recbench.api.audits; each declared beside its audit
as a recbench.report.presentation.AuditTable) built by one builder: one row per run whose metrics.json extra holds
the table's block, read as the audit's typed record. Benchmark-agnostic, and no audit named here."""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Optional

from recbench.api.audits import declared_tables
from recbench.report.collect import ReportedRun, variant_labels
from recbench.api.audit_tables import AuditColumn, AuditTable
from recbench.report.numbers import fmt, number
from recbench.report.tables import Cell, Table, _header, method_label

@dataclass
class AuditCell(Cell):
    """A cell with its own number format: 'int' (counts), 'p' (p-values, 3 significant digits) or decimals."""

    style: str = "3"

    @property
    def text(self) -> str:
        """The displayed value."""
        if self.shown is not None or not self.has_value:
            return super().text
        if self.style == "int":
            return str(int(round(self.mean)))
        if self.style == "p":
            return p_text(self.mean)
        return fmt(self.mean, int(self.style))


def p_text(p: float) -> str:
    """A p-value as shown: 3 significant digits ('0.0123', '4.56e-07')."""
    return f"{p:.3g}"


def cell(metric: str, v: Any, style: str = "3") -> AuditCell:
    """A number cell in the given style."""
    return AuditCell(metric=metric, mean=number(v), style=style)


def row_labels(runs: list[ReportedRun]) -> dict[int, list[str]]:
    """Row labels per run: task, model, method [variant], plus the seed when one configuration has several."""
    labels = variant_labels(runs)
    seeds: dict[tuple, set] = {}
    for r in runs:
        seeds.setdefault((r.task, r.model, r.method, labels[id(r)]), set()).add(str(r.seed))
    out = {}
    for r in runs:
        method = method_label(r.method, labels[id(r)])
        if len(seeds[(r.task, r.model, r.method, labels[id(r)])]) > 1:
            method += f" seed={r.seed}"
        out[id(r)] = [r.task, r.model, method]
    return out


def sort_runs(runs: list[ReportedRun]) -> list[ReportedRun]:
    """Runs in row order: task, model, method, dir."""
    return sorted(runs, key=lambda r: (r.task, r.model, r.method, str(r.dir)))


def ci_cell(metric: str, block: Any, style: str = "3") -> AuditCell:
    """A value with its CI from a block with mean (or share, or diff), ci_low, ci_high and n."""
    if block is None or isinstance(block, (int, float)):
        return AuditCell(metric=metric, mean=number(block), style=style)
    v = next((getattr(block, k) for k in ("mean", "share", "diff") if getattr(block, k, None) is not None), None)
    return AuditCell(metric=metric, mean=number(v), ci_low=number(getattr(block, "ci_low", None)),
                     ci_high=number(getattr(block, "ci_high", None)), n=getattr(block, "n", None), style=style)


def _column_cell(col: AuditColumn, block: Any, metric: str) -> AuditCell:
    """The cell of one declared column for one run's block."""
    v = col.value(block)
    name = col.metric or metric
    if col.style == "ci":
        return ci_cell(name, v)
    if col.style == "text":
        return AuditCell(metric=name, shown=None if v is None else str(v))
    return cell(name, v, col.style)


def build_table(spec: AuditTable, runs: list[ReportedRun]) -> Optional[Table]:
    """A declared audit table over the runs that hold its typed block (None when none does)."""
    if isinstance(spec.build, str):  # a report builder named by the audit: 'module:function'
        module, _, name = spec.build.partition(":")
        return getattr(importlib.import_module(module), name)(runs)
    if spec.build is not None:
        return spec.build(runs)
    audited = sort_runs([r for r in runs if spec.key in r.result.audits])
    if not audited:
        return None
    labels = row_labels(audited)
    blocks = [r.result.audits[spec.key] for r in audited]
    columns = list(spec.columns(blocks) if callable(spec.columns) else spec.columns)
    cols = [(c.group, c.label) for c in columns]
    rows = []
    for r, b in zip(audited, blocks):
        metric = str(getattr(b, "metric", "") or r.result.headline_metric)
        rows.append((labels[id(r)] + ([metric] if spec.metric_column else []),
                     [_column_cell(c, b, metric) for c in columns]))
    caption = spec.caption(blocks) if callable(spec.caption) else spec.caption
    return Table(id=spec.id, title=spec.title, caption=caption,
                 row_header=["task", "model", "method"] + (["metric"] if spec.metric_column else []),
                 header=_header(cols), columns=cols, rows=rows, section=spec.section)


def audit_tables(runs: list[ReportedRun]) -> list[Table]:
    """The audit tables of a report (empty when no run was audited), in the audits' registration and declaration
    order."""
    return [t for t in (build_table(spec, runs) for spec in declared_tables()) if t is not None]
