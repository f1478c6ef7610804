"""A sweep's runs side by side on the terminal: rows = runs (best headline first per task), columns = the headline
with its CI, then as many other metrics' means as fit the width."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from recbench.cli.summary import HEADLINE_MARK, mean_of, metric_order, summary_cell
from recbench.cli.terminal import MAX_WIDTH, console, table_width
from recbench.report.numbers import fmt
from recbench.store.schema import JOB_FAILED, RunResult, SchemaError, read_job_failed, read_result


@dataclass
class SweepJob:
    """One job of a sweep: its result (None when it failed before writing metrics.json) and its run dir."""

    run_dir: Path
    result: Optional[RunResult]
    error: Optional[str] = None


def sweep_jobs(sweep_dir: str | Path) -> list[SweepJob]:
    """Every job under a sweep dir that left a metrics.json or a job_failed.json."""
    root = Path(sweep_dir)
    dirs = sorted({p.parent for pat in ("metrics.json", JOB_FAILED) for p in root.rglob(pat)
                   # a shard that finished is shown by its merged run (a failed shard job is shown)
                   if pat == JOB_FAILED or not (p.parent / "shard.json").is_file()})
    out = []
    for d in dirs:
        result = error = None
        try:
            result = read_result(d)
        except SchemaError:
            pass
        if (d / JOB_FAILED).is_file():
            try:
                error = read_job_failed(d).error  # type: ignore[union-attr]
            except SchemaError:
                error = "failed (job_failed.json unreadable)"
        out.append(SweepJob(d, result, error))
    return out


def _job_label(job: SweepJob, root: Path) -> str:
    """'model · method · variant' of a run (variant = its override dir name, unless 'default')."""
    r = job.result
    rel = job.run_dir.relative_to(root).parts if job.run_dir.is_relative_to(root) else job.run_dir.parts
    if r is None:  # a job that failed before writing metrics.json: its model, method and variant from the path
        return " · ".join(x for x in rel[1:] if x != "default") or str(job.run_dir)
    variant = rel[3] if len(rel) > 3 and rel[3] != "default" else ""
    return " · ".join(p for p in (r.model, r.method, variant) if p)


def _sort_key(job: SweepJob, tasks: list[str], root: Path) -> tuple:
    """Task order, then the best headline first (by the metric's direction), then the label."""
    r = job.result
    if r is None:
        return (len(tasks), 0.0, str(job.run_dir))
    v = mean_of(r.metrics.get(r.headline_metric))
    info = r.metric_info.get(r.headline_metric)
    better = info.higher_is_better if info is not None else None
    sign = 0.0 if better is None else -1.0 if better else 1.0  # no direction: keep the label order
    return (tasks.index(r.task_name), math.inf if v is None else sign * v, _job_label(job, root))


def _other_metrics(done: list[RunResult], head: str) -> list[str]:
    """Other metrics shared by the runs of one task, each once (one equal to another on every run is left out)."""
    extra: list[str] = []
    for m in dict.fromkeys(m for r in done for m in metric_order(r) if m != head):
        vals = [mean_of(r.metrics.get(m)) for r in done]
        if all(v is None for v in vals):
            continue
        if any(all(a == mean_of(r.metrics.get(k)) for a, r in zip(vals, done)) for k in [head, *extra]):
            continue
        extra.append(m)
    return extra


def _fixed_cells(jobs: list[SweepJob], labels: list[str], one_task: bool) -> list[list[str]]:
    """(task,) run, n and parse-failure cells of each job."""
    out = []
    for j, lab in zip(jobs, labels):
        r = j.result
        row = [r.task_name if r else "?"] if not one_task else []
        c = r.counts if r else None
        row += [lab, str(c.examples) if c else "—", f"{(c.parse_failure_rate or 0):.0%}" if c else "—"]
        out.append(row)
    return out


def _head_cell(job: SweepJob, one_task: bool) -> str:
    if job.result is None:
        return f"failed: {job.error}"
    r = job.result
    text = summary_cell(r.metrics.get(r.headline_metric), r.counts.examples)
    return text if one_task else f"{r.headline_metric} {text}"


def sweep_table(sweep_dir: str | Path, width: int = MAX_WIDTH) -> Optional[Any]:
    """A rich table of a sweep's runs side by side, or None when there is no run."""
    from rich.table import Table
    from rich.text import Text

    root = Path(sweep_dir)
    jobs = sweep_jobs(root)
    if not jobs:
        return None
    done = [j.result for j in jobs if j.result is not None]
    tasks = list(dict.fromkeys(r.task_name for r in done))
    jobs.sort(key=lambda j: _sort_key(j, tasks, root))
    one_task = len(tasks) == 1
    extra = _other_metrics(done, done[0].headline_metric) if one_task else []
    fixed_cells = _fixed_cells(jobs, [_job_label(j, root) for j in jobs], one_task)
    head_cells = [_head_cell(j, one_task) for j in jobs]
    fixed_headers = (["task"] if not one_task else []) + ["run", "n", "parse fail"]
    head_header = f"{HEADLINE_MARK} {done[0].headline_metric}" if one_task else f"{HEADLINE_MARK} headline"
    widths = [max(len(h), *(len(row[i]) for row in fixed_cells)) for i, h in enumerate(fixed_headers)]
    run_col = fixed_headers.index("run")
    widths[run_col] = min(widths[run_col], 40)  # long override names wrap
    head_w = max(len(head_header), *(min(len(c), 40) for c in head_cells))
    shown: list[str] = []
    for m in extra:
        if table_width(widths + [head_w] + [max(len(x), 6) for x in shown] + [max(len(m), 6)]) > width:
            break
        shown.append(m)
    left = [m for m in extra if m not in shown]
    title = f"sweep: {len(jobs)} runs" + (f" of {tasks[0]}" if one_task else "") + " (best headline first)"
    t = Table(title=title, title_justify="left",
              caption=("more metrics in the report: " + ", ".join(left)) if left else None, caption_justify="left")
    for h in fixed_headers:
        t.add_column(h, justify="right" if h in ("n", "parse fail") else "left", overflow="fold",
                     max_width=40 if h == "run" else None)
    t.add_column(head_header, overflow="fold")
    for m in shown:
        t.add_column(m, justify="right")
    for j, row, hc in zip(jobs, fixed_cells, head_cells):
        means = [fmt(mean_of(j.result.metrics.get(m)), finite=True) if j.result else "" for m in shown]
        t.add_row(*(Text(x) for x in [*row, hc, *means]))
    return t


def print_sweep(sweep_dir: str | Path) -> None:
    """The sweep's side-by-side table on the terminal (nothing when the sweep left no run)."""
    t = sweep_table(sweep_dir)
    if t is not None:
        console().print(t)
