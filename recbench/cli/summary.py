"""The terminal summary of a run (a `RunResult`): the headline first and marked, slices in the task's order, metric
rows that repeat another (or are empty) folded into one line, every table at most MAX_WIDTH columns wide. A sweep's
side-by-side table is cli/sweep_table.py."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from recbench.api.audits import terminal_lines
from recbench.cli.terminal import MAX_WIDTH, chunk_columns, console, table_width, wrap_lines
from recbench.report.legends import legend_lines
from recbench.report.numbers import cell_text, number
from recbench.store.schema import Counts, MetricSummary, RunResult

#: metrics kept in samples.jsonl but not shown in metric tables (bookkeeping, not a score)
PSEUDO_METRICS = ("parsed",)

#: what "repaired" means, under a run's table when some answers were repaired or failed
REPAIRED_LEGEND = ("repaired = answers parsed after a fix-up (e.g. extra text removed, a near-miss title matched); "
                   "counted as parsed")

HEADLINE_MARK = "★"


# ---- numbers: recbench.report.numbers, finite only (inf and text show as '—') ------------------------------
def summary_cell(s: Optional[MetricSummary], slice_n: Optional[int] = None, ci: bool = True) -> str:
    """'0.564 [0.453, 0.667]' of a metric summary (recbench.report.numbers.cell_text); '—' for none."""
    return cell_text(vars(s) if s is not None else None, slice_n, ci=ci)


def mean_of(s: Optional[MetricSummary]) -> Optional[float]:
    """The finite mean of a metric summary, else None."""
    return number(s.mean, finite=True) if s is not None else None


def _same(a: Optional[MetricSummary], b: Optional[MetricSummary]) -> bool:
    """Two slice statistics are equal: mean, CI bounds (to 1e-9) and n."""
    if a is None or b is None:
        return a is None and b is None
    if a.n != b.n:
        return False
    for k in ("mean", "ci_low", "ci_high"):
        x, y = number(getattr(a, k), finite=True), number(getattr(b, k), finite=True)
        if (x is None) != (y is None) or (x is not None and not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)):
            return False
    return True


# ---- one run: slices, folding, tables ----------------------------------------------------------------------------
@dataclass
class SliceRow:
    """One table row: 'all' or 'key=value', its example count and its metric block."""

    label: str
    n: Optional[int]
    metrics: dict[str, MetricSummary]
    last_of_group: bool = False


def slice_rows(result: RunResult) -> list[SliceRow]:
    """'all', then every breakdown value in the order metrics.json holds them (the task's order, see
    Task.slice_values), one group per breakdown key."""
    rows = [SliceRow("all", result.counts.examples, result.metrics, last_of_group=True)]
    for key, vals in result.breakdown.items():
        group = [SliceRow(f"{key}={v}", b.n, b.metrics) for v, b in vals.items()]
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


def metric_order(result: RunResult) -> list[str]:
    """Metric names of a run, the headline first, then in metrics.json's order (pseudo-metrics left out)."""
    names = [m for m in result.metrics if m not in PSEUDO_METRICS]
    for rows in result.breakdown.values():
        for b in rows.values():
            names += [m for m in b.metrics if m not in PSEUDO_METRICS and m not in names]
    head = result.headline_metric
    return ([head] if head in names else []) + [m for m in names if m != head]


def fold(result: RunResult, rows: Optional[list[SliceRow]] = None) -> Folded:
    """Metrics to show: a metric equal to an earlier one on every slice (mean, CI and n) is folded into it, a metric
    with no value on any slice is left out; the headline is always shown."""
    rows = rows if rows is not None else slice_rows(result)
    head = result.headline_metric
    shown: list[str] = []
    same_as: dict[str, list[str]] = {}
    empty: list[str] = []
    for name in metric_order(result):
        column = [r.metrics.get(name) for r in rows]
        if name != head and all(mean_of(s) is None for s in column):
            empty.append(name)
            continue
        twin = next((k for k in shown if all(_same(s, r.metrics.get(k)) for s, r in zip(column, rows))), None)
        if twin is not None and name != head:
            same_as[twin].append(name)
            continue
        shown.append(name)
        same_as[name] = []
    return Folded(shown, same_as, empty)


def _header(name: str, result: RunResult) -> str:
    mark = f"{HEADLINE_MARK} " if name == result.headline_metric else ""
    return mark + name + fallback_note(result, name)


def run_title(result: RunResult) -> str:
    """'TASK | model=MODEL | method=METHOD'."""
    return f"{result.task_name} | model={result.model} | method={result.method}"


