"""The template audit's metrics.json block as a typed record (`TemplateBlock`) and its report table, declared as
data (recbench/audits/templates.py registers them with the audit)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace
from typing import Any, Optional

from recbench.api.audits import Block
from recbench.api.numbers import cell_text
from recbench.api.audit_tables import AuditColumn, AuditTable

#: the record key of the audit (samples' details and metrics.json extra)
KEY = "template_audit"


@dataclass
class TemplateScore(Block):
    """The headline under one template: mean, bootstrap CI, counts, parse rate, the template's file."""

    mean: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    n: int = 0
    n_undefined: int = 0
    parsed: Optional[float] = None
    template: int = 0
    file: Optional[str] = None


@dataclass
class TemplateEffect(Block):
    """The permutation test of a template effect."""

    test: str = ""
    statistic: Optional[float] = None
    p_value: Optional[float] = None
    n_resamples: Optional[int] = None
    alpha: float = 0.05
    detected: bool = False


@dataclass
class TemplateBlock(Block):
    """metrics.json extra.template_audit (`variance`: the variance components, recbench.stats.variance, plus the
    template share's CI and the examples left out)."""

    templates: int = 0
    files: list[Optional[str]] = field(default_factory=list)
    examples: int = 0
    metric: str = ""
    per_template: list[TemplateScore] = field(default_factory=list)
    spread: Optional[float] = None
    sd_over_templates: Optional[float] = None
    answer_changed: list[float] = field(default_factory=list)
    answer_changed_any: Optional[float] = None
    variance: Optional[dict[str, Any]] = None
    template_effect: Optional[TemplateEffect] = None


#: variance sources of the template audit, in column order (recbench.stats.variance)
VARIANCE_SOURCES = (("example", "example"), ("template", "template"), ("example:template", "example × template"),
                    ("order(example)", "order (within example)"), ("residual", "residual"))


def _share(b: TemplateBlock, key: str) -> Any:
    """A variance share, the template's with its CI (a block with mean, ci_low, ci_high)."""
    var = b.variance or {}
    v = (var.get("shares") or {}).get(key)
    ci = var.get("template_share_ci") if key == "template" else None
    return SimpleNamespace(mean=v, ci_low=ci[0], ci_high=ci[1]) if ci and v is not None else v


def _columns(blocks: list[TemplateBlock]) -> list[AuditColumn]:
    """K, the headline per template with its CI, spread, answers changed, variance shares, the effect test."""
    k_max = max(b.templates for b in blocks)
    cols = [AuditColumn("", "K", lambda b: b.templates, "int", "templates")]
    cols += [AuditColumn("headline per template", f"t{j}",
                         lambda b, j=j: b.per_template[j] if j < len(b.per_template) else None, "ci")
             for j in range(k_max)]
    cols += [AuditColumn("over templates", "spread", lambda b: b.spread),
             AuditColumn("answer differs from t0", "any template", lambda b: b.answer_changed_any,
                         metric="answer_changed")]
    cols += [AuditColumn("share of variance", label, lambda b, key=key: _share(b, key),
                         "ci" if key == "template" else "3", "variance_share") for key, label in VARIANCE_SOURCES]
    eff = lambda b: b.template_effect or TemplateEffect()  # noqa: E731
    return cols + [AuditColumn("template effect", "p", lambda b: eff(b).p_value, "p", "p_value"),
                   AuditColumn("template effect", "detected",
                               lambda b: ("yes" if b.template_effect.detected else "no") if b.template_effect else None,
                               "text", "detected")]


TEMPLATE_TABLE = AuditTable(
    id="template-audit", title="Template audit: score and variance across prompt templates", key=KEY,
    columns=_columns,
    caption=("Template audit (audit.templates=K; metrics.json extra.template_audit): each example asked with K "
             "paraphrased prompt templates that keep the answer format (t0 = the run's own template, so its value "
             "is the headline), each with its 95% bootstrap CI; spread = largest minus smallest template mean; "
             "'answer differs' = share of examples whose prediction under some template differs from t0's. Share of "
             "variance: a random-effects ANOVA of the per-example headline (method-of-moments components of example, "
             "template and, with audit.orders on too, example × template and display order within example; "
             "negative estimates set to 0; recbench/stats/variance.py), the template share with a 95% bootstrap CI "
             "over examples. Template effect: permutation test of the template means (template labels permuted "
             "within each example), detected when p < 0.05. A dash: not estimated (no orders audited)."))


def summary_line(blocks: dict[str, Any]) -> Optional[str]:
    """The template audit in one terminal line, from the run's typed audit blocks (None when the run has none)."""
    b = blocks.get(KEY)
    if b is None:
        return None
    per = ", ".join(f"t{p.template} {cell_text(asdict(p))}" for p in b.per_template)
    var = b.variance or {}
    share = (var.get("shares") or {}).get("template")
    share_ci = var.get("template_share_ci") or [math.nan, math.nan]
    eff = b.template_effect
    test = (f"template effect p = {eff.p_value:.3g}: {'DETECTED' if eff.detected else 'n.s.'} at alpha "
            f"{eff.alpha:g}" if eff else "template effect: not tested (fewer than 2 complete examples)")
    return (f"template audit ({b.templates} templates, {b.examples} examples): {b.metric} {per}; spread "
            f"{b.spread:.3f}; answer differs from t0 in {b.answer_changed_any:.0%}; "
            + (f"template share of variance {share:.3f} [{share_ci[0]:.3f}, {share_ci[1]:.3f}]; "
               if share is not None else "") + test)
