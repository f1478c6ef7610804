"""The one table builder: the cross-benchmark summary, then every benchmark's tables as its Presentation declares
them (recbench.report.presentation): rows, column levels, metrics, breakdown order, average, published rows."""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from recbench.report.collect import OVERALL
from recbench.report.judged import name_the_judge
from recbench.report.presentation import Breakdown, Presentation, TableSpec
from recbench.report.published_rows import OUTSIDE_MARK, published_cells
from recbench.report.summary_table import summary_table
from recbench.report.tables import (PSEUDO_METRICS, Cell, Index, ReportView, Table, _header, cell_from,
                                    direction_caption, fallback_of, mark_best, method_label)

ALL = OVERALL[1]  # the value level's overall column


@dataclass(frozen=True)
class Column:
    """One value column: its header labels and the cell it reads (method None: the row's method)."""

    labels: tuple[str, ...]
    method: Optional[str]
    slice: str
    value: str
    metric: str


def all_tables(agg: pd.DataFrame, view: ReportView) -> list[Table]:
    """The summary first, then every benchmark's declared tables, benchmarks in their declared order."""
    idx = Index(agg)
    out = [summary_table(idx, view)]
    for b, shown in view.benchmarks.items():
        for t in benchmark_tables(idx, view, shown):
            t.section = b
            out.append(t)
    return out


def benchmark_tables(idx: Index, view: ReportView, shown: Presentation) -> list[Table]:
    """The tables a benchmark declares, drawn from its runs' cells (one table per task where a spec says per_task)."""
    df = idx.df[idx.df["benchmark"] == shown.benchmark]
    out = []
    for spec in shown.tables:
        scopes = [(t, df[df["task"] == t]) for t in sorted(set(df["task"]))] if spec.per_task else [("", df)]
        for task, scope in scopes:
            t = declared_table(idx, view, shown, spec, scope, task)
            if t is not None:
                out.append(t)
    return out


def _rows_of(scope: pd.DataFrame, rows: str) -> pd.DataFrame:
    if rows == "models":
        return scope[scope["model"] != "none"]
    if rows == "references":
        return scope[scope["model"] == "none"]
    return scope


def _method_key(order: tuple[str, ...]) -> Any:
    """Sort key: methods named in `order` in that order, each followed by its variants (name + '_...'), then the
    rest by name."""
    def key(m: str) -> tuple[int, str]:
        exact = [i for i, b in enumerate(order) if m == b]
        prefix = [i for i, b in enumerate(order) if m.startswith(b + "_")]
        return (exact or prefix or [len(order)])[0], m
    return key


def _values(spec: TableSpec, scope: pd.DataFrame) -> list[str]:
    """The value level: the breakdown values the runs have (declared order first, the rest sorted), then 'all'."""
    b = spec.breakdown
    if b is None or "value" not in spec.columns:
        return [ALL]
    present = set(scope[scope["slice"] == b.key]["value"])
    values = [v for v in b.order if v in present] + sorted(present - set(b.order))
    return values + ([ALL] if spec.overall else [])


def _metrics(spec: TableSpec, view: ReportView, scope: pd.DataFrame, task: str, slices: set[str]) -> list[str]:
    """The declared metrics, else every metric of the shown slices in order of appearance (bookkeeping left out)."""
    declared = spec.metrics_of(view.task_classes.get(task)) if task else spec.metrics
    if declared:
        return list(declared)
    return [m for m in dict.fromkeys(scope[scope["slice"].isin(slices)]["metric"]) if m not in PSEUDO_METRICS]


def _columns(spec: TableSpec, scope: pd.DataFrame, methods: list[str], values: list[str],
             metrics: list[str]) -> list[Column]:
    """The column levels crossed (outer first), each column kept where some run of the scope has a value for it."""
    have = set(zip(scope["method"], scope["slice"], scope["value"], scope["metric"]))
    have_any = {k[1:] for k in have}
    levels = {"method": methods, "value": values, "metric": metrics}
    out = []
    for combo in itertools.product(*(levels[lv] for lv in spec.columns)):
        at = dict(zip(spec.columns, combo))
        value, metric, method = at.get("value", ALL), at.get("metric", metrics[0]), at.get("method")
        sl, v = OVERALL if value == ALL else (spec.breakdown.key, value)  # type: ignore[union-attr]
        if ((method, sl, v, metric) in have) if method else ((sl, v, metric) in have_any):
            out.append(Column(tuple(combo), method, sl, v, metric))
    return out


