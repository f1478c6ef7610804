"""Template audit (`audit.templates=K`): ask each example with K paraphrased prompt templates and measure how much of
the score is the wording.

A method that ships paraphrases lists them with `template_files()` (variant 0 = today's template, then
`<stem>_t1.j2`, `<stem>_t2.j2`, ... beside it: `variant_files`) and accepts `run(example, template=k)`; every
paraphrase keeps the answer contract (the output format the parser reads). `TemplateAudit` drives the K
sub-generators of one example side by side (the union of their pending requests per step, so the extra requests go
through the same cache, deduplication and batching) and returns the template-0 outcome, so the headline is exactly the
plain run's; `details["template_audit"]["templates"]` holds every template's prediction, parse status and metrics
(and, with `audit.orders` on as well, the metrics of each display order). `template_aggregates` turns those records into
metrics.json's `extra.template_audit`; `template_verdicts` re-runs the paired comparison of two audited runs under each
template (`recbench.stats.verdicts.compare_pair` per template, each template its own family).

Long because the wrapper, the aggregation and the per-template verdicts (with their terminal table) are one contract:
the record layout `details["template_audit"]` that the wrapper writes is what the other two read.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

import numpy as np

from recbench.api.errors import ConfigError
from recbench.api.prompts import template_path
from recbench.api.task import Method, Task, side_by_side
from recbench.api.types import Example, MethodGen, Outcome

#: the record key of the audit
KEY = "template_audit"


def variant_name(name: str, k: int) -> str:
    """The file of template variant k: `listwise.j2` -> `listwise_t1.j2` (k = 0: the name itself; a path keeps its
    folder)."""
    if not k:
        return name
    p = Path(name)
    return str(p.with_name(f"{p.stem}_t{int(k)}{p.suffix}")) if p.parent != Path(".") else f"{p.stem}_t{int(k)}{p.suffix}"


def variant_files(package: str, name: str) -> list[str]:
    """The template and its paraphrases that exist (package templates/ or beside a path): [name, name_t1, ...]."""
    out = [name]
    while template_path(package, variant_name(name, len(out))).is_file():
        out.append(variant_name(name, len(out)))
    return out


def _innermost(method: Any) -> Any:
    while hasattr(method, "inner"):
        method = method.inner
    return method


def template_files_of(method: Any) -> list[str]:
    """The templates a (possibly order-audited) method ships, variant 0 first ([] when it has no prompt template)."""
    fn = getattr(_innermost(method), "template_files", None)
    return list(fn()) if callable(fn) else []


def audit_k(audit_cfg: Any) -> int:
    """audit.templates as an int (0 = off)."""
    return int((audit_cfg or {}).get("templates", 0) or 0)


def maybe_template_audit(task: Task, method: Method, audit_cfg: Any) -> Method:
    """The method itself when audit.templates is 0 (off), else a TemplateAudit around it; a one-line ConfigError when
    the method ships fewer than K templates (naming them and the file to add)."""
    k = audit_k(audit_cfg)
    if k == 0:
        return method
    if k < 2:
        raise ConfigError(f"audit.templates={k}: must be 0 (off) or >= 2 prompt templates")
    files = template_files_of(method)
    if len(files) < k:
        if not files:
            raise ConfigError(f"audit.templates={k}: method '{method.name}' of task '{task.name}' has no prompt "
                              "template to paraphrase (or set audit.templates=0)")
        raise ConfigError(f"audit.templates={k}: method '{method.name}' of task '{task.name}' ships {len(files)} "
                          f"template(s) ({', '.join(files)}): use audit.templates={len(files) if len(files) > 1 else 0}"
                          f" or add the paraphrase {variant_name(files[0], len(files))} beside {files[0]} (same "
                          "answer format)")
    return TemplateAudit(method, k)


class TemplateAudit(Method):
    """Wraps a method that ships K templates: K prompts per example, template 0's outcome as the example's outcome."""

    def __init__(self, inner: Method, templates: int):  # noqa: D107 - the inner method holds the config
        self.inner, self.templates = inner, int(templates)
        self.task, self.cfg, self.sampling_cfg = inner.task, inner.cfg, inner.sampling_cfg
        self.name = inner.name
        self.needs_backend = inner.needs_backend
        self.single_round = inner.single_round
        self.files = template_files_of(inner)[: self.templates]

    def prepare(self, examples: list[Example]) -> None:
        """The inner method's one-off work."""
        self.inner.prepare(examples)

    def asks_one_round(self) -> bool:
        """As the inner method."""
        return self.inner.asks_one_round()

    def run(self, example: Example) -> MethodGen:
        """Drive the K templates' generators together; return template 0's outcome with details['template_audit']."""
        gens = [self.inner.run(example, template=k) for k in range(self.templates)]  # type: ignore[call-arg]
        outcomes = yield from side_by_side(gens)
        per = []
        for k, o in enumerate(outcomes):
            rec: dict[str, Any] = {"template": k, "file": self.files[k], "prediction": o.prediction,
                                   "parse_status": o.parse_status, "metrics": self.task.score(example, o)}
            orders = (o.details.get("audit") or {}).get("orders") if isinstance(o.details, dict) else None
            if orders:  # audit.orders on too: every display order's metrics under this template
                rec["orders"] = [od["metrics"] for od in orders]
            per.append(rec)
        first = outcomes[0]
        details = dict(first.details) if isinstance(first.details, dict) else {}
        details[KEY] = {"templates": per}
        return Outcome(first.prediction, first.parse_status, details)


# ---- aggregates ---------------------------------------------------------------------------------------------
def _canon(x: Any) -> str:
    return json.dumps(x, sort_keys=True, default=str)


