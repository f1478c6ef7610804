"""Report tables, the pieces every builder shares: the Cell (a seed-aggregated value with its CI, counts and
sources), the render-agnostic Table, best marks, the lookup Index of aggregated rows, and the ReportView (directions,
headlines and each task's benchmark presentation). The tables themselves come from recbench.report.builder."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Optional

from recbench.api.facts import FALLBACK_COUNT, FALLBACK_VALUE
from recbench.report.collect import OVERALL
from recbench.report.directions import Directions
from recbench.report.numbers import fmt
from recbench.report.presentation import GENERIC, Presentation

if TYPE_CHECKING:  # imported where a frame is built: the audits import this module on every run and plan
    import pandas as pd


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
    chosen: str = ""  # summary: the method behind the cell (named in Markdown, CSV and the tooltip)
    tie: bool = False  # the marked value is shared with another cell of the column
    fallback: Optional[tuple[int, int]] = None  # (answers scored with the task's fallback value, examples)

    @property
    def missing(self) -> bool:
        """True when there is no value (rendered as a dash)."""
        return self.shown is None and not self.has_value

    @property
    def has_value(self) -> bool:
        """True when the cell holds a number (a 'no valid run' cell shows text and has none)."""
        return not (self.mean is None or (isinstance(self.mean, float) and math.isnan(self.mean)))

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
        if self.fallback:
            parts.append(f"{self.fallback[0]} of {self.fallback[1]} fallback")
        return ", ".join(parts)

    @property
    def mark_text(self) -> str:
        """'best', 'second best', with ' (tie)' when the value is shared; '' when unmarked."""
        if not self.mark:
            return ""
        return ("best" if self.mark == "best" else "second best") + (" (tie)" if self.tie else "")

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
        if self.mark_text:
            bits.append(self.mark_text)
        if self.fallback:
            bits.append(f"{self.fallback[0]} of {self.fallback[1]} failed answers scored with the task's fallback value")
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
        """The displayed values as a DataFrame (NaN where missing); a column whose cells name the method chosen for
        them (the summary's best method) is followed by '<column> · method'."""
        import pandas as pd

        flat = self.flat_columns()
        with_method = [any(cells[j].chosen or cells[j].shown for _, cells in self.rows) for j in range(len(flat))]
        names: list[str] = []
        for j, col in enumerate(flat):
            names += [col, f"{col} · method"] if with_method[j] else [col]
        data = []
        for _, cells in self.rows:
            row: list[Any] = []
            for j, c in enumerate(cells):
                row.append(c.mean if c.has_value and not c.missing else math.nan)
                if with_method[j]:
                    row.append(c.chosen or (c.shown or ""))
            data.append(row)
        idx = pd.MultiIndex.from_tuples([tuple(lbl) for lbl, _ in self.rows], names=self.row_header) \
            if self.rows else None
        return pd.DataFrame(data, columns=names, index=idx)


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


def mark_best(table: Table, directions: Any, reference_rows: Iterable[int] = ()) -> None:
    """Mark the best and second-best value of every column. Values equal as displayed (3 decimals) are ties: they
    share the mark and are flagged `tie`. A model value tied with a reference row (e.g. random) is not 'second best'.
    A column whose metric has no direction (a count, or an unregistered metric) gets no marks. `directions`: anything
    with higher_is_better(metric) (Directions, ReportView)."""
    refs = set(reference_rows)
    for j, col in enumerate(table.columns):
        entries = [(i, cells[j]) for i, (_, cells) in enumerate(table.rows) if cells[j].has_value and not cells[j].missing]
        if len(entries) < 2:
            continue
        hib = directions.higher_is_better(entries[0][1].metric)
        if hib is None:
            continue
        shown = {id(c): round(c.mean, 3) for _, c in entries}
        vals = sorted(set(shown.values()), reverse=hib)
        ref_vals = {shown[id(c)] for i, c in entries if i in refs}
        for i, c in entries:
            v = shown[id(c)]
            c.mark = "best" if v == vals[0] else ("second" if len(vals) > 1 and v == vals[1] else None)
            if c.mark == "second" and i not in refs and v in ref_vals:
                c.mark = None  # no better than a model-free reference: not a runner-up
            c.tie = c.mark is not None and sum(1 for _, o in entries if shown[id(o)] == v) > 1


class Index:
    """Fast lookup of aggregated rows by (task, model, method, variant, slice, value, metric)."""

    def __init__(self, agg: pd.DataFrame):
        self.rows = {(r.task, r.model, r.method, r.variant, r.slice, r.value, r.metric): r
                     for r in agg.itertuples(index=False)}
        self.df = agg

    def get(self, task: str, model: str, method: str, variant: str, slice_: str, value: str, metric: str) -> Optional[pd.Series]:
        """The row or None."""
        import pandas as pd

        r = self.rows.get((task, model, method, variant, slice_, value, metric))
        return None if r is None else pd.Series(r._asdict())


#: metrics kept in samples.jsonl / metrics.json but never shown as table columns (bookkeeping, not scores)
PSEUDO_METRICS = ("parsed", FALLBACK_COUNT, FALLBACK_VALUE)


def fallback_of(idx: Index, task: str, model: str, method: str, variant: str, metric: str) -> Optional[tuple[int, int]]:
    """(answers scored with the fallback value, examples) when the run's metric used a fallback (extra.n_fallback)."""
    if metric in PSEUDO_METRICS or metric.endswith("_parsed"):
        return None
    r = idx.get(task, model, method, variant, *OVERALL, FALLBACK_COUNT)
    if r is None or r["mean"] is None or (isinstance(r["mean"], float) and math.isnan(r["mean"])) or r["mean"] <= 0:
        return None
    return int(round(float(r["mean"]))), int(r["examples"]) if r["examples"] is not None else 0


def parse_failure_rate(row: Any) -> float:
    """Parse failures / examples of an aggregated row (0 when unknown)."""
    ex, pf = row["examples"], row["parse_failed"]
    if ex is None or pf is None or (isinstance(ex, float) and math.isnan(ex)) or not ex:
        return 0.0
    return 0.0 if isinstance(pf, float) and math.isnan(pf) else float(pf) / float(ex)


def method_label(method: str, variant: str) -> str:
    """'method [variant]', or the method alone when the variant is empty."""
    return f"{method} [{variant}]" if variant else method


def direction_caption(metrics: list[str], directions: Any) -> str:
    """A per-task caption: 'lower is better for mae; no direction (...): n_recommended', or 'higher is better for
    every column'."""
    by = {True: [], False: [], None: []}  # type: dict[Optional[bool], list[str]]
    for m in metrics:
        by[directions.higher_is_better(m)].append(m)
    parts = []
    if by[False]:
        parts.append("lower is better for " + ", ".join(by[False]))
    if by[None]:
        parts.append("no direction (a count or an unregistered metric: never marked best nor lettered): "
                     + ", ".join(by[None]))
    return "; ".join(parts) if parts else "higher is better for every column"


@dataclass
class ReportView:
    """What table and plot builders need besides the cells: directions, headlines, each task's class and the
    presentation of its benchmark."""

    directions: Directions
    headlines: dict[str, str]  # task -> headline metric
    task_classes: dict[str, type]  # task name -> Task class
    presentations: dict[str, Presentation] = field(default_factory=dict)  # task name -> its benchmark's presentation
    max_parse_failure_rate: float = 0.5  # runs at or above this share of parse failures are never "best method"

    @property
    def benchmarks(self) -> dict[str, Presentation]:
        """Benchmark key -> its presentation, in display order (declared order, then key)."""
        by_key = {p.benchmark: p for p in self.presentations.values()}
        return {p.benchmark: p for p in sorted(by_key.values(), key=lambda p: (p.order, p.benchmark))}

    def benchmark_of(self, task: str) -> str:
        """The benchmark a task belongs to."""
        return self.presentations.get(task, GENERIC).benchmark

    def title(self, benchmark: str) -> str:
        """Display title of a benchmark."""
        p = self.benchmarks.get(benchmark)
        return p.title if p is not None else benchmark

    def higher_is_better(self, metric: str) -> Optional[bool]:
        """Direction of a metric: True / False, None when it has none (a count) or is not registered."""
        return self.directions.higher_is_better(metric)