def _average(cells: list[Cell], metric: str) -> Cell:
    """The row's average: derived, missing when any cell is."""
    vals = [c.mean for c in cells]
    missing = not cells or any(c.missing for c in cells) or any(v is None for v in vals)
    return Cell(metric=metric, derived=True, mean=None if missing else sum(vals) / len(vals))  # type: ignore[arg-type]


def _row_cells(idx: Index, cols: list, tk: str, model: str, method: Optional[str], var: str) -> list:
    """One row's cells: each column's value (a column's own method, else the row's), fallback counts overall."""
    cells = []
    for c in cols:
        m = c.method or method
        cell = cell_from(idx.get(tk, model, m, var, c.slice, c.value, c.metric), c.metric)
        if (c.slice, c.value) == OVERALL and not cell.missing:
            cell.fallback = fallback_of(idx, tk, model, m, var, c.metric)  # type: ignore[arg-type]
        cells.append(cell)
    return cells


def declared_table(idx: Index, view: ReportView, shown: Presentation, spec: TableSpec, scope: pd.DataFrame,
                   task: str = "") -> Optional[Table]:
    """One declared table over `scope` (the benchmark's cells, or one task's); None when it has no row."""
    rows_df = _rows_of(scope, spec.rows)
    if rows_df.empty:
        return None
    method_row = "method" not in spec.columns
    mkey = _method_key(spec.method_order)
    methods = sorted(set(rows_df["method"]), key=mkey)
    values = _values(spec, scope)
    slices = {OVERALL[0]} | ({spec.breakdown.key} if spec.breakdown is not None and values != [ALL] else set())
    cols = _columns(spec, scope, methods, values, _metrics(spec, view, scope, task, slices))
    if not cols:  # no run has any of its columns (e.g. a breakdown by a key these runs do not have)
        return None
    levels = ["task", "model", "method", "variant"] if method_row else ["task", "model", "variant"]
    keys = sorted(dict.fromkeys(rows_df[levels].itertuples(index=False, name=None)),
                  key=lambda k: (k[0], k[1], mkey(k[2]) if method_row else (0, ""), k[-1]))
    variants = sorted(set(rows_df["variant"]))
    variant_col = not method_row and len(variants) > 1
    multi_task = scope["task"].nunique() > 1  # every table of a benchmark that spans several tasks names them
    if spec.rows == "references":
        head = ["baseline"]
    else:
        head = ["model"] + ([spec.method_header] if method_row else []) + (["variant"] if variant_col else [])
    head += ["task"] if multi_task else []
    one_metric = spec.metrics[0] if "metric" not in spec.columns else ""
    rows, row_keys = [], []
    for k in keys:
        tk, model, var = k[0], k[1], k[-1]
        method = k[2] if method_row else None
        cells = _row_cells(idx, cols, tk, model, method, var)
        if spec.average:
            cells.append(_average(cells, one_metric))
        mlabel = method_label(spec.method_labels.get(method, method), var) if method is not None else ""
        if spec.rows == "references":
            label = [mlabel]
        else:
            label = [model] + ([mlabel] if method_row else []) + ([var or "default"] if variant_col else [])
        rows.append((label + ([tk] if multi_task else []), cells))
        row_keys.append((tk, model, method, var))
    columns = [c.labels for c in cols] + ([("average",) + ("",) * (len(spec.columns) - 1)] if spec.average else [])
    metrics = list(dict.fromkeys(c.metric for c in cols))
    t = Table(id=spec.id.format(benchmark=shown.benchmark, task=task),
              title=spec.title.format(title=shown.title, task=task),
              caption=spec.caption if spec.caption is not None else direction_caption(metrics, view),
              row_header=head, header=_header(columns), columns=columns, rows=rows)
    if spec.marks:
        mark_best(t, view)
    if spec.published is not None:
        flagged = add_published_rows(t, row_keys, rows_df, spec, shown.benchmark, cols)
        if flagged is not None:
            t.caption += spec.published.caption.format(mark=OUTSIDE_MARK, flagged=flagged, benchmark=shown.benchmark)
    if spec.say_not_run and spec.breakdown is not None:
        gap = slices_not_run(rows_df, spec.breakdown)
        if gap:
            t.caption += f" Not run: {gap}."
    name_the_judge(t)  # the judge beside every judged number
    return t


