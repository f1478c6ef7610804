"""Write a report (Markdown, CSV, self-contained HTML with embedded plots) from run and sweep dirs."""
from __future__ import annotations

import datetime as _dt
import logging
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Iterable, Optional

import pandas as pd
from jinja2 import Environment, PackageLoader, select_autoescape

from recbench.report.audit_tables import audit_tables
from recbench.report.builder import all_tables
from recbench.report.collect import ReportedRun, aggregate_seeds, cells_table, load_runs, variant_labels
from recbench.report.config_keys import ConfigKeys
from recbench.report.directions import Directions
from recbench.report.expected_rows import add_expected_rows
from recbench.report.fairness import fairness_tables
from recbench.report.legends import legend_lines, table_metrics
from recbench.report.plots import Plot, all_plots, row_label
from recbench.report.results import JOB_FAILED, build_results, failed_jobs, write_results
from recbench.report.significance import Significance, significance
from recbench.report.tables import ReportView, Table

log = logging.getLogger(__name__)


@dataclass
class Section:
    """A titled group of tables and plots (one per benchmark, plus the summary)."""

    id: str
    title: str
    tables: list[Table] = field(default_factory=list)
    plots: list[Plot] = field(default_factory=list)


@dataclass
class Report:
    """Everything a report shows, before rendering."""

    runs: list[ReportedRun]
    cells: pd.DataFrame
    agg: pd.DataFrame
    tables: list[Table]
    plots: list[Plot]
    sections: list[Section]
    sources: list[str]
    significance: Significance = field(default_factory=Significance)
    failed: list = field(default_factory=list)  # FailedJob: sweep jobs that stopped at run time
    audit_tables: list[Table] = field(default_factory=list)  # order audits (audit.orders=K, pairwise both orders)


#: the report sections of the audits' declared tables (AuditTable.section), in report order
AUDIT_SECTIONS = {"order-audit": "Order audits", "validity-audit": "Template and noise-floor audits",
                  "contamination": "Contamination split", "judge-validity": "LLM judges: validity and ranking"}


def headline_metrics(runs: list[ReportedRun]) -> dict[str, str]:
    """Task -> the headline metric its runs declare."""
    return {r.task: r.result.headline_metric for r in runs}


def build_report(paths: Iterable[str | Path], config_keys: Optional[ConfigKeys] = None,
                 max_parse_failure_rate: float = 0.5) -> Report:
    """Collect runs under the paths into tables and plots; runs with max_parse_failure_rate or more parse failures
    are never a summary's best method; config_keys replaces conf/report/config_keys.yaml."""
    paths = [str(p) for p in paths]
    loaded = load_runs(paths, config_keys or ConfigKeys.load())
    directions = Directions.of(r.result.metric_info for r in loaded)
    # a sweep job that failed at run time may leave a partial metrics.json: it is listed as failed, not as a run
    runs = [r for r in loaded if not (r.dir / JOB_FAILED).exists()]
    cells = cells_table(runs)
    agg = aggregate_seeds(cells)
    view = ReportView(directions, headline_metrics(runs), {r.task: r.task_class for r in runs},
                      {r.task: r.presentation for r in runs}, max_parse_failure_rate=max_parse_failure_rate)
    tables = all_tables(agg, view) if runs else []
    plots = all_plots(agg, view)
    sections = [Section("summary", "Cross-benchmark summary", [t for t in tables if t.section == "summary"])]
    for b in view.benchmarks:
        mine = [r for r in runs if r.presentation.benchmark == b]
        ts = [t for t in tables if t.section == b]
        ts += [t for build in (mine[0].presentation.run_tables if mine else ()) if (t := build(mine)) is not None]
        ts += fairness_tables(mine, lambda r: row_label({"model": r.model, "method": r.method, "variant": ""}))
        ps = [p for p in plots if p.section == b]
        if ts or ps:
            sections.append(Section(b, view.title(b), ts, ps))
    pf = [p for p in plots if p.section == ""]
    if pf:
        sections.append(Section("parse-failures", "Parse failures", [], pf))
    by_dir = {str(r.dir.resolve()): row_label({"model": r.model, "method": r.method, "variant": ""}) for r in runs}
    try:
        sig = significance(runs, tables, view, by_dir)
    except ValueError as e:  # a statistics failure must not cost the tables (e.g. scipy on a 1-unit slice)
        log.warning("report: paired comparisons left out: %s", e)
        sig = Significance()
    add_expected_rows(tables, runs)  # after the significance letters: an exact expectation is not a compared row
    audits = audit_tables(runs)
    for section, title in AUDIT_SECTIONS.items():  # docs/validity.md
        if [t for t in audits if t.section == section]:
            sections.append(Section(section, title, [t for t in audits if t.section == section]))
    if sig.tables:
        sections.append(Section("comparisons", "Paired comparisons", sig.tables, sig.plots))
    return Report(runs, cells, agg, tables, plots, sections, paths, sig, failed_jobs(paths), audits)


# ---- renderers ------------------------------------------------------------------------------------
def _md_escape(s: str) -> str:
    return str(s).replace("|", "\\|")


