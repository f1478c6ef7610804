"""Power and false-positive rate of the template and noise-floor audits over seeds, with the planted doubles on the
bundled PerRecBench sample (listwise), at the n docs/validity.md documents. The doubles answer in-process
(recbench.testing.planted_audits.drive: the method's real generators, parser and scorer, without cache or run store);
the detection is the audit's own: the template-effect permutation test at alpha 0.05, and a noise audit's
'answers changed' count > 0."""
from __future__ import annotations

import math

import pytest

from recbench.audits.noise import noise_aggregates
from recbench.audits.templates import TemplateAudit, _values
from recbench.run.construct import build_task, select_examples
from recbench.stats.variance import template_effect_test
from recbench.testing.planted_audits import BatchSensitive, PlantedTemplateEffect, drive
from tests.helpers import compose_cfg

pytestmark = pytest.mark.full  # a few hundred simulated audits: a minute or two

#: the documented designs (docs/validity.md)
TEMPLATE_N, TEMPLATE_SKILL, TEMPLATE_SEEDS = 60, (0.9, 0.5, 0.1), 100
NULL_N, NULL_SEEDS = 20, 200
NOISE_N, NOISE_FLIP, NOISE_SEEDS = 24, 0.15, 100


@pytest.fixture(scope="module")
def listwise():
    cfg = compose_cfg(["method=listwise"])
    task = build_task(cfg)
    return task, task.make_method(cfg.method, cfg.sampling)


def _detected(audit, examples, skill, seed) -> bool:
    y = _values(drive(audit, PlantedTemplateEffect(skill, seed=seed), examples), "ptc", 3, with_orders=False)
    return template_effect_test(y, n_resamples=999, seed=seed).p_value < 0.05


def test_template_audit_power_at_the_documented_n(listwise):
    task, method = listwise
    exs = select_examples(task.load(), TEMPLATE_N, "stratified", 0, task.breakdown_by)
    audit = TemplateAudit(method, 3)
    power = sum(_detected(audit, exs, TEMPLATE_SKILL, s) for s in range(TEMPLATE_SEEDS)) / TEMPLATE_SEEDS
    print(f"template audit: planted skill {TEMPLATE_SKILL}, n={TEMPLATE_N}: power {power:.2f} over {TEMPLATE_SEEDS} "
          "seeds")
    assert power >= 0.8


def test_template_audit_flags_at_most_5_percent_of_null_doubles(listwise):
    """Equal skills: the answers change with the wording (another prompt, another hash) but not systematically; the
    rate must be 5% within its binomial error over NULL_SEEDS seeds (2 sd). Invariant answers are never flagged."""
    task, method = listwise
    exs = select_examples(task.load(), NULL_N, "stratified", 0, task.breakdown_by)
    audit = TemplateAudit(method, 3)
    rate = sum(_detected(audit, exs, (0.5, 0.5, 0.5), s) for s in range(NULL_SEEDS)) / NULL_SEEDS
    print(f"template audit: null double (0.5, 0.5, 0.5), n={NULL_N}: flagged {rate:.3f} of {NULL_SEEDS} seeds")
    assert rate <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / NULL_SEEDS)
    assert not any(_detected(audit, exs, (1.0, 1.0, 1.0), s) for s in range(20))  # invariant: p = 1 every time


def _noise_block(method, exs, flip, seed):
    ref = BatchSensitive(flip, seed=seed)
    run = drive(method, ref, exs)
    ref.batch_size = 4
    again = drive(method, ref, exs)
    return noise_aggregates(run, again, headline_metric="ptc", settings={"batch_size": 4},
                            reference={"batch_size": 16}, n_boot=999, seed=seed)["noise_floor"]


def test_noise_audit_power_and_null(listwise):
    task, method = listwise
    exs = select_examples(task.load(), NOISE_N, "stratified", 0, task.breakdown_by)
    blocks = [_noise_block(method, exs, NOISE_FLIP, s) for s in range(NOISE_SEEDS)]
    power = sum(b.flips_detected for b in blocks) / NOISE_SEEDS
    moved = sum(b.metric_moved for b in blocks) / NOISE_SEEDS
    share = sum(b.answers_changed.share for b in blocks) / NOISE_SEEDS
    print(f"noise audit: planted flip {NOISE_FLIP}, n={NOISE_N}: answers changed in {share:.3f} of examples on "
          f"average; flips detected in {power:.2f} of {NOISE_SEEDS} seeds; headline moved (p < 0.05) in {moved:.2f}")
    assert power >= 0.8
    nulls = [_noise_block(method, exs, 0.0, s) for s in range(20)]
    assert not any(b.flips_detected or b.metric_moved for b in nulls)
    assert all(b.floor == 0.0 for b in nulls)
