"""The terminal summary of a run and of a sweep: the headline first and marked, slices in the task's order, metric
rows that repeat another (or are empty) folded into one line, every table at most MAX_WIDTH columns wide.

Long because it holds both terminal views, a run's tables and a sweep's side-by-side table, which share the
folding, the width rules and the cell text."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from recbench.report.numbers import cell_text, fmt, number
from recbench.store.schema import JOB_FAILED, SchemaError, read_job_failed

#: widest terminal table (characters); wider content is split into several tables or wrapped
MAX_WIDTH = 120

#: metrics kept in samples.jsonl but not shown in metric tables (bookkeeping, not a score)
PSEUDO_METRICS = ("parsed",)

#: what "repaired" means, under a run's table when some answers were repaired or failed
REPAIRED_LEGEND = ("repaired = answers read after a fix-up by the method's parser (e.g. an echoed scale or extra text "
                   "removed, a near-miss title matched); they count as parsed, failures as not")

HEADLINE_MARK = "★"


# ---- numbers: recbench.report.numbers, finite only (inf and text show as '—') ------------------------------
def _same(a: Optional[dict[str, Any]], b: Optional[dict[str, Any]]) -> bool:
    """Two slice statistics are equal: mean, CI bounds (to 1e-9) and n."""
    if not a or not b:
        return not a and not b
    if a.get("n") != b.get("n"):
        return False
    for k in ("mean", "ci_low", "ci_high"):
        x, y = number(a.get(k), finite=True), number(b.get(k), finite=True)
        if (x is None) != (y is None) or (x is not None and not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)):
            return False
    return True


# ---- one run: slices, folding, tables ----------------------------------------------------------------------------
@dataclass
class SliceRow:
    """One table row: 'all' or 'key=value', its example count and its metric block."""

    label: str
    n: Optional[int]
    metrics: dict[str, Any]
    last_of_group: bool = False


def slice_rows(metrics: dict[str, Any]) -> list[SliceRow]:
    """'all', then every breakdown value in the order metrics.json holds them (the task's order, see
    Task.slice_values), one group per breakdown key."""
    rows = [SliceRow("all", metrics["counts"]["examples"], metrics["metrics"], last_of_group=True)]
    for key, vals in (metrics.get("breakdown") or {}).items():
        group = [SliceRow(f"{key}={v}", b.get("n"), b.get("metrics") or {}) for v, b in vals.items()]
        if group:
            group[-1].last_of_group = True
        rows += group
    return rows


@dataclass
class Folded:
    """The metric columns a table shows, and what was left out of it."""

    shown: list[str]
    same_as: dict[str, list[str]]  # shown metric -> metrics equal to it on every slice (not shown)
    empty: list[str]  # metrics with no value on any slice (not shown)

    def notes(self) -> list[str]:
        """'ptc_parsed = ptc on every slice', 'no value on any slice: cmr'."""
        out = [" = ".join([*same, kept]) + " on every slice" for kept, same in self.same_as.items() if same]
        if self.empty:
            out.append(f"no value on any slice: {', '.join(self.empty)}")
        return out


def metric_order(metrics: dict[str, Any]) -> list[str]:
    """Metric names of a run, the headline first, then in metrics.json's order (pseudo-metrics left out)."""
    names = [m for m in metrics["metrics"] if m not in PSEUDO_METRICS]
    for rows in (metrics.get("breakdown") or {}).values():
        for b in rows.values():
            names += [m for m in (b.get("metrics") or {}) if m not in PSEUDO_METRICS and m not in names]
    head = metrics.get("headline_metric")
    return ([head] if head in names else []) + [m for m in names if m != head]


def fold(metrics: dict[str, Any], rows: Optional[list[SliceRow]] = None) -> Folded:
    """Metrics to show: a metric equal to an earlier one on every slice (mean, CI and n) is folded into it, a metric
    with no value on any slice is left out; the headline is always shown."""
    rows = rows if rows is not None else slice_rows(metrics)
    head = metrics.get("headline_metric")
    shown: list[str] = []
    same_as: dict[str, list[str]] = {}
    empty: list[str] = []
    for name in metric_order(metrics):
        column = [r.metrics.get(name) for r in rows]
        if name != head and all(number((s or {}).get("mean"), finite=True) is None for s in column):
            empty.append(name)
            continue
        twin = next((k for k in shown if all(_same(s, r.metrics.get(k)) for s, r in zip(column, rows))), None)
        if twin is not None and name != head:
            same_as[twin].append(name)
            continue
        shown.append(name)
        same_as[name] = []
    return Folded(shown, same_as, empty)


