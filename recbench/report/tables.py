"""Report tables from the seed-aggregated cell table: the generic pieces (cells, tables, best marks, per-task
tables) and the cross-benchmark summary; benchmarks add their own tables through Task.report_tables."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Optional

import pandas as pd

from recbench.report.collect import OVERALL
from recbench.report.layouts import Layouts
from recbench.task import Task

MISSING = "—"


def fmt(v: Optional[float], digits: int = 3) -> str:
    """A number with fixed decimals; missing (None/NaN) as an em dash, never as zero."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return MISSING
    s = f"{v:.{digits}f}"
    return s[1:] if s.startswith("-") and float(s) == 0 else s  # no "-0.000"


@dataclass
class Cell:
    """One table cell: a seed-aggregated value with its CI, sd, counts and the metrics.json entries behind it."""

    metric: str
    mean: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    sd: Optional[float] = None
    n: Optional[int] = None
    n_seeds: int = 1
    examples: Optional[int] = None
    parse_failed: Optional[int] = None
    pooled: bool = False
    derived: bool = False  # e.g. a row average: not a metrics.json value
    sources: list[dict[str, str]] = field(default_factory=list)
    note: str = ""  # e.g. the method behind a summary cell
    mark: Optional[str] = None  # "best" | "second"
    letters: str = ""  # significance group(s): cells of one column sharing a letter are not distinguishable
    ref_mark: str = ""  # summary: ▲/▼ significantly better/worse than the random reference row, † better than the best
    shown: Optional[str] = None  # text shown instead of the number (e.g. a CI or a verdict)

    @property
    def missing(self) -> bool:
        """True when there is no value (rendered as a dash)."""
        return self.shown is None and (self.mean is None or (isinstance(self.mean, float) and math.isnan(self.mean)))

    @property
    def text(self) -> str:
        """The displayed value."""
        return self.shown if self.shown is not None else fmt(self.mean)

    @property
    def ci_text(self) -> str:
        """'[lo, hi]' or '' when there is no CI."""
        return "" if self.ci_low is None or math.isnan(self.ci_low) else f"[{fmt(self.ci_low)}, {fmt(self.ci_high)}]"

    @property
    def count_text(self) -> str:
        """'n=40, pf=0' (+ seeds, sd) or ''."""
        parts = []
        if self.n is not None:
            parts.append(f"n={self.n}" + (f"×{self.n_seeds} seeds" if self.n_seeds > 1 else ""))
        if self.parse_failed is not None:
            parts.append(f"pf={self.parse_failed}")
        if self.sd is not None and not math.isnan(self.sd):
            parts.append(f"sd={fmt(self.sd)}")
        return ", ".join(parts)

    @property
    def title(self) -> str:
        """Tooltip text."""
        bits = [f"{self.metric} = {self.text}"]
        if self.ci_text:
            bits.append(f"95% CI {self.ci_text}")
        if self.count_text:
            bits.append(self.count_text)
        if self.pooled:
            bits.append("pooled from several subset runs' samples")
        if self.derived:
            bits.append("average of the row's cells")
        if self.note:
            bits.append(self.note)
        return "; ".join(bits)


@dataclass
class Table:
    """A rendered-agnostic table: row-label columns, multi-level column headers, and Cells."""

    id: str
    title: str
    caption: str
    row_header: list[str]
    header: list[list[tuple[str, int]]]  # header rows over the value columns: (label, colspan)
    columns: list[tuple[str, ...]]
    rows: list[tuple[list[str], list[Cell]]]
    section: str = "summary"  # the report section (benchmark id) the table belongs to

    def flat_columns(self) -> list[str]:
        """Column labels joined across header levels (for Markdown/CSV)."""
        return [" · ".join(c for c in col if c) for col in self.columns]

    def to_frame(self) -> pd.DataFrame:
        """The displayed values as a DataFrame (NaN where missing)."""
        data = [[c.mean if not c.missing else math.nan for c in cells] for _, cells in self.rows]
        idx = pd.MultiIndex.from_tuples([tuple(lbl) for lbl, _ in self.rows], names=self.row_header) \
            if self.rows else None
        return pd.DataFrame(data, columns=self.flat_columns(), index=idx)