def run_tables(result: RunResult, width: int = MAX_WIDTH) -> tuple[list[Any], Folded, bool]:
    """The run's rich tables (rows = slices, columns = shown metrics), the folding, and whether every cell has its
    CI. Every metric with its CI when that fits one table of `width`; else the headline with its CI and the other
    metrics as means (their CIs stay in metrics.json), in as few tables as fit."""
    from rich.table import Table
    from rich.text import Text

    rows = slice_rows(result)
    folded = fold(result, rows)
    head = result.headline_metric
    fixed = [max(len("slice"), *(len(r.label) for r in rows)), max(1, *(len(str(r.n)) for r in rows))]

    def columns(cells: dict[str, list[str]]) -> list[tuple[str, int]]:
        return [(m, max(len(_header(m, result)), *(len(c) for c in cells[m]))) for m in folded.shown]

    cells = {m: [summary_cell(r.metrics.get(m), r.n) for r in rows] for m in folded.shown}
    with_ci = table_width(fixed + [w for _, w in columns(cells)]) <= width
    if not with_ci:
        cells.update({m: [summary_cell(r.metrics.get(m), r.n, ci=m == head) for r in rows] for m in folded.shown})
    groups = chunk_columns(fixed, columns(cells), width)
    title = run_title(result)
    tables = []
    for i, group in enumerate(groups):
        t = Table(title=title if i == 0 else "more metrics", title_justify="left")
        t.add_column("slice", no_wrap=True)
        t.add_column("n", justify="right")
        for m in group:
            t.add_column(_header(m, result), overflow="fold")
        for j, r in enumerate(rows):
            t.add_row(Text(r.label), Text("" if r.n is None else str(r.n)), *(Text(cells[m][j]) for m in group),
                      end_section=r.last_of_group and j < len(rows) - 1)
        tables.append(t)
    return tables, folded, with_ci


# ---- what the app prints --------------------------------------------------------------------------------------------
def fallback_note(result: RunResult, name: str) -> str:
    """' (3 of 3 fallback)' for a metric scored with the task's fallback value on failed answers, else ''."""
    n_fb = result.facts.fallback_count
    if not n_fb or name.endswith("_parsed") or name in PSEUDO_METRICS:
        return ""
    return f" ({n_fb} of {result.counts.examples} fallback)"


def task_meanings(cfg: dict[str, Any]) -> dict[str, str]:
    """The meanings the run's task class declares for its metrics (cli/task_index.json, no task import), by name."""
    from recbench.cli.task_index import entry

    try:
        return {m["name"]: m["meaning"] for m in entry(str(cfg["task"]["_target_"]))["metrics"] if m.get("meaning")}
    except (KeyError, TypeError, ImportError, AttributeError, ValueError):
        return {}


def _run_files(result: RunResult) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config.yaml, versions.json) of the run dir, or empty dicts where they cannot be read."""
    import yaml

    d = Path(result.run_dir)
    try:
        cfg = yaml.safe_load((d / "config.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        cfg = {}
    try:
        versions = json.loads((d / "versions.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        versions = {}
    return cfg, versions


def selection_line(result: RunResult, cfg: dict[str, Any]) -> str:
    """Which examples the run evaluated: all, or `limit` chosen by run.limit_strategy (stratified by which key)."""
    limit = cfg.get("limit")
    if limit is None:
        return f"examples: all {result.counts.examples}"
    strategy = (cfg.get("run") or {}).get("limit_strategy", "first")
    how = {"first": "the first in file order", "random": f"at random (seed {cfg.get('seed', 0)})"}.get(strategy)
    if how is None:
        keys = list(result.breakdown)
        how = f"stratified by {keys[0]}" if keys else "stratified"
        if keys:
            sizes = ", ".join(f"{v}: {b.n}" for v, b in result.breakdown[keys[0]].items())
            how += f" ({sizes})"
    return f"examples: limit={limit}, chosen {how} (run.limit_strategy={strategy})"


def headline_text(result: RunResult) -> str:
    """'★ ptc 0.564 [0.453, 0.667]' for the run's headline metric over all examples."""
    head = result.headline_metric
    return f"{HEADLINE_MARK} {head} {summary_cell(result.metrics.get(head), result.counts.examples)}"