def table_width(widths: list[int]) -> int:
    """Width of a rich table with the default box, edges and one space of padding on each side of every column."""
    return sum(w + 2 for w in widths) + len(widths) + 1


def chunk_columns(fixed: list[int], columns: list[tuple[str, int]], width: int = MAX_WIDTH) -> list[list[str]]:
    """Split metric columns (name, content width) into consecutive groups that fit `width` beside the fixed columns;
    a column too wide on its own gets a group of its own (rich wraps it)."""
    groups: list[list[str]] = [[]]
    used: list[int] = []
    for name, w in columns:
        if groups[-1] and table_width(fixed + used + [w]) > width:
            groups.append([])
            used = []
        groups[-1].append(name)
        used.append(w)
    return [g for g in groups if g]


def _header(name: str, metrics: dict[str, Any]) -> str:
    mark = f"{HEADLINE_MARK} " if name == metrics.get("headline_metric") else ""
    return mark + name + fallback_note(metrics, name)


def run_tables(metrics: dict[str, Any], width: int = MAX_WIDTH) -> tuple[list[Any], Folded, bool]:
    """The run's rich tables (rows = slices, columns = shown metrics), the folding, and whether every cell has its
    CI. Every metric with its CI when that fits one table of `width`; else the headline with its CI and the other
    metrics as means (their CIs stay in metrics.json), in as few tables as fit."""
    from rich.table import Table
    from rich.text import Text

    rows = slice_rows(metrics)
    folded = fold(metrics, rows)
    head = metrics.get("headline_metric")
    fixed = [max(len("slice"), *(len(r.label) for r in rows)), max(1, *(len(str(r.n)) for r in rows))]

    def columns(cells: dict[str, list[str]]) -> list[tuple[str, int]]:
        return [(m, max(len(_header(m, metrics)), *(len(c) for c in cells[m]))) for m in folded.shown]

    cells = {m: [cell_text(r.metrics.get(m), r.n) for r in rows] for m in folded.shown}
    with_ci = table_width(fixed + [w for _, w in columns(cells)]) <= width
    if not with_ci:
        cells.update({m: [cell_text(r.metrics.get(m), r.n, ci=m == head) for r in rows] for m in folded.shown})
    groups = chunk_columns(fixed, columns(cells), width)
    title = f"{metrics['task']['name']} | model={metrics['model']} | method={metrics['method']}"
    tables = []
    for i, group in enumerate(groups):
        t = Table(title=title if i == 0 else "more metrics", title_justify="left")
        t.add_column("slice", no_wrap=True)
        t.add_column("n", justify="right")
        for m in group:
            t.add_column(_header(m, metrics), overflow="fold")
        for j, r in enumerate(rows):
            t.add_row(Text(r.label), Text("" if r.n is None else str(r.n)), *(Text(cells[m][j]) for m in group),
                      end_section=r.last_of_group and j < len(rows) - 1)
        tables.append(t)
    return tables, folded, with_ci


def console(width: int = MAX_WIDTH) -> Any:
    """A rich console at most `width` wide (narrower on a narrower terminal)."""
    from rich.console import Console

    probe = Console()
    return Console(width=min(width, probe.width) if probe.is_terminal else width)


# ---- what the app prints --------------------------------------------------------------------------------------------
def fallback_note(metrics: dict[str, Any], name: str) -> str:
    """' (3 of 3 fallback)' for a metric scored with the task's fallback value on failed answers, else ''."""
    n_fb = (metrics.get("extra") or {}).get("n_fallback")
    if not n_fb or name.endswith("_parsed") or name in PSEUDO_METRICS:
        return ""
    return f" ({int(n_fb)} of {metrics['counts']['examples']} fallback)"


