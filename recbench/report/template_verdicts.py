"""The verdicts under each prompt template, drawn: the terminal table of `python -m recbench.compare` and the report
table the template audit declares by name (recbench/audits/template_verdicts.py computes the verdicts)."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from recbench.audits.template_blocks import KEY
from recbench.audits.template_verdicts import template_verdicts, verdict_kept
from recbench.report.audit_tables import AuditCell, cell
from recbench.report.tables import Table, _header, method_label


def print_template_verdicts(records: Sequence[Any], console: Any = None) -> None:
    """One table per pair of template-audited runs: per metric, the difference and verdict under each template, and
    whether the sign and the verdict are kept under every template."""
    if not records:
        return
    import sys

    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=min(120, Console().width) if sys.stdout.isatty() else 120)
    kept = verdict_kept(records)
    k = max(r["templates"] for r in kept)
    c0 = records[0]
    console.print(f"verdicts under each prompt template (audit.templates; template 0 = the runs' own prompt): the paired "
                  f"comparison of the template's per-example metrics, {c0.correction} within each family = one metric "
                  "and template, over its pairs of runs; 'kept' = the same sign / verdict under every template",
                  highlight=False)
    by_pair: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in kept:
        by_pair.setdefault((r["run_a"], r["run_b"]), []).append(r)
    for (a, b), rows in by_pair.items():
        t = Table(title=f"templates: a = {a}  vs  b = {b}", title_justify="left")
        t.add_column("metric", no_wrap=True)
        for j in range(k):
            t.add_column(f"t{j} diff", justify="right", no_wrap=True)
            t.add_column(f"t{j} verdict", overflow="fold")
        t.add_column("sign kept")
        t.add_column("verdict kept")
        for r in rows:
            cells = [r["metric"]]
            for j in range(k):
                if j < len(r["diff"]):
                    v = {f"{a} better": "a better", f"{b} better": "b better"}.get(r["verdict"][j], r["verdict"][j])
                    d = r["diff"][j]
                    cells += ["-" if not math.isfinite(d) else f"{d:.3f}", v]
                else:
                    cells += ["-", "-"]
            cells += ["yes" if r["sign_kept"] else "no", "yes" if r["verdict_kept"] else "no"]
            t.add_row(*cells)
        console.print(t)


def template_verdict_table(runs: list[Any]) -> Optional[Any]:
    """One row per pair of template-audited runs of one task (headline metric, all examples): the difference and
    verdict under each template, and whether the sign and the verdict are kept under every template."""
    from recbench.stats.verdicts import CompareError, load_systems

    audited = [r for r in runs if KEY in r.result.audits]
    if len(audited) < 2:
        return None
    try:
        systems = load_systems([r.dir for r in audited], pool_seeds_=True)
    except CompareError:
        return None
    heads = {r.task: r.result.headline_metric for r in audited}
    recs = [c for task, metric in heads.items()
            for c in template_verdicts([s for s in systems if s.task == task], metrics=[metric])]
    if not recs:
        return None
    kept = verdict_kept(recs)
    by_dir = {str(r.dir.resolve()): f"{r.model} · {method_label(r.method, '')}" for r in audited}
    name = {s.label: by_dir.get(str(s.runs[0].dir.resolve()), s.label) for s in systems}
    k_max = max(r["templates"] for r in kept)
    cols: list[tuple[str, str]] = []
    for j in range(k_max):
        cols += [(f"template {j}", "diff (a − b)"), (f"template {j}", "verdict")]
    cols += [("under every template", "sign kept"), ("under every template", "verdict kept")]
    rows = []
    for r in kept:
        cells = []
        for j in range(k_max):
            v = r["verdict"][j] if j < len(r["verdict"]) else None
            if v is not None:
                v = {f"{r['run_a']} better": "a better", f"{r['run_b']} better": "b better"}.get(v, v)
            cells += [cell(r["metric"], r["diff"][j] if j < len(r["diff"]) else None),
                      AuditCell(metric="verdict", shown=v)]
        cells += [AuditCell(metric="sign_kept", shown="yes" if r["sign_kept"] else "no"),
                  AuditCell(metric="verdict_kept", shown="yes" if r["verdict_kept"] else "no")]
        rows.append(([name.get(r["run_a"], r["run_a"]), name.get(r["run_b"], r["run_b"]), r["metric"]], cells))
    caption = ("Paired verdicts under each prompt template (runs asked with audit.templates=K): for every pair of "
               "template-audited runs of one task, the headline's paired comparison computed on the per-example "
               "values of each template (recbench.stats.verdicts.compare_pair; Holm within each family = one metric "
               "and template, over its pairs of runs); 'verdict kept' = the same verdict (which run is better, or n.s.) "
               "under every template as under template 0, 'sign kept' = the same sign of the difference. python -m "
               "recbench.compare <these runs> prints the same records.")
    return Table(id="template-verdicts", title="Verdicts under each prompt template", caption=caption,
                 row_header=["run a", "run b", "metric"], header=_header(cols), columns=cols, rows=rows,
                 section="validity-audit")