def _values(records: list[Any], metric: str, k: int, with_orders: bool) -> np.ndarray:
    """(examples, K[, orders]) values of the metric (NaN where undefined)."""
    def num(m: dict) -> float:
        v = m.get(metric)
        return math.nan if v is None else float(v)

    if with_orders:
        return np.array([[[num(om) for om in t["orders"]] for t in r.details[KEY]["templates"][:k]] for r in records])
    return np.array([[num(t["metrics"]) for t in r.details[KEY]["templates"][:k]] for r in records])


def template_aggregates(records: Iterable[Any], headline_metric: str, *, n_boot: int = 1000, level: float = 0.95,
                        seed: int = 0, alpha: float = 0.05) -> dict[str, Any]:
    """metrics.json's template-audit block ({} when no record carries one): the headline per template with its
    bootstrap CI and parse rate, how often the answer differs from template 0's, the variance components of example,
    template (and order) with the template share's CI, and the permutation test of a template effect."""
    from recbench.stats.bootstrap import summarize
    from recbench.stats.variance import (
        decompose,
        template_effect_test,
        template_share_ci,
    )

    recs = sorted((r for r in records if isinstance(r.details, dict) and KEY in r.details), key=lambda r: r.id)
    if not recs:
        return {}
    k = min(len(r.details[KEY]["templates"]) for r in recs)
    files = [t.get("file") for t in recs[0].details[KEY]["templates"][:k]]
    vals = _values(recs, headline_metric, k, with_orders=False)
    per_template = []
    for j in range(k):
        s = summarize(vals[:, j], n_boot, level, seed)
        ts = [r.details[KEY]["templates"][j] for r in recs]
        s["parsed"] = sum(t["parse_status"] != "failed" for t in ts) / len(ts)
        s["template"], s["file"] = j, files[j]
        per_template.append(s)
    means = [p["mean"] for p in per_template]
    changed = np.array([[_canon(r.details[KEY]["templates"][j]["prediction"])
                         != _canon(r.details[KEY]["templates"][0]["prediction"]) for j in range(k)] for r in recs])
    block: dict[str, Any] = {
        "templates": k, "files": files, "examples": len(recs), "metric": headline_metric,
        "per_template": per_template,
        "spread": float(np.nanmax(means) - np.nanmin(means)) if np.isfinite(means).any() else math.nan,
        "sd_over_templates": float(np.nanstd(means, ddof=1)) if np.isfinite(means).sum() >= 2 else math.nan,
        "answer_changed": [float(changed[:, j].mean()) for j in range(k)],
        "answer_changed_any": float(changed.any(axis=1).mean()),
    }
    with_orders = all(r.details[KEY]["templates"][j].get("orders") for r in recs for j in range(k))
    if with_orders:
        n_o = min(len(r.details[KEY]["templates"][j]["orders"]) for r in recs for j in range(k))
        table = np.array([[[float(m.get(headline_metric, math.nan)) if m.get(headline_metric) is not None else math.nan
                            for m in r.details[KEY]["templates"][j]["orders"][:n_o]] for j in range(k)] for r in recs])
    else:
        table = vals
    ok = ~np.isnan(table.reshape(len(recs), -1)).any(axis=1)
    used = table[ok]
    if ok.sum() >= 2:
        dec = decompose(used)
        block["variance"] = {**dec.to_dict(), "examples_left_out": int((~ok).sum())}
        lo, hi = template_share_ci(used, n_boot, level, seed)
        block["variance"]["template_share_ci"] = [lo, hi]
        test = template_effect_test(used, seed=seed)
        block["template_effect"] = {"test": test.test, "statistic": test.statistic, "p_value": test.p_value,
                                    "n_resamples": test.n_resamples, "alpha": alpha,
                                    "detected": bool(test.p_value < alpha)}
    return {KEY: block}


# ---- verdicts of a pair of audited runs under each template ----------------------------------------------
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
                t = p[i].details.get(KEY, {}).get("templates", []) if isinstance(p[i].details, dict) else []
                v = t[j]["metrics"].get(m) if j < len(t) else None
                row.append(math.nan if v is None else float(v))
            rows.append(row)
        values[m] = np.array(rows, dtype=float)
    return dataclasses.replace(s, values=values)


def audited_templates(s: Any) -> int:
    """K of a system whose every run was template-audited (metrics.json extra.template_audit), else 0."""
    ks = [int((r.result.extra.get(KEY) or {}).get("templates") or 0) if r.result is not None else 0 for r in s.runs]
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


def summary_line(extra: dict[str, Any]) -> Optional[str]:
    """The template audit in one terminal line, from metrics.json's block (None when the run has none)."""
    from recbench.report.numbers import cell_text

    b = extra.get(KEY)
    if not isinstance(b, dict):
        return None
    per = ", ".join(f"t{p['template']} {cell_text(p)}" for p in b.get("per_template") or [])
    var = b.get("variance") or {}
    share = (var.get("shares") or {}).get("template")
    share_ci = var.get("template_share_ci") or [math.nan, math.nan]
    eff = b.get("template_effect") or {}
    test = (f"template effect p = {eff['p_value']:.3g}: {'DETECTED' if eff['detected'] else 'n.s.'} at alpha "
            f"{eff['alpha']:g}" if eff else "template effect: not tested (fewer than 2 complete examples)")
    return (f"template audit ({b['templates']} templates, {b['examples']} examples): {b['metric']} {per}; spread "
            f"{b['spread']:.3f}; answer differs from t0 in {b['answer_changed_any']:.0%}; "
            + (f"template share of variance {share:.3f} [{share_ci[0]:.3f}, {share_ci[1]:.3f}]; "
               if share is not None else "") + test)
