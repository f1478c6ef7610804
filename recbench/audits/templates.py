"""Template audit (`audit.templates=K`): ask each example with K paraphrased prompt templates and measure how much of
the score is the wording.

A method that ships paraphrases declares "template" in `Method.variants`, lists them with `template_files()` (variant
0 = today's template, then `<stem>_t1.j2`, `<stem>_t2.j2`, ... beside it: api/variant.py `variant_files`) and honours
`run(example, Variant(template=k))`; every paraphrase keeps the answer contract (the output format the parser reads).
`TemplateAudit` (a `VariantAudit`, audits/variants.py) asks the K templates of one example side by side and returns
the template-0 outcome, so the headline is exactly the plain run's; `SampleRecord.variants` holds every template's
prediction, parse status and metrics (and, with `audit.orders` on as well, every display order's under each
template). `template_aggregates` turns those records into metrics.json's `extra.template_audit`, typed at birth
(`TemplateBlock`, with its report table and terminal line: audits/template_blocks.py);
`template_verdicts` (audits/template_verdicts.py) re-runs the paired comparison of two audited runs under each
template (`recbench.stats.verdicts.compare_pair` per template, each template its own family).
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterable, Optional

import numpy as np

from recbench.api.audits import Audit, register
from recbench.api.errors import ConfigError
from recbench.api.task import Method, Task, honours
from recbench.api.variant import answers_of, variant_name
from recbench.audits.template_blocks import KEY, TEMPLATE_TABLE, TemplateBlock, TemplateEffect, TemplateScore, summary_line
from recbench.audits.variants import VariantAudit, innermost
from recbench.audits.template_verdicts import (  # noqa: F401 - the verdicts are part of this audit's interface
    VERDICT_TABLE,
    audited_templates,
    template_verdicts,
    template_verdicts_of_paths,
    verdict_kept,
)


def template_files_of(method: Any) -> list[str]:
    """The templates a (possibly order-audited) method ships, variant 0 first ([] when it has no prompt template)."""
    inner = innermost(method)
    fn = getattr(inner, "template_files", None)
    return list(fn()) if callable(fn) and honours(inner, "template") else []


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


class TemplateAudit(VariantAudit):
    """Wraps a method that ships K templates: K prompts per example (Variant.template = 0..K-1), template 0's outcome
    as the example's outcome, every template's answer (under every display order, with audit.orders on too) in
    Outcome.variants."""

    def __init__(self, inner: Method, templates: int):  # noqa: D107
        super().__init__(inner, "template", templates, files=template_files_of(inner)[: int(templates)])
        self.templates = int(templates)


# ---- aggregates ---------------------------------------------------------------------------------------------
def _canon(x: Any) -> str:
    return json.dumps(x, sort_keys=True, default=str)


def template_answers(record: Any, k: int) -> list[list[Any]]:
    """A record's answers per template j < k (plain seed): [the template's own answer, or its K display orders]."""
    per = [[a for a in answers_of(record.variants, template=j, seed=0)] for j in range(k)]
    return [sorted(a, key=lambda x: -1 if x.variant.order is None else x.variant.order) for a in per]


def _metric(a: Any, metric: str) -> float:
    v = a.metrics.get(metric)
    return math.nan if v is None else float(v)


def _values(records: list[Any], metric: str, k: int, with_orders: bool = False) -> np.ndarray:
    """(examples, K[, orders]) values of the metric (NaN where undefined): each template's first answer, or (with
    orders) every display order's."""
    per = [template_answers(r, k) for r in records]
    if with_orders:
        n_o = min(len(t) for p in per for t in p)
        return np.array([[[_metric(a, metric) for a in t[:n_o]] for t in p] for p in per])
    return np.array([[_metric(t[0], metric) for t in p] for p in per])


def _audited(records: Iterable[Any]) -> list[Any]:
    """The records that carry template variants, by id."""
    return sorted((r for r in records if any(a.variant.template for a in r.variants)), key=lambda r: r.id)


def template_aggregates(records: Iterable[Any], headline_metric: str, *, n_boot: int = 1000, level: float = 0.95,
                        seed: int = 0, alpha: float = 0.05) -> dict[str, TemplateBlock]:
    """metrics.json's template-audit block, typed ({} when no record carries one): the headline per template with its
    bootstrap CI and parse rate, how often the answer differs from template 0's, the variance components of example,
    template (and order) with the template share's CI, and the permutation test of a template effect."""
    from recbench.stats.bootstrap import summarize

    recs = _audited(records)
    if not recs:
        return {}
    k = min(1 + max(a.variant.template for a in r.variants) for r in recs)
    per = [template_answers(r, k) for r in recs]
    files = [p[0].template_file for p in per[0]]
    vals = _values(recs, headline_metric, k)
    per_template = []
    for j in range(k):
        s = summarize(vals[:, j], n_boot, level, seed)
        parsed = sum(p[j][0].parse_status != "failed" for p in per) / len(per)
        per_template.append(TemplateScore.from_dict({**s, "parsed": parsed, "template": j, "file": files[j]}))
    means = [p.mean for p in per_template]
    changed = np.array([[_canon(p[j][0].prediction) != _canon(p[0][0].prediction) for j in range(k)] for p in per])
    block = TemplateBlock(
        templates=k, files=files, examples=len(recs), metric=headline_metric, per_template=per_template,
        spread=float(np.nanmax(means) - np.nanmin(means)) if np.isfinite(means).any() else math.nan,
        sd_over_templates=float(np.nanstd(means, ddof=1)) if np.isfinite(means).sum() >= 2 else math.nan,
        answer_changed=[float(changed[:, j].mean()) for j in range(k)],
        answer_changed_any=float(changed.any(axis=1).mean()))
    with_orders = all(t[0].variant.order is not None for p in per for t in p)
    _variance(block, _values(recs, headline_metric, k, True) if with_orders else vals, n_boot, level, seed, alpha)
    return {KEY: block}


def _variance(block: TemplateBlock, table: np.ndarray, n_boot: int, level: float, seed: int, alpha: float) -> None:
    """The variance components and the template-effect test of the complete examples, onto the block."""
    from recbench.stats.variance import decompose, template_effect_test, template_share_ci

    ok = ~np.isnan(table.reshape(len(table), -1)).any(axis=1)
    used = table[ok]
    if ok.sum() < 2:
        return
    dec = decompose(used)
    lo, hi = template_share_ci(used, n_boot, level, seed)
    block.variance = {**dec.to_dict(), "examples_left_out": int((~ok).sum()), "template_share_ci": [lo, hi]}
    test = template_effect_test(used, seed=seed)
    block.template_effect = TemplateEffect(test=test.test, statistic=test.statistic, p_value=test.p_value,
                                           n_resamples=test.n_resamples, alpha=alpha,
                                           detected=bool(test.p_value < alpha))


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

    def variants_per_example(self, cfg: Any) -> int:
        """K templates."""
        return audit_k(cfg.get("audit")) or 1

    def aggregate(self, cfg: Any, task: Any, records: list[Any]) -> dict[str, TemplateBlock]:
        """extra.template_audit."""
        return template_aggregates(records, task.headline_metric, n_boot=cfg.run.bootstrap_resamples,
                                   level=cfg.run.ci_level, seed=cfg.seed)

    def terminal_line(self, blocks: dict[str, Any]) -> Optional[str]:
        """Per-template score and the effect test."""
        return summary_line(blocks)


AUDIT = register(PromptTemplates())
