"""Significance in reports: compact letters per table column, marks against reference rows, and a comparisons
section (every pair's paired difference, CI and adjusted p, with a forest plot) — all from recbench.compare.

A column's family is the rows of that column: the letters say which rows are not distinguishable after Holm
correction within the column. The comparisons section uses, per task, the headline metric over all examples,
corrected over the task's pairs: exactly `python -m recbench.compare <the task's run dirs> --metric <headline>
--no-slices`.
"""
from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from recbench.report.plots import Plot, png
from recbench.report.tables import Cell, ReportView, Table, _header

log = logging.getLogger(__name__)
RESAMPLES = 4999  # bootstrap and first-pass permutation resamples per comparison in a report


@dataclass
class Significance:
    """What a report shows about significance: per-task comparisons, letters by (table, row, column)."""

    comparisons: list[Any] = field(default_factory=list)  # recbench.compare.Comparison, headline family per task
    letters: list[dict[str, Any]] = field(default_factory=list)  # table, row, column, metric, slice, letters
    tables: list[Table] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)


def _slice_of(source: str) -> Optional[str]:
    """'metrics.ptc.mean' -> 'all'; 'breakdown.difficulty.easy.metrics.ptc.mean' -> 'difficulty=easy'; else None."""
    parts = source.split(".")
    if parts[0] == "metrics":
        return "all"
    if parts[0] == "breakdown" and len(parts) >= 6:
        return f"{parts[1]}={parts[2]}"
    return None  # extra.* (corpus values) and pooled cells are not compared per example


class _Comparer:
    """Paired comparisons between report rows (systems = runs, seeds pooled), memoized per pair and metric."""

    def __init__(self, runs: list[Any]):
        from recbench.compare import load_systems

        self.systems = load_systems([r.dir for r in runs], pool_seeds_=True)
        self.by_dirs = {frozenset(str(r.dir.resolve()) for r in s.runs): s for s in self.systems}
        self._memo: dict[tuple[str, str, str], list[Any]] = {}

    def system(self, cell: Cell) -> Any:
        """The system behind a cell (None for derived, pooled or extra cells)."""
        if cell.missing or cell.derived or cell.pooled or not cell.sources:
            return None
        if any(_slice_of(s["path"]) is None for s in cell.sources):
            return None
        return self.by_dirs.get(frozenset(str(Path(s["run_dir"]).resolve()) for s in cell.sources))

    def pair(self, a: Any, b: Any, metric: str) -> list[Any]:
        """Every slice's comparison of a vs b on metric (uncorrected copies)."""
        from recbench.compare import CompareError, compare_pair

        key = (a.label, b.label, metric)
        if key not in self._memo:
            try:
                self._memo[key] = compare_pair(a, b, metrics=[metric], n_resamples=RESAMPLES, slices=True)
            except CompareError as e:
                log.info("report: %s vs %s on %s not compared: %s", a.label, b.label, metric, e)
                self._memo[key] = []
        return [dataclasses.replace(c) for c in self._memo[key]]

    def family(self, systems: list[Any], metric: str, slice_: str) -> list[Any]:
        """The corrected comparisons of every pair of systems on one metric and slice."""
        from recbench.compare import correct

        comps = [c for i, a in enumerate(systems) for b in systems[i + 1:] if a.task == b.task
                 for c in self.pair(a, b, metric) if c.slice == slice_]
        return correct(comps) if comps else []


def annotate_tables(tables: list[Table], comparer: _Comparer, out: Significance) -> None:
    """Letters on every column where at least two rows are runs of one task (the column is the family)."""
    from recbench.compare import letters

    for t in tables:
        for j, col in enumerate(t.columns):
            cells = [(labels, cells[j]) for labels, cells in t.rows]
            sys_cells = [(lbl, c, comparer.system(c)) for lbl, c in cells]
            sys_cells = [(lbl, c, s) for lbl, c, s in sys_cells if s is not None]
            if len(sys_cells) < 2:
                continue
            slices = {_slice_of(src["path"]) for _, c, _ in sys_cells for src in c.sources}
            tasks = {s.task for _, _, s in sys_cells}
            if len(slices) != 1 or len(tasks) != 1:
                continue
            metric, slice_ = sys_cells[0][1].metric, slices.pop()
            systems = list({s.label: s for _, _, s in sys_cells}.values())
            comps = comparer.family(systems, metric, slice_)
            if not comps:
                continue
            lettering = letters(comps, metric, slice_)
            for lbl, c, s in sys_cells:
                c.letters = lettering.get(s.label, "")
                out.letters.append({"table": t.id, "row": " / ".join(lbl), "column": " · ".join(x for x in col if x),
                                    "metric": metric, "slice": slice_, "letters": c.letters})