def table_markdown(t: Table) -> str:
    """A Markdown pipe table: value [CI] (n, pf); best in bold, second best in italics; '—' = missing."""
    head = t.row_header + t.flat_columns()
    lines = [f"### {t.title}", "", "| " + " | ".join(map(_md_escape, head)) + " |",
             "|" + "---|" * len(t.row_header) + "---:|" * len(t.columns)]
    for labels, cells in t.rows:
        out = []
        for c in cells:
            if c.missing:
                out.append("—")
                continue
            v = f"**{c.text}**" if c.mark == "best" else f"*{c.text}*" if c.mark == "second" else c.text
            v += (f"<sup>{c.letters}</sup>" if c.letters else "") + c.ref_mark + (" (tie)" if c.tie else "")
            extra = " ".join(x for x in (c.ci_text, f"({c.count_text})" if c.count_text else "",
                                         f"· {c.chosen}" if c.chosen else (f"· {c.note}" if c.shown and c.note else ""))
                             if x)
            out.append(_md_escape(f"{v} {extra}".strip()))
        lines.append("| " + " | ".join(map(_md_escape, labels)) + " | " + " | ".join(out) + " |")
    lines += ["", f"_{t.caption}_", ""]
    legend = legend_lines(table_metrics(t))
    if legend:
        lines += [f"- {_md_escape(x)}" for x in legend] + [""]
    return "\n".join(lines)


def render_markdown(rep: Report) -> str:
    """The whole report as Markdown (plots are in the HTML page)."""
    parts = ["# recbench report", "", f"{len(rep.runs)} runs from {', '.join(rep.sources)}. "
             "Missing cells: —. Plots: report.html.", ""]
    if rep.failed:
        parts += [f"## Failed jobs ({len(rep.failed)})", ""]
        parts += [f"- `{f.run_dir}` (exit {f.exit_code}): {_md_escape(f.error)}" for f in rep.failed] + [""]
    for s in rep.sections:
        if s.tables:
            parts.append(f"## {s.title}\n")
            parts += [table_markdown(t) for t in s.tables]
    return "\n".join(parts)


def render_html(rep: Report, title: str = "recbench report") -> str:
    """The self-contained HTML page (inline CSS, plots as data: URIs, no scripts, no external resources)."""
    env = Environment(loader=PackageLoader("recbench.report", "templates"), autoescape=select_autoescape(["j2", "html"]))
    try:
        version = metadata.version("recbench")
    except metadata.PackageNotFoundError:
        version = "?"
    return env.get_template("report.html.j2").render(
        title=title, sections=rep.sections, sources=rep.sources, n_runs=len(rep.runs), version=version,
        generated=_dt.datetime.now().strftime("%Y-%m-%d %H:%M"), runs=[str(r.dir) for r in rep.runs],
        failed=rep.failed, legend_for=lambda t: legend_lines(table_metrics(t)))


def write_report(paths: Iterable[str | Path], out_dir: str | Path, *, title: str = "recbench report",
                 formats: Iterable[str] = ("md", "csv", "html"), config_keys: Optional[ConfigKeys] = None,
                 max_parse_failure_rate: float = 0.5) -> dict[str, Path]:
    """Build the report for the given run/sweep dirs and write report.{md,html}, cells.csv, tables.csv into out_dir
    (and report.tex with latex/<table>.tex when formats has 'tex')."""
    rep = build_report(paths, config_keys, max_parse_failure_rate)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    formats = set(formats)
    if "md" in formats:
        written["md"] = out / "report.md"
        written["md"].write_text(render_markdown(rep), encoding="utf-8")
    if "csv" in formats:
        written["csv"] = out / "cells.csv"  # seed-aggregated tidy table: every cell with CI, sd, n, sources
        rep.agg.to_csv(written["csv"], index=False)
        written["runs_csv"] = out / "runs.csv"  # one row per run, seed and slice, before seed aggregation
        rep.cells.to_csv(written["runs_csv"], index=False)
        frames = []
        for t in rep.tables + rep.audit_tables:
            f = t.to_frame().reset_index() if t.rows else pd.DataFrame()
            if not f.empty:
                f.insert(0, "table", t.id)
                frames.append(f)
        if frames:
            written["tables_csv"] = out / "tables.csv"
            pd.concat(frames, ignore_index=True).to_csv(written["tables_csv"], index=False)
        sig = rep.significance
        if sig.comparisons:  # every family's records (letters, marks, comparisons section), as compare --json writes
            from recbench.stats.verdicts import write_json

            written["comparisons_csv"] = out / "comparisons.csv"
            pd.DataFrame([c.to_dict() for c in sig.comparisons]).to_csv(written["comparisons_csv"], index=False)
            written["comparisons_json"] = out / "comparisons.json"
            write_json(sig.comparisons, written["comparisons_json"])
        if sig.letters:
            written["letters_csv"] = out / "significance_groups.csv"
            pd.DataFrame(sig.letters).to_csv(written["letters_csv"], index=False)
    written["results"] = write_results(build_results(rep.runs, variant_labels(rep.runs), rep.failed),
                                       out / "results.json")
    if "html" in formats:
        written["html"] = out / "report.html"
        written["html"].write_text(render_html(rep, title), encoding="utf-8")
    if "tex" in formats:  # booktabs tables of the same Table objects (report/latex.py)
        from recbench.report.latex import write_latex

        written.update(write_latex(rep.sections, out, title))
    log.info("report: %d runs -> %s", len(rep.runs), out)
    return written
