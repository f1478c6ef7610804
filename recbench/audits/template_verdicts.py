"""Verdicts of a pair of template-audited runs under each template: the paired comparison
(`recbench.stats.verdicts.compare_pair`) computed on each template's per-example values, each template its own family,
and whether the sign and the verdict are kept under every template; the terminal table (`recbench.compare`) and the
report table (declared here as `VERDICT_TABLE`) are drawn by recbench/report/template_verdicts.py."""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from recbench.api.variant import answers_of
from recbench.audits.template_blocks import KEY
from recbench.api.audit_tables import AuditTable


def _template_system(s: Any, j: int) -> Any:
    """A recbench.stats.verdicts.System whose per-example values are template j's metrics (its order-0 display)."""
    import dataclasses

    per_run = [{r.id: r for r in run.samples()} for run in s.runs]
    names = list(s.values)
    values = {}
    for m in names:
        rows = []
        for p in per_run:
            row = []
            for i in s.ids:
                t = [a for a in answers_of(p[i].variants, template=j, seed=0) if not a.variant.order]
                v = t[0].metrics.get(m) if t else None
                row.append(math.nan if v is None else float(v))
            rows.append(row)
        values[m] = np.array(rows, dtype=float)
    return dataclasses.replace(s, values=values)


def _templates(block: Any) -> int:
    """K of a run's typed template block (0 when the run has none)."""
    return int(block.templates or 0) if block is not None else 0


def audited_templates(s: Any) -> int:
    """K of a system whose every run was template-audited (metrics.json extra.template_audit), else 0."""
    ks = [_templates(r.result.audits.get(KEY)) if r.result is not None else 0 for r in s.runs]
    return min(ks) if ks else 0


def template_verdicts(systems: Sequence[Any], *, metrics: Optional[Sequence[str]] = None, correction: str = "holm",
                      alpha: float = 0.05, seed: int = 0, n_resamples: Optional[int] = None) -> list[Any]:
    """For every pair of template-audited systems of one task: the paired comparison under each template j (records
    with slice 'template=j', one family per (task, metric, template) over the pairs, corrected like compare)."""
    from recbench.stats.verdicts import compare_pair, correct, refine_monte_carlo

    audited = [(s, audited_templates(s)) for s in systems]
    audited = [(s, k) for s, k in audited if k >= 2]
    out = []
    for (a, ka), (b, kb) in ((x, y) for i, x in enumerate(audited) for y in audited[i + 1:]):
        if a.task != b.task or not set(a.ids) & set(b.ids):
            continue
        for j in range(min(ka, kb)):
            at, bt = _template_system(a, j), _template_system(b, j)
            names = [m for m in (metrics or [m for m in a.values if m in b.values]) if m in at.values and m in bt.values]
            for c in compare_pair(at, bt, metrics=names, slices=False, seed=seed, n_resamples=n_resamples):
                c.slice = f"template={j}"
                c.noise_floor = c.below_noise_floor = None  # a noise floor is measured on the runs' own prompt only
                out.append(c)
    if out:
        correct(out, method=correction, alpha=alpha)
        if n_resamples is None:
            refine_monte_carlo(out, method=correction, alpha=alpha, seed=seed)
    return out


def verdict_kept(records: Sequence[Any]) -> list[dict[str, Any]]:
    """Per (pair, metric): whether the sign of the difference and the verdict (which run is better, or n.s.) are the
    same under every template as under template 0."""
    groups: dict[tuple[str, str, str], dict[int, Any]] = {}
    for c in records:
        groups.setdefault((c.run_a, c.run_b, c.metric), {})[int(c.slice.split("=", 1)[1])] = c
    out = []
    for (a, b, m), by_t in groups.items():
        ks = sorted(by_t)
        base = by_t[ks[0]]
        signs = [int(np.sign(by_t[k].diff)) if math.isfinite(by_t[k].diff) else 0 for k in ks]
        out.append({"run_a": a, "run_b": b, "metric": m, "templates": len(ks),
                    "diff": [by_t[k].diff for k in ks], "p_adjusted": [by_t[k].p_adjusted for k in ks],
                    "verdict": [by_t[k].verdict for k in ks],
                    "sign_kept": len(set(signs)) == 1,
                    "verdict_kept": all(by_t[k].verdict == base.verdict for k in ks)})
    return out


def template_verdicts_of_paths(paths: Sequence[Any], *, metrics: Optional[Sequence[str]] = None,
                               correction: str = "holm", alpha: float = 0.05, seed: int = 0,
                               pool_seeds_: bool = False, n_resamples: Optional[int] = None) -> list[Any]:
    """template_verdicts over the runs under the paths ([] when fewer than two were template-audited)."""
    from recbench.stats.verdicts import load_systems

    systems = load_systems(paths, pool_seeds_=pool_seeds_)
    if sum(audited_templates(s) >= 2 for s in systems) < 2:
        return []
    return template_verdicts(systems, metrics=metrics, correction=correction, alpha=alpha, seed=seed,
                             n_resamples=n_resamples)


#: the report's table of the verdicts under each template, built by the report (recbench/report/template_verdicts.py)
VERDICT_TABLE = AuditTable(id="template-verdicts", title="Verdicts under each prompt template", caption="",
                           build="recbench.report.template_verdicts:template_verdict_table")
