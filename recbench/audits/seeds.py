"""Sampling-seed audit (`audit.seeds=K`): ask each example under K sampling seeds and measure how much the score is
the draw.

The audit asks nothing new of a method: seed variant s (api/variant.py `Variant.seed`) shifts every request's
sampling seed (api/task.py `ask`), so every method that asks a model honours it. `SeedAudit` (a `VariantAudit`,
audits/variants.py) asks the K seeds of one example side by side (through the run's cache, deduplication and
batching) and returns seed 0's outcome, so the headline is exactly the plain run's; every seed's answer is typed in
`SampleRecord.variants`. `seed_aggregates` turns them into metrics.json's `extra.seed_audit`, typed at birth
(`SeedBlock`, audits/seed_blocks.py): the headline per seed with its bootstrap CI, the spread and sd of the seed
means, the within-example sd, how often the answer moves, the seed's share of the variance and the paired
permutation test of a seed effect (recbench/stats/variance.py, scipy's permutation_test).
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterable, Optional

import numpy as np

from recbench.api.audits import Audit, Block, register
from recbench.api.errors import ConfigError
from recbench.api.task import Method, Task, honours
from recbench.audits.seed_blocks import KEY, SEED_TABLE, SeedBlock, SeedEffect, SeedScore, summary_line
from recbench.audits.variants import VariantAudit, innermost


def audit_k(cfg: Any) -> int:
    """audit.seeds as an int (0 = off)."""
    return int((cfg.get("audit") or {}).get("seeds", 0) or 0)


def maybe_seed_audit(task: Task, method: Method, k: int) -> Method:
    """The method itself when k is 0 (off), else a SeedAudit around it; a one-line ConfigError when k is 1 or the
    method asks no model (a reference row has no sampling to vary)."""
    if k == 0:
        return method
    if k < 2:
        raise ConfigError(f"audit.seeds={k}: must be 0 (off) or >= 2 sampling seeds")
    if not honours(innermost(method), "seed"):
        raise ConfigError(f"audit.seeds={k}: method '{method.name}' of task '{task.name}' asks no model, so no "
                          "sampling seed changes its answers (or set audit.seeds=0)")
    return VariantAudit(method, "seed", k)


def seed_answers(record: Any, k: int) -> Optional[list[Any]]:
    """A record's answer under each seed s < k (plain template, the method's own or first display order); None when
    it lacks one."""
    out = []
    for s in range(k):
        a = [v for v in record.variants if v.variant.seed == s and v.variant.template == 0 and not v.variant.order]
        if not a:
            return None
        out.append(a[0])
    return out


def _value(a: Any, metric: str) -> float:
    v = a.metrics.get(metric)
    return math.nan if v is None else float(v)


def seed_aggregates(records: Iterable[Any], headline_metric: str, *, temperature: Optional[float] = None,
                    n_boot: int = 1000, level: float = 0.95, seed: int = 0,
                    alpha: float = 0.05) -> dict[str, Block]:
    """metrics.json's seed-audit block, typed ({} when no record carries seed variants)."""
    from recbench.stats.bootstrap import summarize

    recs = sorted((r for r in records if any(v.variant.seed for v in r.variants)), key=lambda r: r.id)
    if not recs:
        return {}
    k = min(1 + max(v.variant.seed for v in r.variants) for r in recs)
    per = [a for a in (seed_answers(r, k) for r in recs) if a is not None]
    vals = np.array([[_value(a, headline_metric) for a in p] for p in per])
    per_seed = [SeedScore.from_dict({**summarize(vals[:, s], n_boot, level, seed), "seed": s,
                                     "parsed": float(np.mean([p[s].parse_status != "failed" for p in per]))})
                for s in range(k)]
    means = np.array([p.mean for p in per_seed], dtype=float)
    finite = np.isfinite(means)
    changed = [any(_canon(a.prediction) != _canon(p[0].prediction) for a in p[1:]) for p in per]
    ok = ~np.isnan(vals).any(axis=1)
    block = SeedBlock(
        seeds=k, examples=len(per), metric=headline_metric, temperature=temperature, per_seed=per_seed,
        mean_over_seeds=float(means[finite].mean()) if finite.any() else math.nan,
        sd_over_seeds=float(np.std(means[finite], ddof=1)) if finite.sum() >= 2 else math.nan,
        spread=float(means[finite].max() - means[finite].min()) if finite.any() else math.nan,
        within_example_sd=float(np.std(vals[ok], axis=1, ddof=1).mean()) if ok.any() else math.nan,
        answer_changed_any=float(np.mean(changed)))
    if ok.sum() >= 2:
        _seed_effect(block, vals[ok], seed, alpha)
    return {KEY: block}


def _seed_effect(block: SeedBlock, used: np.ndarray, seed: int, alpha: float) -> None:
    """The seed's share of the variance and the permutation test of a seed effect, onto the block."""
    from recbench.stats.variance import decompose, template_effect_test

    block.seed_share = decompose(used).shares.get("template")  # the within-example factor: here the seed
    test = template_effect_test(used, seed=seed)
    block.seed_effect = SeedEffect(test=test.test, statistic=test.statistic, p_value=test.p_value,
                                   n_resamples=test.n_resamples, alpha=alpha, detected=bool(test.p_value < alpha))


def _canon(x: Any) -> str:
    return json.dumps(x, sort_keys=True, default=str)


class SamplingSeeds(Audit):
    """audit.seeds=K as an audit: the seed wrapper, its block, its terminal line and its report table."""

    key = KEY
    rank = 25
    blocks = {KEY: SeedBlock}
    tables = (SEED_TABLE,)

    def enabled(self, cfg: Any) -> bool:
        """audit.seeds is set."""
        return bool(audit_k(cfg))

    def wrap(self, task: Any, method: Any, cfg: Any) -> Any:
        """K sampling seeds per example."""
        return maybe_seed_audit(task, method, audit_k(cfg))

    def variants_per_example(self, cfg: Any) -> int:
        """K sampling seeds."""
        return audit_k(cfg) or 1

    def aggregate(self, cfg: Any, task: Any, records: list[Any]) -> dict[str, Block]:
        """extra.seed_audit."""
        temperature = (cfg.get("sampling") or {}).get("temperature")
        return seed_aggregates(records, task.headline_metric, n_boot=cfg.run.bootstrap_resamples,
                               level=cfg.run.ci_level, seed=cfg.seed,
                               temperature=None if temperature is None else float(temperature))

    def terminal_line(self, blocks: dict[str, Block]) -> Optional[str]:
        """Per-seed score, spread and the effect test."""
        return summary_line(blocks)


AUDIT = register(SamplingSeeds())
