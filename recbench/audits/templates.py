"""Template audit (`audit.templates=K`): ask each example with K paraphrased prompt templates and measure how much of
the score is the wording.

A method that ships paraphrases lists them with `template_files()` (variant 0 = today's template, then
`<stem>_t1.j2`, `<stem>_t2.j2`, ... beside it: `variant_files`) and accepts `run(example, template=k)`; every
paraphrase keeps the answer contract (the output format the parser reads). `TemplateAudit` drives the K
sub-generators of one example side by side (the union of their pending requests per step, so the extra requests go
through the same cache, deduplication and batching) and returns the template-0 outcome, so the headline is exactly the
plain run's; `details["template_audit"]["templates"]` holds every template's prediction, parse status and metrics
(and, with `audit.orders` on as well, the metrics of each display order). `template_aggregates` turns those records into
metrics.json's `extra.template_audit` (typed, with its report table and terminal line: audits/template_blocks.py);
`template_verdicts` (audits/template_verdicts.py) re-runs the paired comparison of two audited runs under each
template (`recbench.stats.verdicts.compare_pair` per template, each template its own family).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Optional

import numpy as np

from recbench.api.audits import Audit, register
from recbench.api.errors import ConfigError
from recbench.api.prompts import template_path
from recbench.api.task import Method, Task, side_by_side
from recbench.api.types import Example, MethodGen, Outcome

from recbench.audits.template_blocks import KEY, TEMPLATE_TABLE, TemplateBlock, summary_line
from recbench.audits.template_verdicts import (  # noqa: F401 - the verdicts are part of this audit's interface
    VERDICT_TABLE,
    audited_templates,
    print_template_verdicts,
    template_verdicts,
    template_verdicts_of_paths,
    verdict_kept,
)


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
        return Outcome(first.prediction, first.parse_status, details, display=first.display,
                       order_pairs=first.order_pairs, notes=first.notes)


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


class PromptTemplates(Audit):
    """audit.templates=K as an audit: the TemplateAudit wrapper, its block and its terminal line."""

    key = KEY
    rank = 20
    blocks = {KEY: TemplateBlock}
    tables = (TEMPLATE_TABLE, VERDICT_TABLE)

    def enabled(self, cfg: Any) -> bool:
        """audit.templates is set."""
        return bool(audit_k(cfg.get("audit")))

    def wrap(self, task: Any, method: Any, cfg: Any) -> Any:
        """K paraphrased prompts per example."""
        return maybe_template_audit(task, method, cfg.get("audit"))

    def aggregate(self, cfg: Any, task: Any, records: list[Any]) -> dict[str, Any]:
        """extra.template_audit."""
        return template_aggregates(records, task.headline_metric, n_boot=cfg.run.bootstrap_resamples,
                                   level=cfg.run.ci_level, seed=cfg.seed)

    def terminal_line(self, blocks: dict[str, Any]) -> Optional[str]:
        """Per-template score and the effect test."""
        return summary_line(blocks)


register(PromptTemplates())