def _header(columns: list[tuple[str, ...]]) -> list[list[tuple[str, int]]]:
    """Colspans for each header level from the column tuples."""
    levels = len(columns[0]) if columns else 0
    out = []
    for lv in range(levels):
        row: list[tuple[str, int]] = []
        prev = None
        for col in columns:
            key = col[: lv + 1]
            if row and key == prev:
                row[-1] = (row[-1][0], row[-1][1] + 1)
            else:
                row.append((col[lv], 1))
            prev = key
        out.append(row)
    return out


def cell_from(row: Optional[pd.Series], metric: str) -> Cell:
    """A Cell from one aggregated row (or a missing Cell)."""
    if row is None:
        return Cell(metric=metric)

    def f(v: Any) -> Optional[float]:
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)

    def i(v: Any) -> Optional[int]:
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)

    return Cell(metric=metric, mean=f(row["mean"]), ci_low=f(row["ci_low"]), ci_high=f(row["ci_high"]),
                sd=f(row["sd"]), n=i(row["n"]), n_seeds=int(row["n_seeds"]), examples=i(row["examples"]),
                parse_failed=i(row["parse_failed"]), pooled=bool(row["pooled"]), sources=json.loads(row["sources"]))


def mark_best(table: Table, layouts: Layouts) -> None:
    """Mark the best and second-best value of every column (ties share the mark)."""
    for j, col in enumerate(table.columns):
        cells = [cells[j] for _, cells in table.rows if not cells[j].missing]
        if len(cells) < 2:
            continue
        hib = layouts.higher_is_better(cells[0].metric)
        vals = sorted({round(c.mean, 12) for c in cells}, reverse=hib)
        for c in cells:
            v = round(c.mean, 12)
            c.mark = "best" if v == vals[0] else ("second" if len(vals) > 1 and v == vals[1] else None)


class Index:
    """Fast lookup of aggregated rows by (task, model, method, variant, slice, value, metric)."""

    def __init__(self, agg: pd.DataFrame):
        self.rows = {(r.task, r.model, r.method, r.variant, r.slice, r.value, r.metric): r
                     for r in agg.itertuples(index=False)}
        self.df = agg

    def get(self, task: str, model: str, method: str, variant: str, slice_: str, value: str, metric: str) -> Optional[pd.Series]:
        """The row or None."""
        r = self.rows.get((task, model, method, variant, slice_, value, metric))
        return None if r is None else pd.Series(r._asdict())


def _label(method: str, variant: str) -> str:
    return f"{method} [{variant}]" if variant else method


def _row_order(models: list[str]) -> list[str]:
    return sorted(models)


# ---- generic tables (tasks add their own through Task.report_tables) -------------------------------------
def per_task_tables(idx: Index, view: "ReportView", benchmark: str) -> list[Table]:
    """One table per task of the benchmark: model/method rows, the task's report metrics (else all) as columns."""
    layouts = view.layouts
    df = idx.df[idx.df["benchmark"] == benchmark]
    tables = []
    for task in sorted(set(df["task"])):
        sub = df[(df["task"] == task) & (df["slice"] == OVERALL[0])]
        wanted = view.task_classes.get(task, Task).report_metrics
        have = list(dict.fromkeys(sub["metric"]))
        metrics = [m for m in wanted if m in have] if wanted else have
        cols = [(m,) for m in metrics]
        rows = []
        for model in _row_order(list(set(sub["model"]))):
            for method in sorted(set(sub[sub["model"] == model]["method"])):
                for var in sorted(set(sub[(sub["model"] == model) & (sub["method"] == method)]["variant"])):
                    rows.append(([model, _label(method, var)],
                                 [cell_from(idx.get(task, model, method, var, *OVERALL, m), m) for m in metrics]))
        t = Table(id=f"{benchmark}-{task}", title=f"{view.title(benchmark)}: {task}",
                  caption="lower is better for " + ", ".join(m for m in metrics if not layouts.higher_is_better(m))
                  if any(not layouts.higher_is_better(m) for m in metrics) else "higher is better for every column",
                  row_header=["model", "method"], header=_header(cols), columns=cols, rows=rows)
        mark_best(t, layouts)
        tables.append(t)
    return tables


