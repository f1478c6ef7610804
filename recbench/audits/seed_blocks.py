"""The sampling-seed audit's metrics.json block as a typed record (`SeedBlock`), its report table declared as data,
and its terminal line (recbench/audits/seeds.py registers them with the audit)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

from recbench.api.audit_tables import AuditColumn, AuditTable
from recbench.api.audits import Block
from recbench.api.numbers import cell_text, fmt

#: the audit's key (metrics.json extra)
KEY = "seed_audit"


@dataclass
class SeedScore(Block):
    """The headline under one sampling seed: mean, bootstrap CI, counts, parse rate."""

    seed: int = 0
    mean: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    n: int = 0
    n_undefined: int = 0
    parsed: Optional[float] = None


@dataclass
class SeedEffect(Block):
    """The paired test of a seed effect (recbench.stats.variance.template_effect_test: seed labels permuted within
    each example)."""

    test: str = ""
    statistic: Optional[float] = None
    p_value: Optional[float] = None
    n_resamples: Optional[int] = None
    alpha: float = 0.05
    detected: bool = False


@dataclass
class SeedBlock(Block):
    """metrics.json extra.seed_audit: the headline per sampling seed and how much it moves across seeds."""

    seeds: int = 0
    examples: int = 0
    metric: str = ""
    temperature: Optional[float] = None
    per_seed: list[SeedScore] = field(default_factory=list)
    mean_over_seeds: Optional[float] = None
    sd_over_seeds: Optional[float] = None
    spread: Optional[float] = None
    within_example_sd: Optional[float] = None  # mean over examples of the sd of an example's K values
    answer_changed_any: Optional[float] = None  # share of examples whose answer differs under some seed from seed 0's
    seed_share: Optional[float] = None  # the seed's share of the variance (random-effects ANOVA, example x seed)
    seed_effect: Optional[SeedEffect] = None


def _columns(blocks: list[SeedBlock]) -> list[AuditColumn]:
    """K, the headline per seed with its CI, spread and sd over seeds, within-example sd, answers changed, the test."""
    k_max = max(b.seeds for b in blocks)
    cols = [AuditColumn("", "K", lambda b: b.seeds, "int", "seeds")]
    cols += [AuditColumn("headline per sampling seed", f"s{j}",
                         lambda b, j=j: b.per_seed[j] if j < len(b.per_seed) else None, "ci") for j in range(k_max)]
    eff = lambda b: b.seed_effect or SeedEffect()  # noqa: E731
    return cols + [AuditColumn("over seeds", "spread", lambda b: b.spread),
                   AuditColumn("over seeds", "sd", lambda b: b.sd_over_seeds),
                   AuditColumn("within example", "sd", lambda b: b.within_example_sd, metric="within_example_sd"),
                   AuditColumn("answer differs from s0", "any seed", lambda b: b.answer_changed_any,
                               metric="answer_changed"),
                   AuditColumn("share of variance", "seed", lambda b: b.seed_share, "3", "variance_share"),
                   AuditColumn("seed effect", "p", lambda b: eff(b).p_value, "p", "p_value")]


SEED_TABLE = AuditTable(
    id="seed-audit", title="Seed audit: score across sampling seeds", key=KEY, columns=_columns,
    caption=("Sampling-seed audit (audit.seeds=K; metrics.json extra.seed_audit): each example asked K times, every "
             "request's sampling seed shifted per seed (s0 = the run's own seeds, so its value is the headline), each "
             "with its 95% bootstrap CI; spread = largest minus smallest seed mean, sd = sample sd of the K means; "
             "within-example sd: the sd of an example's K values, averaged over examples; 'answer differs' = share of "
             "examples whose prediction under some seed differs from s0's. Share of variance: the seed's "
             "method-of-moments component in a random-effects ANOVA of example x seed (recbench/stats/variance.py). "
             "Seed effect: permutation test of the seed means (seed labels permuted within each example)."))


def summary_line(blocks: dict[str, Block]) -> Optional[str]:
    """The seed audit in one terminal line, from the run's typed audit blocks (None when the run has none)."""
    b = blocks.get(KEY)
    if not isinstance(b, SeedBlock):
        return None
    per = ", ".join(f"s{p.seed} {cell_text(asdict(p))}" for p in b.per_seed)
    eff = b.seed_effect
    test = (f"seed effect p = {eff.p_value:.3g}: {'DETECTED' if eff.detected else 'n.s.'} at alpha {eff.alpha:g}"
            if eff and eff.p_value is not None else "seed effect: not tested (fewer than 2 complete examples)")
    return (f"seed audit ({b.seeds} sampling seeds, {b.examples} examples): {b.metric} {per}; spread "
            f"{fmt(b.spread)}, sd {fmt(b.sd_over_seeds)}; within-example sd {fmt(b.within_example_sd)}; answer "
            f"differs from s0 in {fmt(100 * (b.answer_changed_any or 0), 0)}%; {test}")
