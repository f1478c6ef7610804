"""Report tables built from the seed-aggregated cell table: PerRecBench Table 1, RecBench+ by query type,
LLMRec by task, other benchmarks, and the cross-benchmark summary."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Optional

import pandas as pd

from recbench.report.collect import OVERALL
from recbench.report.layouts import Layouts

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

    @property
    def missing(self) -> bool:
        """True when there is no value (rendered as a dash)."""
        return self.mean is None or (isinstance(self.mean, float) and math.isnan(self.mean))

    @property
    def text(self) -> str:
        """The displayed value."""
        return fmt(self.mean)

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


# ---- per benchmark ------------------------------------------------------------------------------------
def perrec_tables(idx: Index, layouts: Layouts) -> list[Table]:
    """Table 1 (model rows; method x difficulty columns; average) and the reference rows."""
    lay = layouts.benchmarks["perrec"]
    df = idx.df[idx.df["benchmark"] == "perrec"]
    if df.empty:
        return []
    metric, sl = lay["metric"], lay["slice"]
    diffs = [d for d in lay["slice_values"] if d in set(df[df["slice"] == sl]["value"])]
    diffs += sorted(set(df[df["slice"] == sl]["value"]) - set(diffs))
    tables = []
    llm = df[df["model"] != "none"]
    if not llm.empty:
        base = list(lay["methods"])
        # each layout method, then its variants (listwise_cot, listwise_fewshot, ...), then anything else
        methods = sorted(set(llm["method"]), key=lambda m: (next((i for i, b in enumerate(base) if m == b or
                                                                  m.startswith(b + "_")), len(base)), m))
        columns = [(m, d) for m in methods for d in diffs
                   if not llm[(llm["method"] == m) & (llm["slice"] == sl) & (llm["value"] == d)].empty]
        variants = sorted(set(llm["variant"]))
        rows = []
        for task in sorted(set(llm["task"])):
            for model in _row_order(list(set(llm[llm["task"] == task]["model"]))):
                for var in variants:
                    cells = [cell_from(idx.get(task, model, m, var, sl, d, metric), metric) for m, d in columns]
                    if all(c.missing for c in cells):
                        continue
                    avg = Cell(metric=metric, derived=True,
                               mean=None if any(c.missing for c in cells) else sum(c.mean for c in cells) / len(cells))
                    label = [model] + ([var or "default"] if len(variants) > 1 else []) + \
                        ([task] if len(set(llm["task"])) > 1 else [])
                    rows.append((label, cells + [avg]))
        cols = columns + [("average", "")]
        head = ["model"] + (["variant"] if len(variants) > 1 else []) + (["task"] if len(set(llm["task"])) > 1 else [])
        t = Table(id="perrec-table1", title="PerRecBench: PTC by method and difficulty (Table 1 layout)",
                  caption=f"{metric} (Kendall tau on per-user ranks); easy/medium/hard = groups of 2/3/4 users; "
                          "average over the row's cells (missing if any cell is missing); "
                          "bold = best, underlined = second best per column.",
                  row_header=head, header=_header(cols), columns=cols, rows=rows)
        mark_best(t, layouts)
        tables.append(t)
    ref = df[df["model"] == "none"]
    if not ref.empty:
        cols = [(d,) for d in diffs] + [("all",)]
        rows = []
        for task in sorted(set(ref["task"])):
            for method in sorted(set(ref[ref["task"] == task]["method"])):
                for var in sorted(set(ref[(ref["task"] == task) & (ref["method"] == method)]["variant"])):
                    cells = [cell_from(idx.get(task, "none", method, var, sl, d, metric), metric) for d in diffs]
                    cells.append(cell_from(idx.get(task, "none", method, var, *OVERALL, metric), metric))
                    rows.append(([_label(method, var)], cells))
        tables.append(Table(id="perrec-reference", title="PerRecBench: reference rows (no model)",
                            caption=f"{metric} of the model-free baselines by difficulty.",
                            row_header=["baseline"], header=_header(cols), columns=cols, rows=rows))
    return tables


def recbench_plus_tables(idx: Index, layouts: Layouts) -> list[Table]:
    """RecBench+ by query type (recall/precision/CMR/FTR), with and without history."""
    lay = layouts.benchmarks["recbench_plus"]
    df = idx.df[idx.df["benchmark"] == "recbench_plus"]
    if df.empty:
        return []
    sl = lay["slice"]
    present = set(df[df["slice"] == sl]["value"])
    types = [t for t in lay["slice_values"] if t in present] + sorted(present - set(lay["slice_values"]))
    metrics = [m for m in lay["metrics"] if m in set(df["metric"])]
    columns = [(t, m) for t in types + ["all"] for m in metrics
               if not df[(df["metric"] == m) & (((df["slice"] == sl) & (df["value"] == t)) |
                                                ((df["slice"] == "all") & (t == "all")))].empty]
    hist = lay.get("history", {})
    rows = []
    multi_task = len(set(df["task"])) > 1
    for task in sorted(set(df["task"])):
        sub = df[df["task"] == task]
        for model in _row_order(list(set(sub["model"]))):
            for method in sorted(set(sub[sub["model"] == model]["method"]), key=lambda m: (m not in hist, m)):
                for var in sorted(set(sub[(sub["model"] == model) & (sub["method"] == method)]["variant"])):
                    cells = [cell_from(idx.get(task, model, method, var, *((sl, t) if t != "all" else OVERALL), m), m)
                             for t, m in columns]
                    label = [model, hist.get(method, method) + (f" [{var}]" if var else "")] + ([task] if multi_task else [])
                    rows.append((label, cells))
    t = Table(id="recbench-plus", title="RecBench+: by query type",
              caption="recall / precision (official fuzzy title matching), CMR (condition match rate) and FTR "
                      "(answers not following the list format; lower is better) per query type; "
                      "bold = best, underlined = second best per column.",
              row_header=["model", "history"] + (["task"] if multi_task else []), header=_header(columns),
              columns=columns, rows=rows)
    mark_best(t, layouts)
    return [t]


def _per_task_tables(idx: Index, layouts: Layouts, benchmark: str, metric_lists: dict[str, list[str]]) -> list[Table]:
    df = idx.df[idx.df["benchmark"] == benchmark]
    tables = []
    for task in sorted(set(df["task"])):
        sub = df[(df["task"] == task) & (df["slice"] == OVERALL[0])]
        wanted = next((ms for k, ms in metric_lists.items() if k in task.split("_")), None)
        have = list(dict.fromkeys(sub["metric"]))
        metrics = [m for m in wanted if m in have] if wanted else have
        cols = [(m,) for m in metrics]
        rows = []
        for model in _row_order(list(set(sub["model"]))):
            for method in sorted(set(sub[sub["model"] == model]["method"])):
                for var in sorted(set(sub[(sub["model"] == model) & (sub["method"] == method)]["variant"])):
                    rows.append(([model, _label(method, var)],
                                 [cell_from(idx.get(task, model, method, var, *OVERALL, m), m) for m in metrics]))
        t = Table(id=f"{benchmark}-{task}", title=f"{layouts.title(benchmark)}: {task}",
                  caption="lower is better for " + ", ".join(m for m in metrics if not layouts.higher_is_better(m))
                  if any(not layouts.higher_is_better(m) for m in metrics) else "higher is better for every column",
                  row_header=["model", "method"], header=_header(cols), columns=cols, rows=rows)
        mark_best(t, layouts)
        tables.append(t)
    return tables


def llmrec_tables(idx: Index, layouts: Layouts) -> list[Table]:
    """LLMRec: one table per task with that task's metrics."""
    return _per_task_tables(idx, layouts, "llmrec", layouts.benchmarks["llmrec"].get("task_metrics", {}))