def cut_lines(c: Counts, cfg: dict[str, Any]) -> list[str]:
    """'cut: 11 of 120 answers (9.2%) hit the token limit ...' with the knob to raise, when any answer was cut."""
    if not c.finish_length:
        return []
    total = c.model_calls or c.examples
    share = f" ({c.finish_length / total:.1%})" if total else ""
    now = (cfg.get("method") or {}).get("max_tokens")
    knob = (f"method.max_tokens={now}; raise it, e.g. method.max_tokens={2 * int(now)}"
            if isinstance(now, int) and now > 0 else "raise method.max_tokens")
    return [f"cut: {c.finish_length} of {total} answers{share} hit the token limit (finish_reason=length; {knob})"]


def count_lines(result: RunResult, cfg: dict[str, Any], versions: dict[str, Any]) -> list[str]:
    """The lines under a run's tables: repaired and fallback legends, counts, the examples chosen, cache use."""
    c, inv, facts = result.counts, result.this_invocation, result.facts
    identity = versions.get("backend_identity") or {}
    calls = (f"answers read from file {inv.backend_calls}" if identity.get("kind") == "predictions"
             else f"backend calls {inv.backend_calls}")
    lines = [REPAIRED_LEGEND] if c.parse_repaired or c.parse_failed else []
    if facts.fallback_count:
        value = "the fallback value" if facts.fallback_value is None else str(facts.fallback_value)
        lines.append(f"fallback: {facts.fallback_count} of {c.examples} failed answers scored as "
                     f"{value} (metrics marked 'fallback'; *_parsed "
                     "metrics leave them out)")
    return lines + [
        f"examples {c.examples} | parsed {c.parsed} | parse failures {c.parse_failed} "
        f"({(c.parse_failure_rate or 0):.1%}) | repaired {c.parse_repaired} | backend errors {c.backend_errors}",
        *cut_lines(c, cfg),
        selection_line(result, cfg),
        f"this run: {calls} | cache hits {inv.cache_hits} | "
        f"skipped (already finished) {inv.examples_skipped} | wall {inv.total_wall_time_s:.1f}s",
    ]


def print_summary(result: RunResult, brief: bool = False) -> None:
    """The run on the terminal: its tables (headline first and marked, slices in the task's order, repeated or empty
    metrics folded into one line), counts, parse failures, the examples chosen, cache use, the audits' lines and the
    run dir; `brief` (a sweep job): one line, the sweep ends with a table of all its runs."""
    from rich.markup import escape

    c = result.counts
    con = console()
    if brief:
        con.print(escape(f"{run_title(result)}: {headline_text(result)} | examples {c.examples} | parse failures "
                         f"{c.parse_failed} | wall {result.this_invocation.total_wall_time_s:.1f}s"),
                  highlight=False)
        return
    cfg, versions = _run_files(result)
    tables, folded, with_ci = run_tables(result, con.width)
    for t in tables:
        con.print(t)
    con.print(escape("\n".join(wrap_lines(legend_lines(folded.shown, task_meanings(cfg)), con.width))),
              highlight=False)
    lines = [f"{HEADLINE_MARK} = headline metric; cells: mean [95% bootstrap CI]; n = examples in the slice"
             if with_ci else f"{HEADLINE_MARK} = headline metric, mean [95% bootstrap CI]; other metrics: mean (CIs in "
                             "metrics.json); n = examples"]
    notes = folded.notes()
    if notes:
        lines.append("folded (all values in metrics.json): " + "; ".join(notes))
    lines += count_lines(result, cfg, versions)
    lines += result.facts.summary  # a task's own verdict lines (RunFacts.summary, written by Task.run_facts)
    lines += terminal_lines(result.audits)  # the audits' verdicts, from the blocks the report's audit tables read
    lines += judge_line(result.extra.get("judge"))
    con.print(escape("\n".join(wrap_lines(lines, con.width))), highlight=False)
    con.print(escape(f"run dir: {result.run_dir}"), soft_wrap=True, highlight=False)  # a path stays in one piece


def judge_line(block: Any) -> list[str]:
    """The judge pass in one line (metrics.json's `judge` block; docs/judges.md): who judged, how, how many answers
    did not parse, where the records are, and its calls of this invocation."""
    if not isinstance(block, dict):
        return []
    inv = block.get("this_invocation") or {}
    failed = f"{block.get('parse_failed', 0)} of {block.get('judged', 0)}"
    return [f"judge {block.get('name')} ({block.get('protocol')}{', judging its own answers' if block.get('self_judged') else ''}): "
            f"{failed} judge answers unparseable (their judge_* values undefined); records {block.get('records')}; "
            f"this run: judge calls {inv.get('backend_calls', 0)} | cache hits {inv.get('cache_hits', 0)}"]