def add_published_rows(t: Table, row_keys: list[tuple[str, str, Optional[str], str]], rows_df: pd.DataFrame,
                       spec: TableSpec, benchmark: str, cols: list[Column]) -> Optional[int]:
    """Insert a '<model> (published)' row under each measured row the benchmark's published numbers apply to
    (recbench.report.published; spec.published names the runs) and mark each measured cell whose published value
    lies outside its 95% CI. Returns how many cells were marked, or None when no row applies."""
    from recbench.report.published import compare, load_benchmark

    published = load_benchmark(benchmark)
    if not published or spec.published is None:
        return None
    key = spec.breakdown.key if spec.breakdown is not None else OVERALL[0]
    metric_of = {c.labels: c.metric for c in cols}
    flagged, any_row, out = 0, False, []
    for (labels, cells), (task, model, method, var) in zip(t.rows, row_keys):
        out.append((labels, cells))
        sub = rows_df[(rows_df["task"] == task) & (rows_df["model"] == model) & (rows_df["variant"] == var)]
        if method is not None:
            sub = sub[sub["method"] == method]
        name = spec.published.name_runs(run_configs(sub), task)
        measured = [{**r, "task": name} for r in sub.to_dict("records") if r["slice"] in (key, OVERALL[0])]
        records = [r for r in compare(measured, published) if method is None or r["method"] == method]
        if not records:
            continue
        any_row = True
        by = {(r["method"], r["value"], r["metric"]): r for r in records}
        by_col = {c.labels: by[k] for c in cols if (k := (c.method or method, c.value, c.metric)) in by}
        pcells, n = published_cells(t.columns, cells, by_col, lambda col: metric_of.get(col, cells[-1].metric),
                                    fmt=spec.published.number_format)
        flagged += n
        if spec.average:
            pcells[-1] = _average(pcells[:-1], cells[-1].metric)
        out.append(([f"{labels[0]} (published)"] + labels[1:], pcells))
    t.rows = out
    return flagged if any_row else None


def _run_config(run_dir: str) -> dict[str, Any]:
    """A run dir's config.yaml as a dict ({} when unreadable)."""
    import yaml

    try:
        return yaml.safe_load((Path(run_dir) / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}


def _run_dirs(df: pd.DataFrame) -> list[str]:
    """The run dirs behind a set of cells (pooled cells, which join several dirs, left out)."""
    return sorted({s["run_dir"] for src in df["sources"] for s in json.loads(src) if " " not in s["run_dir"]})


def run_configs(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The config.yaml of every run dir behind a set of cells."""
    return [_run_config(d) for d in _run_dirs(df)]


def _select(cfg: dict[str, Any], dotted: str) -> Any:
    """cfg['task']['difficulties'] for 'task.difficulties' (None where a level is missing)."""
    node: Any = cfg
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def slices_not_run(df: pd.DataFrame, breakdown: Breakdown) -> str:
    """'medium, hard: not in limit=4' — the declared breakdown values no run of df covers, and why (from each run's
    config.yaml: a subset chosen with the breakdown's subset_key, a limit, else absent from the data); '' when all
    were run."""
    have = set(df[df["slice"] == breakdown.key]["value"])
    missing = [v for v in breakdown.order if v not in have]
    if not missing:
        return ""
    why: list[str] = []
    for d in _run_dirs(df):
        cfg = _run_config(d)
        chosen = _select(cfg, breakdown.subset_key) if breakdown.subset_key else None
        if chosen and all(v not in {str(x) for x in chosen} for v in missing):
            why.append(f"{breakdown.subset_key}=[{','.join(map(str, chosen))}]")
        elif cfg.get("limit") is not None:
            strategy = (cfg.get("run") or {}).get("limit_strategy", "first")
            why.append(f"limit={cfg['limit']} (run.limit_strategy={strategy})")
    reason = "not in " + " / ".join(dict.fromkeys(why)) if why else "not in the data"
    return f"{', '.join(missing)}: {reason}"