def other_tables(idx: Index, layouts: Layouts) -> list[Table]:
    """Config-only and unknown benchmarks: one table per task with every overall metric."""
    return [t for b in sorted(set(idx.df["benchmark"]) - {"perrec", "recbench_plus", "llmrec"})
            for t in _per_task_tables(idx, layouts, b, {})]


def summary_table(idx: Index, layouts: Layouts, headlines: dict[str, str]) -> Table:
    """One row per model (its best method per task) and per reference baseline; one column per task headline."""
    df = idx.df[(idx.df["slice"] == OVERALL[0])]
    order = {b: i for i, b in enumerate(layouts.benchmarks)}
    tasks = sorted(set(df["task"]), key=lambda t: (order.get(layouts.benchmark_of(t), 99), t))
    cols = [(layouts.title(layouts.benchmark_of(t)), f"{t}: {headlines.get(t, '?')}"
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


def all_tables(agg: pd.DataFrame, layouts: Layouts, headlines: dict[str, str]) -> list[Table]:
    """The summary first, then every benchmark's tables."""
    idx = Index(agg)
    return ([summary_table(idx, layouts, headlines)] + perrec_tables(idx, layouts) + recbench_plus_tables(idx, layouts)
            + llmrec_tables(idx, layouts) + other_tables(idx, layouts))
