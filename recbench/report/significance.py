"""Significance in reports: compact letters per table column, marks against reference rows, and a comparisons
section (every pair's paired difference, CI and adjusted p, with a forest plot) — all from recbench.stats.verdicts.

One family rule, the same as `python -m recbench.compare`: a family is one task, metric and slice, over every pair of
the task's runs in the report (seeds pooled, as `--pool-seeds`), Holm-corrected, with compare's own defaults
(adaptive permutation p, Monte Carlo refinement near alpha, 9,999 bootstrap resamples, seed 0). A column's letters
come from its rows' records in that family; the comparisons section shows the headline family per task. Every record
behind a letter, a reference mark or the section is in comparisons.csv/json. Metrics without a direction get none.
"""
from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from recbench.report.plots import Plot, png
from recbench.report.tables import Cell, ReportView, Table, _header

log = logging.getLogger(__name__)
CORRECTION = "holm"
ALPHA = 0.05


@dataclass
class Significance:
    """What a report shows about significance: every family's records, letters by (table, row, column)."""

    comparisons: list[Any] = field(default_factory=list)  # recbench.stats.verdicts.Comparison of every family used
    letters: list[dict[str, Any]] = field(default_factory=list)  # table, row, column, metric, slice, letters, family
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
    """Paired comparisons between the report's systems (runs, seeds pooled), one corrected family per (task,
    metric, slice) over every pair of the task's systems, computed once."""

    def __init__(self, runs: list[Any]):
        from recbench.stats.verdicts import load_systems

        self.systems = load_systems([r.dir for r in runs], pool_seeds_=True)
        self.by_dirs = {frozenset(str(r.dir.resolve()) for r in s.runs): s for s in self.systems}
        self._families: dict[tuple[str, str, str], list[Any]] = {}

    def system(self, cell: Cell) -> Any:
        """The system behind a cell (None for derived, pooled or extra cells)."""
        if cell.missing or cell.derived or cell.pooled or not cell.sources:
            return None
        if any(_slice_of(s["path"]) is None for s in cell.sources):
            return None
        return self.by_dirs.get(frozenset(str(Path(s["run_dir"]).resolve()) for s in cell.sources))

    def _pair(self, a: Any, b: Any, metric: str, slice_: str) -> list[Any]:
        from recbench.stats.verdicts import CompareError, comparable, compare_pair

        if not comparable(metric, a, b):
            return []
        try:
            return compare_pair(a, b, metrics=[metric], only_slices=[slice_])
        except CompareError as e:  # e.g. no shared ids: compare skips such a pair too
            log.info("report: %s vs %s on %s not compared: %s", a.label, b.label, metric, e)
            return []

    def family(self, task: str, metric: str, slice_: str) -> list[Any]:
        """The corrected records of every pair of the task's systems on one metric and slice (compare's family)."""
        from recbench.stats.verdicts import correct, refine_monte_carlo

        key = (task, metric, slice_)
        if key not in self._families:
            systems = [s for s in self.systems if s.task == task]
            comps = [c for a, b in itertools.combinations(systems, 2) for c in self._pair(a, b, metric, slice_)]
            if comps:
                correct(comps, CORRECTION, ALPHA)
                refine_monte_carlo(comps, method=CORRECTION, alpha=ALPHA)
            self._families[key] = comps
        return self._families[key]

    def record(self, a: Any, b: Any, metric: str, slice_: str) -> Any:
        """The family's record of the pair {a, b} (either orientation), or None."""
        labels = {a.label, b.label}
        return next((c for c in self.family(a.task, metric, slice_) if {c.run_a, c.run_b} == labels), None)

    @property
    def comparisons(self) -> list[Any]:
        """Every record of every family computed so far, family by family."""
        return [c for comps in self._families.values() for c in comps]


def _ranks(comps: list[Any]) -> bool:
    from recbench.api.metrics import RANKING_DIRECTIONS

    return bool(comps) and comps[0].direction in RANKING_DIRECTIONS