def summary_table(idx: Index, view: "ReportView") -> Table:
    """One row per model (its best method per task) and per reference baseline; one column per task headline."""
    layouts, headlines = view.layouts, view.headlines
    df = idx.df[(idx.df["slice"] == OVERALL[0])]
    order = {b: i for i, b in enumerate(view.benchmarks)}
    tasks = sorted(set(df["task"]), key=lambda t: (order.get(view.benchmark_of(t), 99), t))
    cols = [(view.title(view.benchmark_of(t)), f"{t}: {headlines.get(t, '?')}"
             + (" ↓" if not layouts.higher_is_better(headlines.get(t, "")) else " ↑")) for t in tasks]
    rows = []
    row_keys = sorted({(m, None) for m in set(df[df["model"] != "none"]["model"])} |
                      {("none", me) for me in set(df[df["model"] == "none"]["method"])},
                      key=lambda k: (k[0] == "none", k[0], k[1] or ""))
    for model, ref_method in row_keys:
        cells = []
        for task in tasks:
            metric = headlines.get(task, "")
            sub = df[(df["task"] == task) & (df["model"] == model) & (df["metric"] == metric)]
            if ref_method is not None:
                sub = sub[sub["method"] == ref_method]
            sub = sub[sub["mean"].notna()]
            if sub.empty:
                cells.append(Cell(metric=metric))
                continue
            best = sub.sort_values("mean", ascending=not layouts.higher_is_better(metric)).iloc[0]
            c = cell_from(best, metric)
            if ref_method is None:
                c.note = f"best method: {_label(best['method'], best['variant'])}"
            cells.append(c)
        label = [model, "best per task"] if ref_method is None else [ref_method, "reference (no model)"]
        rows.append((label, cells))
    t = Table(id="summary", title="Cross-benchmark summary",
              caption="Headline metric per task (↑ higher / ↓ lower is better), 95% bootstrap CI, n = examples "
                      "behind the cell, pf = parse failures. Model rows show their best method per task (named in "
                      "the tooltip and the CSV); seeds are averaged (sd shown). A dash means not run.",
              row_header=["model / baseline", "kind"], header=_header(cols), columns=cols, rows=rows)
    mark_best(t, layouts)
    return t


@dataclass
class ReportView:
    """What table and plot builders need besides the cells: directions, headlines, benchmarks and their tasks."""

    layouts: Layouts
    headlines: dict[str, str]  # task -> headline metric
    task_classes: dict[str, type]  # task name -> Task class
    benchmarks: dict[str, type] = field(default_factory=dict)  # benchmark id -> Task class, in display order

    def __post_init__(self) -> None:
        if not self.benchmarks:
            classes = sorted(self.task_classes.values(), key=lambda c: (c.report_order, c.benchmark_id()))
            self.benchmarks = {c.benchmark_id(): c for c in classes}

    def benchmark_of(self, task: str) -> str:
        """The benchmark a task belongs to."""
        return self.task_classes.get(task, Task).benchmark_id()

    def title(self, benchmark: str) -> str:
        """Display title of a benchmark."""
        cls = self.benchmarks.get(benchmark)
        return cls.benchmark_title or benchmark if cls is not None else benchmark

    def higher_is_better(self, metric: str) -> bool:
        """Direction of a metric."""
        return self.layouts.higher_is_better(metric)


def all_tables(agg: pd.DataFrame, view: ReportView) -> list[Table]:
    """The summary first, then every benchmark's tables (each benchmark's Task class draws its own)."""
    idx = Index(agg)
    out = [summary_table(idx, view)]
    for b, cls in view.benchmarks.items():
        for t in cls.report_tables(idx, view, b):
            t.section = b
            out.append(t)
    return out