def _run_files(metrics: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config.yaml, versions.json) of the run dir, or empty dicts where they cannot be read."""
    import yaml

    d = Path(str(metrics.get("run_dir", "")))
    try:
        cfg = yaml.safe_load((d / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        cfg = {}
    try:
        versions = json.loads((d / "versions.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        versions = {}
    return cfg, versions


def selection_line(metrics: dict[str, Any], cfg: dict[str, Any]) -> str:
    """Which examples the run evaluated: all, or `limit` chosen by run.limit_strategy (stratified by which key)."""
    limit = cfg.get("limit")
    if limit is None:
        return f"examples: all {metrics['counts']['examples']}"
    strategy = (cfg.get("run") or {}).get("limit_strategy", "first")
    how = {"first": "the first in file order", "random": f"at random (seed {cfg.get('seed', 0)})"}.get(strategy)
    if how is None:
        keys = list(metrics.get("breakdown") or {})
        how = f"stratified by {keys[0]}" if keys else "stratified"
        if keys:
            sizes = ", ".join(f"{v}: {b.get('n', '?')}" for v, b in metrics["breakdown"][keys[0]].items())
            how += f" ({sizes})"
    return f"examples: limit={limit}, chosen {how} (run.limit_strategy={strategy})"


def headline_text(metrics: dict[str, Any]) -> str:
    """'★ ptc 0.564 [0.453, 0.667]' for the run's headline metric over all examples."""
    head = metrics.get("headline_metric")
    return f"{HEADLINE_MARK} {head} {cell_text(metrics['metrics'].get(head), metrics['counts']['examples'])}"


def print_summary(metrics: dict[str, Any], brief: bool = False) -> None:
    """The run on the terminal: its tables (headline first and marked, slices in the task's order, repeated or empty
    metrics folded into one line), counts, parse failures, the examples chosen, cache use and the run dir; `brief`
    (a sweep job): one line, the sweep ends with a table of all its runs."""
    from rich.markup import escape

    c = metrics["counts"]
    inv = metrics["this_invocation"]
    con = console()
    if brief:
        con.print(escape(f"{metrics['task']['name']} | model={metrics['model']} | method={metrics['method']}: "
                         f"{headline_text(metrics)} | examples {c['examples']} | parse failures {c['parse_failed']} | "
                         f"wall {inv['total_wall_time_s']:.1f}s"), highlight=False)
        return
    cfg, versions = _run_files(metrics)
    tables, folded, with_ci = run_tables(metrics, con.width)
    for t in tables:
        con.print(t)
    lines = [f"{HEADLINE_MARK} = headline metric; cells: mean [95% bootstrap CI]; n = examples in the slice"
             if with_ci else f"{HEADLINE_MARK} = headline metric, mean [95% bootstrap CI]; other metrics: mean (CIs in "
                             "metrics.json); n = examples"]
    notes = folded.notes()
    if notes:
        lines.append("folded (all values in metrics.json): " + "; ".join(notes))
    identity = versions.get("backend_identity") or {}
    calls = (f"answers read from file {inv['backend_calls']}" if identity.get("kind") == "predictions"
             else f"backend calls {inv['backend_calls']}")
    extra = metrics.get("extra") or {}
    if c.get("parse_repaired") or c.get("parse_failed"):
        lines.append(REPAIRED_LEGEND)
    if extra.get("n_fallback"):
        lines.append(f"fallback: {extra['n_fallback']} of {c['examples']} failed answers scored as "
                     f"{extra.get('fallback_rating', 'the fallback value')} (metrics marked 'fallback'; *_parsed "
                     "metrics leave them out)")
    lines += [
        f"examples {c['examples']} | parsed {c['parsed']} | parse failures {c['parse_failed']} "
        f"({(c['parse_failure_rate'] or 0):.1%}) | repaired {c['parse_repaired']} | "
        f"backend errors {c['backend_errors']}",
        selection_line(metrics, cfg),
        f"this run: {calls} | cache hits {inv['cache_hits']} | "
        f"skipped (already finished) {inv['examples_skipped']} | wall {inv['total_wall_time_s']:.1f}s",
    ]
    task_lines = extra.get("summary")  # a task's own verdict lines (Task.run_facts 'summary': a list of text)
    lines += [str(x) for x in task_lines] if isinstance(task_lines, list) else []
    from recbench.audits import contamination, noise, templates

    # the audits' verdict lines, from the same metrics.json blocks the report's audit tables read
    lines += [x for x in (templates.summary_line(extra),  # audit.templates=K: per-template score and the effect test
                          noise.summary_line(extra),  # audit.noise.*: answers changed, headline shift, floor
                          contamination.summary_line(extra))  # contamination.probe_run=DIR: the gap test
              if x]
    con.print(escape("\n".join(lines)), highlight=False)
    con.print(escape(f"run dir: {metrics['run_dir']}"), soft_wrap=True, highlight=False)  # a path stays in one piece
    if c.get("model_calls") and c.get("finish_length", 0) > 0.2 * c["model_calls"]:
        con.print(f"[yellow]warning: {c['finish_length']} of {c['model_calls']} answers "
                  f"({c['finish_length'] / c['model_calls']:.0%}) hit the token limit (finish_reason=length): "
                  "raise method.max_tokens[/yellow]")


