"""Report tables from the seed-aggregated cell table: the generic pieces (cells, tables, best marks, per-task
tables) and the cross-benchmark summary; benchmarks add their own tables through Task.report_tables."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

import pandas as pd

from recbench.report.collect import OVERALL
from recbench.report.layouts import Layouts
from recbench.api.task import Task

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


def mark_best(table: Table, layouts: Layouts, reference_rows: Iterable[int] = ()) -> None:
    """Mark the best and second-best value of every column. Values equal as displayed (3 decimals) are ties: they
    share the mark and are flagged `tie`. A model value tied with a reference row (e.g. random) is not 'second best'.
    A column whose metric has no direction (a count, or an unregistered metric) gets no marks."""
    refs = set(reference_rows)
    for j, col in enumerate(table.columns):
        entries = [(i, cells[j]) for i, (_, cells) in enumerate(table.rows) if cells[j].has_value and not cells[j].missing]
        if len(entries) < 2:
            continue
        hib = layouts.higher_is_better(entries[0][1].metric)
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
        r = self.rows.get((task, model, method, variant, slice_, value, metric))
        return None if r is None else pd.Series(r._asdict())


#: metrics kept in samples.jsonl / metrics.json but never shown as table columns (bookkeeping, not scores)
PSEUDO_METRICS = ("parsed", "n_fallback", "fallback_rating")


def fallback_of(idx: Index, task: str, model: str, method: str, variant: str, metric: str) -> Optional[tuple[int, int]]:
    """(answers scored with the fallback value, examples) when the run's metric used a fallback (extra.n_fallback)."""
    if metric in PSEUDO_METRICS or metric.endswith("_parsed"):
        return None
    r = idx.get(task, model, method, variant, *OVERALL, "n_fallback")
    if r is None or r["mean"] is None or (isinstance(r["mean"], float) and math.isnan(r["mean"])) or r["mean"] <= 0:
        return None
    return int(round(float(r["mean"]))), int(r["examples"]) if r["examples"] is not None else 0


def parse_failure_rate(row: Any) -> float:
    """Parse failures / examples of an aggregated row (0 when unknown)."""
    ex, pf = row["examples"], row["parse_failed"]
    if ex is None or pf is None or (isinstance(ex, float) and math.isnan(ex)) or not ex:
        return 0.0
    return 0.0 if isinstance(pf, float) and math.isnan(pf) else float(pf) / float(ex)


