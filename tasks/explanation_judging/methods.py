"""Explanation-judging methods: the model as judge (one prompt per explanation and aspect), and two model-free
reference judges (a constant score; a seeded uniform 1-5 score)."""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from recbench.api.task import Method, ReferenceMethod, TaskView
from recbench.api.types import Constraint, Example, MethodGen, Outcome, Request
from recbench.api.variant import PLAIN, Variant
from recbench.tasks.explanation_judging import settings
from recbench.tasks.explanation_judging.views import JudgingTaskView, seed_for

#: with `constrained: true` the judge picks one of these answers (hf: likelihood of each; vllm: structured outputs)
SCORE_CHOICES = ("1", "2", "3", "4", "5")


class JudgeScore(Method[JudgingTaskView]):
    """Pointwise judging: the model is shown the movie, the explanation and one aspect's definition and answers
    a score 1-5, parsed by the task (an answer without a score is kept, scored with the fallback)."""

    name = "judge_score"
    settings_rules = settings.JUDGE_SCORE
    single_round = True

    def constraint(self) -> Optional[Constraint]:
        """A choice among 1-5 when `constrained` is on."""
        return Constraint(kind="choice", choices=SCORE_CHOICES) if self.cfg.constrained else None

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        """Ask once, parse the answer."""
        max_tokens = int(self.cfg.max_tokens or self.task.cfg.max_tokens)
        [resp] = yield [Request.chat(self.task.messages(example), self.sampling(max_tokens),
                                     constraint=self.constraint(), purpose="answer", example_id=example.id)]
        if self.cfg.constrained and resp.text.strip() in SCORE_CHOICES:
            resp = dataclasses.replace(resp, text=resp.text.strip())
        return self.task.parse(resp, example)


class ConstantJudge(ReferenceMethod[TaskView]):
    """The same score for every explanation: no judge can agree less. Every correlation is undefined (NaN: the
    judge's side is constant), so this row shows what an uninformative judge's errors (abs_error) look like."""

    name = "constant_judge"
    settings_rules = settings.CONSTANT

    def predict(self, example: Example) -> Outcome:
        """The configured score."""
        return Outcome(float(self.cfg.score), "ok", {"source": "constant"})


class RandomJudge(ReferenceMethod[TaskView]):
    """A uniformly random integer score 1-5, seeded by `seed` (else the run seed) and the example id: the chance
    level of every correlation is 0."""

    name = "random_judge"
    settings_rules = settings.RANDOM

    def predict(self, example: Example) -> Outcome:
        """Random 1-5."""
        seed = int(self.cfg.seed) if self.cfg.seed is not None else self.seed
        return Outcome(float(np.random.default_rng(seed_for(seed, example.id)).integers(1, 6)), "ok",
                       {"source": "random"})