def letters_note(sizes: set[int]) -> str:
    """The caption sentence that explains superscript letters (sizes: the families' sizes in the table)."""
    size = ", ".join(str(n) for n in sorted(sizes))
    return (f" Superscript letters: within a column, rows that share a letter are not significantly different "
            f"(paired test per pair of runs, {CORRECTION.title()}-corrected within the column's family = its metric "
            f"and slice over every pair of the task's runs in this report, {size} pairs; alpha {ALPHA}); the best row "
            "gets 'a'. Every letter's records are in comparisons.csv / comparisons.json.")


def annotate_tables(tables: list[Table], comparer: _Comparer, out: Significance) -> None:
    """Letters on every column where at least two rows are runs of one task, from the column's records in its
    (task, metric, slice) family; the caption explains them."""
    from recbench.stats.verdicts import CompareError, letters

    for t in tables:
        sizes: set[int] = set()
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
            labels = {s.label for _, _, s in sys_cells}
            fam = comparer.family(tasks.pop(), metric, slice_)
            if not _ranks(fam):
                continue  # no direction: no letters
            comps = [c for c in fam if c.run_a in labels and c.run_b in labels]
            if not comps:
                continue
            try:
                lettering = letters(comps, metric, slice_)
            except CompareError:
                continue
            sizes.add(comps[0].family_size)
            for lbl, c, s in sys_cells:
                c.letters = lettering.get(s.label, "")
                out.letters.append({"table": t.id, "row": " / ".join(lbl), "column": " · ".join(x for x in col if x),
                                    "system": s.label, "metric": metric, "slice": slice_, "letters": c.letters,
                                    "family": comps[0].family, "family_size": comps[0].family_size,
                                    "correction": comps[0].correction})
        if sizes:
            t.caption += letters_note(sizes)


REF_MARKS_NOTE = (" ▲ / ▼: significantly better / worse than the random reference row; †: significantly better than "
                  "the best reference row of the column (the same families and records as the letters).")


def mark_references(summary: Table, comparer: _Comparer) -> None:
    """In the summary, each model cell vs the `random` reference row and vs the best reference row of its column,
    read from the column's (task, metric, all) family."""
    refs = [(lbl, cells) for lbl, cells in summary.rows if lbl[-1].startswith("reference")]
    models = [(lbl, cells) for lbl, cells in summary.rows if not lbl[-1].startswith("reference")]
    marked = False
    for j in range(len(summary.columns)):
        ref_cells = [(lbl[0], cells[j], comparer.system(cells[j])) for lbl, cells in refs]
        ref_cells = [x for x in ref_cells if x[2] is not None]
        if not ref_cells:
            continue
        fam = comparer.family(ref_cells[0][2].task, ref_cells[0][1].metric, "all")
        if not _ranks(fam):
            continue
        hib = fam[0].direction == "higher"
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
                k = comparer.record(s, ref[2], c.metric, "all")
                if k is None or k.test == "none":
                    continue
                verdict = ("better" if k.better == s.label else "worse") if k.significant else "not different"
                marks.append(f"vs {name} ({ref[0]}): {verdict}, p={k.p_adjusted:.3g} "
                             f"({k.correction} over {k.family_size} pairs; p {precision_short(k)})")
                if name == "random":
                    c.ref_mark = "▲" if k.significant and k.better == s.label else ("▼" if k.significant else "")
                else:
                    c.ref_mark += "†" if k.significant and k.better == s.label else ""
                marked = True
            if marks:
                c.note = "; ".join(x for x in (c.note, *marks) if x)
    if marked:
        summary.caption += REF_MARKS_NOTE


def precision_short(c: Any) -> str:
    """The precision of a record's uncorrected p in a few characters: 'exact', '±0.002 MC', or the test's own."""
    if c.p_mc_se is not None:
        return f"±{c.p_mc_se:.1g} MC"
    return {"wilcoxon": "scipy", "t": "t dist"}.get(c.test, "exact")