# ---- a sweep: one side-by-side table of its runs ------------------------------------------------------------------
@dataclass
class SweepRun:
    """One job of a sweep: its metrics.json (None when it failed before writing one) and its run dir."""

    run_dir: Path
    metrics: Optional[dict[str, Any]]
    error: Optional[str] = None


def sweep_runs(sweep_dir: str | Path) -> list[SweepRun]:
    """Every job under a sweep dir that left a metrics.json or a job_failed.json."""
    root = Path(sweep_dir)
    dirs = sorted({p.parent for pat in ("metrics.json", "job_failed.json") for p in root.rglob(pat)
                   # a shard that finished is shown by its merged run (a failed shard job is shown)
                   if pat == "job_failed.json" or not (p.parent / "shard.json").is_file()})
    out = []
    for d in dirs:
        metrics = error = None
        try:
            metrics = json.loads((d / "metrics.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
        if (d / JOB_FAILED).is_file():
            try:
                error = read_job_failed(d).error  # type: ignore[union-attr]
            except SchemaError:
                error = "failed (job_failed.json unreadable)"
        out.append(SweepRun(d, metrics, error))
    return out


def _higher_is_better(metrics: dict[str, Any], name: str) -> Optional[bool]:
    """The metric's direction from metric_info: True/False, None when it has none or it is unknown."""
    return ((metrics.get("metric_info") or {}).get(name) or {}).get("higher_is_better")


def _run_label(run: SweepRun, root: Path) -> str:
    """'model · method · variant' of a run (variant = its override dir name, unless 'default')."""
    m = run.metrics
    rel = run.run_dir.relative_to(root).parts if run.run_dir.is_relative_to(root) else run.run_dir.parts
    if m is None:  # a job that failed before writing metrics.json: its model, method and variant from the path
        return " · ".join(x for x in rel[1:] if x != "default") or str(run.run_dir)
    variant = rel[3] if len(rel) > 3 and rel[3] != "default" else ""
    return " · ".join(p for p in (str(m["model"]), str(m["method"]), variant) if p)


def sweep_table(sweep_dir: str | Path, width: int = MAX_WIDTH) -> Optional[Any]:
    """A rich table of a sweep's runs side by side (rows = runs, best headline first per task; columns = the
    headline with its CI, then as many other metrics' means as fit `width`), or None when there is no run."""
    from rich.table import Table
    from rich.text import Text

    root = Path(sweep_dir)
    runs = sweep_runs(root)
    if not runs:
        return None
    done = [r for r in runs if r.metrics is not None]
    tasks = list(dict.fromkeys(str(r.metrics["task"]["name"]) for r in done))  # type: ignore[index]
    heads = {str(r.metrics["task"]["name"]): r.metrics["headline_metric"] for r in done}  # type: ignore[index]

    def key(r: SweepRun) -> tuple:
        if r.metrics is None:
            return (len(tasks), 0.0, str(r.run_dir))
        t, h = str(r.metrics["task"]["name"]), r.metrics["headline_metric"]
        v = number((r.metrics["metrics"].get(h) or {}).get("mean"), finite=True)
        better = _higher_is_better(r.metrics, h)
        sign = 0.0 if better is None else -1.0 if better else 1.0  # no direction: keep the label order
        return (tasks.index(t), math.inf if v is None else sign * v, _run_label(r, root))

    runs.sort(key=key)
    one_task = len(tasks) == 1
    extra: list[str] = []
    if one_task:  # other metrics shared by the runs, each once (a metric equal to another on every run is left out)
        names = list(dict.fromkeys(m for r in done for m in metric_order(r.metrics)  # type: ignore[arg-type]
                                   if m != heads[tasks[0]]))
        for m in names:
            vals = [number((r.metrics["metrics"].get(m) or {}).get("mean"), finite=True)  # type: ignore[index]
                    for r in done]
            if all(v is None for v in vals):
                continue
            if any(all(a == number((r.metrics["metrics"].get(k) or {}).get("mean"), finite=True)  # type: ignore[index]
                       for a, r in zip(vals, done)) for k in [heads[tasks[0]], *extra]):
                continue
            extra.append(m)
    labels = [_run_label(r, root) for r in runs]
    head_cells = []
    for r in runs:
        if r.metrics is None:
            head_cells.append(f"failed: {r.error}")
            continue
        h = r.metrics["headline_metric"]
        text = cell_text(r.metrics["metrics"].get(h), r.metrics["counts"]["examples"])
        head_cells.append(text if one_task else f"{h} {text}")
    fixed_headers = (["task"] if not one_task else []) + ["run", "n", "parse fail"]
    fixed_cells: list[list[str]] = []
    for r, lab in zip(runs, labels):
        row = [str(r.metrics["task"]["name"]) if r.metrics else "?"] if not one_task else []
        c = r.metrics["counts"] if r.metrics else None
        row += [lab, str(c["examples"]) if c else "—", f"{(c['parse_failure_rate'] or 0):.0%}" if c else "—"]
        fixed_cells.append(row)
    head_header = f"{HEADLINE_MARK} {heads[tasks[0]]}" if one_task else f"{HEADLINE_MARK} headline"
    widths = [max(len(h), *(len(row[i]) for row in fixed_cells)) for i, h in enumerate(fixed_headers)]
    run_col = fixed_headers.index("run")
    widths[run_col] = min(widths[run_col], 40)  # long override names wrap
    head_w = max(len(head_header), *(min(len(c), 40) for c in head_cells))
    shown = []
    for m in extra:
        w = max(len(m), 6)
        if table_width(widths + [head_w] + [max(len(x), 6) for x in shown] + [w]) > width:
            break
        shown.append(m)
    left = [m for m in extra if m not in shown]
    title = f"sweep: {len(runs)} runs" + (f" of {tasks[0]}" if one_task else "") + " (best headline first)"
    t = Table(title=title, title_justify="left",
              caption=("more metrics in the report: " + ", ".join(left)) if left else None, caption_justify="left")
    for h in fixed_headers:
        t.add_column(h, justify="right" if h in ("n", "parse fail") else "left", overflow="fold",
                     max_width=40 if h == "run" else None)
    t.add_column(head_header, overflow="fold")
    for m in shown:
        t.add_column(m, justify="right")
    for r, row, hc in zip(runs, fixed_cells, head_cells):
        means = [fmt((r.metrics["metrics"].get(m) or {}).get("mean"), finite=True) if r.metrics else "" for m in shown]
        t.add_row(*(Text(x) for x in [*row, hc, *means]))
    return t


def print_sweep(sweep_dir: str | Path) -> None:
    """The sweep's side-by-side table on the terminal (nothing when the sweep left no run)."""
    t = sweep_table(sweep_dir)
    if t is not None:
        console().print(t)


def iter_lines(renderables: list[Any], width: int = MAX_WIDTH) -> Iterator[str]:
    """The text lines rich prints for renderables at `width` (for tests and measurements)."""
    import io

    from rich.console import Console

    con = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    for r in renderables:
        con.print(r)
    yield from con.export_text().splitlines()