def _run_config(run_dir: str) -> dict[str, Any]:
    """A run dir's config.yaml as a dict ({} when unreadable)."""
    import yaml

    try:
        return yaml.safe_load((Path(run_dir) / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}


def slices_not_run(df: pd.DataFrame, slice_key: str, expected: Iterable[str]) -> str:
    """'medium, hard: not in limit=4' — the expected slice values no run of df covers, and why (from each run's
    config.yaml: a task.<slice>s subset, a limit, else absent from the data); '' when all were run."""
    have = set(df[df["slice"] == slice_key]["value"])
    missing = [v for v in expected if v not in have]
    if not missing:
        return ""
    dirs = {s["run_dir"] for src in df["sources"] for s in json.loads(src) if " " not in s["run_dir"]}
    plural = slice_key[:-1] + "ies" if slice_key.endswith("y") else slice_key + "s"  # difficulty -> difficulties
    why: list[str] = []
    for d in sorted(dirs):
        cfg = _run_config(d)
        chosen = (cfg.get("task") or {}).get(plural)
        if chosen and all(v not in {str(x) for x in chosen} for v in missing):
            why.append(f"task.{plural}=[{','.join(map(str, chosen))}]")
        elif cfg.get("limit") is not None:
            why.append(f"limit={cfg['limit']} (run.limit_strategy={(cfg.get('run') or {}).get('limit_strategy', 'first')})")
    reason = "not in " + " / ".join(dict.fromkeys(why)) if why else "not in the data"
    return f"{', '.join(missing)}: {reason}"


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
        have = [m for m in dict.fromkeys(sub["metric"]) if m not in PSEUDO_METRICS]
        metrics = [m for m in wanted if m in have] if wanted else have
        cols = [(m,) for m in metrics]
        rows = []
        for model in _row_order(list(set(sub["model"]))):
            for method in sorted(set(sub[sub["model"] == model]["method"])):
                for var in sorted(set(sub[(sub["model"] == model) & (sub["method"] == method)]["variant"])):
                    cells = [cell_from(idx.get(task, model, method, var, *OVERALL, m), m) for m in metrics]
                    for c in cells:
                        c.fallback = None if c.missing else fallback_of(idx, task, model, method, var, c.metric)
                    rows.append(([model, _label(method, var)], cells))
        t = Table(id=f"{benchmark}-{task}", title=f"{view.title(benchmark)}: {task}",
                  caption=direction_caption(metrics, layouts),
                  row_header=["model", "method"], header=_header(cols), columns=cols, rows=rows)
        mark_best(t, layouts)
        tables.append(t)
    return tables


def direction_caption(metrics: list[str], layouts: Any) -> str:
    """A per-task caption: 'lower is better for mae; no direction (...): n_recommended', or 'higher is better for
    every column'."""
    by = {True: [], False: [], None: []}  # type: dict[Optional[bool], list[str]]
    for m in metrics:
        by[layouts.higher_is_better(m)].append(m)
    parts = []
    if by[False]:
        parts.append("lower is better for " + ", ".join(by[False]))
    if by[None]:
        parts.append("no direction (a count or an unregistered metric: never marked best nor lettered): "
                     + ", ".join(by[None]))
    return "; ".join(parts) if parts else "higher is better for every column"


def _arrow(hib: Optional[bool]) -> str:
    return " ↑" if hib else (" ↓" if hib is False else "")


def summary_table(idx: Index, view: "ReportView") -> Table:
    """One row per model (its best eligible method per task) and per reference baseline; one column per task headline.

    A model's run is eligible for "best method" only when its parse-failure rate is under
    view.max_parse_failure_rate (1 = every run counts); a model with runs but none eligible shows "no valid run"."""
    layouts, headlines = view.layouts, view.headlines
    bound = view.max_parse_failure_rate
    df = idx.df[(idx.df["slice"] == OVERALL[0])]
    order = {b: i for i, b in enumerate(view.benchmarks)}
    tasks = sorted(set(df["task"]), key=lambda t: (order.get(view.benchmark_of(t), 99), t))
    cols = [(view.title(view.benchmark_of(t)), f"{t}: {headlines.get(t, '?')}"
             + _arrow(layouts.higher_is_better(headlines.get(t, "")))) for t in tasks]
    rows = []
    row_keys = sorted({(m, None) for m in set(df[df["model"] != "none"]["model"])} |
                      {("none", me) for me in set(df[df["model"] == "none"]["method"])},
                      key=lambda k: (k[0] == "none", k[0], k[1] or ""))
    excluded: list[str] = []
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
            rates = sub.apply(parse_failure_rate, axis=1)
            ok = (rates < bound) | (bound >= 1)  # a bound of 1 counts every run
            eligible = sub[ok] if ref_method is None else sub
            for (_, r), rate, good in zip(sub.iterrows(), rates, ok):
                if ref_method is None and not good:
                    excluded.append(f"{model} · {task} · {_label(r['method'], r['variant'])} ({rate:.0%} parse failures)")
            if eligible.empty:
                cells.append(Cell(metric=metric, shown="no valid run",
                                  note=f"every run has >= {bound:.0%} parse failures"))
                continue
            best = eligible.sort_values("mean", ascending=layouts.higher_is_better(metric) is False).iloc[0]
            c = cell_from(best, metric)
            c.fallback = fallback_of(idx, task, model, best["method"], best["variant"], metric)
            if ref_method is None:
                c.chosen = _label(best["method"], best["variant"])
                c.note = f"best method: {c.chosen}"
            cells.append(c)
        label = [model, "best per task"] if ref_method is None else [ref_method, "reference (no model)"]
        rows.append((label, cells))
    caption = ("Headline metric per task (↑ higher / ↓ lower is better), 95% bootstrap CI, n = examples behind the "
               "cell, pf = parse failures. Model rows show their best method per task (named under the value and in "
               f"the CSV's '· method' column) among runs with under {bound:.0%} parse failures; 'no valid run' when "
               "none qualifies. Equal values (3 decimals) are ties and share the mark; a model tied with a reference "
               "row is not marked second best. Seeds are averaged (sd shown). A dash means not run.")
    if excluded:
        caption += " Not eligible: " + "; ".join(excluded) + "."
    t = Table(id="summary", title="Cross-benchmark summary", caption=caption,
              row_header=["model / baseline", "kind"], header=_header(cols), columns=cols, rows=rows)
    mark_best(t, layouts, reference_rows=[i for i, (lbl, _) in enumerate(rows) if lbl[1] == "reference (no model)"])
    return t


@dataclass
class ReportView:
    """What table and plot builders need besides the cells: directions, headlines, benchmarks and their tasks."""

    layouts: Layouts
    headlines: dict[str, str]  # task -> headline metric
    task_classes: dict[str, type]  # task name -> Task class
    benchmarks: dict[str, type] = field(default_factory=dict)  # benchmark id -> Task class, in display order
    max_parse_failure_rate: float = 0.5  # runs at or above this share of parse failures are never "best method"

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

    def higher_is_better(self, metric: str) -> Optional[bool]:
        """Direction of a metric: True / False, None when it has none (a count) or is not registered."""
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