def display_names(systems: list[Any], by_dir: dict[str, str]) -> dict[str, str]:
    """compare's system label -> the report's row label ('model · method', + seeds), unique."""
    names = {s.label: by_dir.get(str(s.runs[0].dir.resolve()), s.label) + (f" [{s.k} seeds]" if s.k > 1 else "")
             for s in systems}
    dup = {n for n in names.values() if list(names.values()).count(n) > 1}
    return {k: (f"{v} [{k}]" if v in dup else v) for k, v in names.items()}


def comparisons_section(runs: list[Any], view: ReportView, comparer: _Comparer, by_dir: dict[str, str],
                        out: Significance) -> None:
    """Per task: the headline metric's family over all examples (every pair, Holm over the task's pairs); table +
    forest plot."""
    from recbench.stats.verdicts import CI_MEANING, ci_disagrees

    by_task: dict[str, list[Any]] = {}
    for s in comparer.systems:
        by_task.setdefault(s.task, []).append(s)
    for task, systems in sorted(by_task.items()):
        metric = view.headlines.get(task)
        if len(systems) < 2 or not metric:
            continue
        comps = [c for c in comparer.family(task, metric, "all") if c.test != "none"]
        if not comps:
            continue
        name = display_names(systems, by_dir)
        p_col = f"p ({comps[0].correction.title()}, {comps[0].family_size} pairs)"
        cols = [("difference (a − b)",), ("95% CI (unadjusted)",), (p_col,), ("verdict",)]
        rows = []
        flagged = noisy = False
        for c in sorted(comps, key=lambda c: (-abs(c.diff) if math.isfinite(c.diff) else 0)):
            if c.better:
                verdict = f"{name[c.better]} better"
            elif c.verdict in ("n.s.", ""):
                verdict = "not distinguishable"
            else:
                verdict = c.verdict  # no direction / direction unknown
            if ci_disagrees(c):
                verdict += " *"
                flagged = True
            if c.below_noise_floor:  # audit.noise of either run moved the metric at least this much
                verdict += " ≈"
                noisy = True
            rows.append(([name[c.run_a], name[c.run_b]],
                         [Cell(metric=metric, mean=c.diff, n=c.n, note=c.note),
                          Cell(metric=metric, shown=f"[{c.ci_low:.3f}, {c.ci_high:.3f}]"),
                          Cell(metric=metric, mean=c.p_adjusted, shown=f"{c.p_adjusted:.3g} ({precision_short(c)})"),
                          Cell(metric=metric, shown=verdict)]))
        caption = (f"Every pair of runs of {task} on {metric} over their shared examples: mean paired difference, the "
                   f"{CI_MEANING}, and the p-value ({comps[0].test}) {comps[0].correction.title()}-corrected within "
                   f"the family '{comps[0].family}' ({comps[0].family_size} pairs: one family per metric and slice, "
                   "over every pair of the task's runs); the verdict uses the corrected p; n = resampling units. "
                   "In brackets, the precision of the uncorrected p: exact (every sign vector counted, by enumeration "
                   "or on a lattice by FFT, its rounding bound in comparisons.json p_error) or ±s, its Monte Carlo "
                   "standard error. "
                   f"The same records as python -m recbench.compare <these runs> --pool-seeds --metric {metric} "
                   "(comparisons.csv / comparisons.json hold them, with every other family the letters use).")
        if flagged:
            caption += (" *: the unadjusted CI and the corrected verdict disagree (the CI is one comparison at a time; "
                        f"the verdict is after {comps[0].correction.title()} over {comps[0].family_size} pairs).")
        if noisy:
            caption += (" ≈: |difference| below the noise floor of either run (audit.noise: decoding the same examples "
                        "again with another batch size moved the metric up to that much; section 'Template and "
                        "noise-floor audits').")
        t = Table(id=f"comparisons-{task}", title=f"Paired comparisons: {task}, {metric}", caption=caption,
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
    ax.set_xlabel(f"paired difference in {metric} (unadjusted 95% CI; filled = significant after Holm over "
                  f"{comps[0].family_size} pairs)")
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
    out.comparisons = comparer.comparisons  # every family a letter, a mark or the section used
    return out
