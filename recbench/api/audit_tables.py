"""What an audit declares for reports, and the few number helpers its terminal line needs: below both the audits
(recbench/audits/*_blocks.py declare their tables with these) and the report (recbench/report/audit_tables.py draws
them), so an audit imports nothing of the report.

`AuditTable` / `AuditColumn`: an audit's report table as data over its typed block, or a table of its own rows
built by a function the report owns, named as 'module:function' (`build`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional


@dataclass(frozen=True)
class AuditColumn:
    """One column of an audit's report table: its header (group, label), the value of a run's typed block, and how
    the value shows: 'int' (a count), 'p' (a p-value), 'ci' (a block with mean/share/diff and its CI), 'text', or
    the number of decimals."""

    group: str
    label: str
    value: Callable[[Any], Any]
    style: str = "3"
    metric: str = ""  # the cell's metric name ('' = the block's metric)


@dataclass(frozen=True)
class AuditTable:
    """An audit's report table, declared beside the audit: one row per run whose metrics.json extra holds the block
    `key` (read as its typed record), its columns from the blocks (a tuple, or a function of the blocks when they
    depend on them, e.g. one per display order); or `build`, a function of the runs, for a table of its own rows."""

    id: str
    title: str
    caption: str | Callable[[list[Any]], str]
    key: str = ""
    columns: tuple[AuditColumn, ...] | Callable[[list[Any]], list[AuditColumn]] = ()
    section: str = "validity-audit"
    metric_column: bool = True  # the row header ends with the block's metric
    #: a table of its own rows: a function of the runs, or its 'module:function' name (the report's own builders,
    #: e.g. 'recbench.report.judge_ranking:ranking_table', named so that the audit imports nothing of the report)
    build: Optional[Callable[[list[Any]], Any] | str] = None