def mark_references(summary: Table, comparer: _Comparer) -> None:
    """In the summary, each model cell vs the `random` reference row and vs the best reference row of its column."""
    refs = [(lbl, cells) for lbl, cells in summary.rows if lbl[-1].startswith("reference")]
    models = [(lbl, cells) for lbl, cells in summary.rows if not lbl[-1].startswith("reference")]
    for j in range(len(summary.columns)):
        ref_cells = [(lbl[0], cells[j], comparer.system(cells[j])) for lbl, cells in refs]
        ref_cells = [x for x in ref_cells if x[2] is not None]
        if not ref_cells:
            continue
        hib = comparer_direction(ref_cells[0][1].metric)
        best = max(ref_cells, key=lambda x: x[1].mean if hib else -x[1].mean)
        random_ref = next((x for x in ref_cells if x[0] == "random"), None)
        for _, cells in models:
            c = cells[j]
            s = comparer.system(c)
            if s is None:
                continue
            marks = []
            for name, ref in (("random", random_ref), ("best reference", best)):
                if ref is None or ref[2].task != s.task:
                    continue
                comps = comparer.family([s, ref[2]], c.metric, "all")
                if not comps:
                    continue
                k = comps[0]
                verdict = ("better" if k.better == s.label else "worse") if k.significant else "not different"
                marks.append(f"vs {name} ({ref[0]}): {verdict}, p={k.p_adjusted:.3g}")
                if name == "random":
                    c.ref_mark = "▲" if k.significant and k.better == s.label else ("▼" if k.significant else "")
                else:
                    c.ref_mark += "†" if k.significant and k.better == s.label else ""
            if marks:
                c.note = "; ".join(x for x in (c.note, *marks) if x)


def comparer_direction(metric: str) -> bool:
    """Higher is better for the metric (registry)."""
    from recbench.metric_registry import metric_spec

    return metric_spec(metric).higher_is_better


def display_names(systems: list[Any], by_dir: dict[str, str]) -> dict[str, str]:
    """compare's system label -> the report's row label ('model · method', + seeds), unique."""
    names = {s.label: by_dir.get(str(s.runs[0].dir.resolve()), s.label) + (f" [{s.k} seeds]" if s.k > 1 else "")
             for s in systems}
    dup = {n for n in names.values() if list(names.values()).count(n) > 1}
    return {k: (f"{v} [{k}]" if v in dup else v) for k, v in names.items()}


def comparisons_section(runs: list[Any], view: ReportView, comparer: _Comparer, by_dir: dict[str, str],
                        out: Significance) -> None:
    """Per task: every pair on the headline metric (all examples), Holm over the task's pairs; table + forest plot."""
    by_task: dict[str, list[Any]] = {}
    for s in comparer.systems:
        by_task.setdefault(s.task, []).append(s)
    for task, systems in sorted(by_task.items()):
        metric = view.headlines.get(task)
        if len(systems) < 2 or not metric:
            continue
        comps = comparer.family(systems, metric, "all")
        if not comps:
            continue
        out.comparisons += comps
        name = display_names(systems, by_dir)
        cols = [("difference (a − b)",), ("95% CI",), ("p (Holm)",), ("verdict",)]
        rows = []
        for c in sorted(comps, key=lambda c: (-abs(c.diff) if math.isfinite(c.diff) else 0)):
            verdict = f"{name[c.better]} better" if c.better else "not distinguishable"
            rows.append(([name[c.run_a], name[c.run_b]],
                         [Cell(metric=metric, mean=c.diff, n=c.n, note=c.note),
                          Cell(metric=metric, shown=f"[{c.ci_low:.3f}, {c.ci_high:.3f}]"),
                          Cell(metric=metric, mean=c.p_adjusted, shown=f"{c.p_adjusted:.3g}"),
                          Cell(metric=metric, shown=verdict)]))
        t = Table(id=f"comparisons-{task}", title=f"Paired comparisons: {task}, {metric}",
                  caption=f"Every pair of runs of {task} on {metric} over their shared examples: mean paired difference, "
                          f"95% paired bootstrap CI, p-value ({comps[0].test}) Holm-corrected over these "
                          f"{len(comps)} pairs; n = resampling units. Same as python -m recbench.compare --metric "
                          f"{metric} --no-slices on these runs.",
                  row_header=["run a", "run b"], header=_header(cols), columns=cols, rows=rows, section="comparisons")
        out.tables.append(t)
        out.plots.append(forest_plot(task, metric, comps, name))


def forest_plot(task: str, metric: str, comps: list[Any], name: dict[str, str]) -> Plot:
    """Paired differences with 95% CIs, one line per pair; filled = significant after correction."""
    import matplotlib.pyplot as plt

    comps = sorted(comps, key=lambda c: c.diff)
    fig, ax = plt.subplots(figsize=(6.5, 0.35 * len(comps) + 1.2))
    for i, c in enumerate(comps):
        ax.plot([c.ci_low, c.ci_high], [i, i], color="#3f6fb5")
        ax.plot([c.diff], [i], "o", color="#3f6fb5", markerfacecolor="#3f6fb5" if c.significant else "white")
    ax.axvline(0, color="black", linewidth=0.6)
    ax.set_yticks(range(len(comps)), [f"{name[c.run_a]} − {name[c.run_b]}" for c in comps], fontsize=7)
    ax.set_xlabel(f"paired difference in {metric} (95% CI; filled = significant after Holm)")
    ax.set_title(f"{task}: paired differences", fontsize=10)
    return Plot(id=f"forest-{task}", title=f"{task}: paired differences in {metric}", png_base64=png(fig),
                section="comparisons")


def significance(runs: list[Any], tables: list[Table], view: ReportView, by_dir: dict[str, str]) -> Significance:
    """Letters for every table, reference marks in the summary, and the comparisons section."""
    out = Significance()
    if len(runs) < 2:
        return out
    comparer = _Comparer(runs)
    annotate_tables(tables, comparer, out)
    summary = next((t for t in tables if t.id == "summary"), None)
    if summary is not None:
        mark_references(summary, comparer)
    comparisons_section(runs, view, comparer, by_dir, out)
    return out
