"""LLMRec methods: zero-shot prompting (the paper's off-the-shelf prompts) and classic reference baselines."""
from __future__ import annotations

import dataclasses
import re
from typing import Optional

import numpy as np

from recbench.api.task import Method, ReferenceMethod, TaskView
from recbench.tasks.llmrec import settings
from recbench.api.types import Constraint, Display, Example, MethodGen, Outcome, Request, SamplingParams
from recbench.api.variant import PLAIN, Variant, variant_files, variant_name
from recbench.tasks.llmrec.views import (LLMRecTaskView, RankTaskView, ReviewTaskView,  # noqa: F401
                                         _run_seed, _seed_for)
from recbench.tasks.llmrec.rank_baselines import ItemKNN, Popularity, PureSVD, RandomRank  # noqa: F401

PKG = "recbench.tasks.llmrec"  # the package whose templates/ hold the sub-tasks' prompts

#: LLMRec sub-tasks whose answer is one of a few strings: with `constrained: true` the model chooses among them
#: (hf: likelihood of each choice; vllm: structured outputs), so a small model's answer always parses. Each choice
#: maps to the answer the task parses. Rating choices are "N stars", not bare digits: scored by likelihood, SmolLM2-135M
#: picks a bare "1" for every prompt (the start of a numbered list), but spreads over "2 stars".."5 stars".
ANSWER_CHOICES: dict[str, dict[str, str]] = {
    "rating": {"1 star": "1", "2 stars": "2", "3 stars": "3", "4 stars": "4", "5 stars": "5"}}

#: LLMRec sub-tasks whose answer is a ranked list of candidate ids: with `constrained: true` each candidate is a
#: choice, written as the start of the python list the prompt asks for ("[17,": the first id, closed by its comma), and
#: the candidates are ranked by the likelihood of each being the answer's first item (hf reports every choice's
#: log-likelihood). A backend that returns only the chosen choice (vLLM structured outputs) gives a one-item ranking.
RANKED_SUBTASKS = ("sequential", "direct")



def candidate_choice(item_id: str) -> str:
    """The choice string of a candidate: the opening of a python list whose first item is that id."""
    return f"[{item_id},"


def ranking_from_choices(resp_logprobs: Optional[list], chosen: str, candidates: list[str]) -> tuple[list[str], str]:
    """(candidate ids, best first; how the order was obtained) from a choice-constrained answer: every candidate by its
    choice log-likelihood when the backend reports them all (ties keep the shown order), else the chosen one alone."""
    by_choice = {candidate_choice(c): c for c in candidates}
    scores = {d.get("choice"): d.get("logprob") for d in resp_logprobs or [] if isinstance(d, dict)}
    if set(by_choice) <= set(scores) and all(scores[k] is not None for k in by_choice):
        return sorted(candidates, key=lambda c: -float(scores[candidate_choice(c)])), "choice_likelihood"
    item = by_choice.get(chosen.strip())
    return ([item] if item is not None else []), "chosen_choice"




class ZeroShot(Method[LLMRecTaskView]):
    """One prompt per example (task description + behaviour injection + format indicator), parsed by the task."""

    name = "zero_shot"
    settings_rules = settings.ZERO_SHOT  # valid values of the method keys, checked before anything is loaded
    single_round = True  # one round of requests whatever the answers

    @property
    def variants(self) -> frozenset[str]:  # type: ignore[override]
        """The Variant fields honoured: every prompt ships paraphrases (template); the sequential and direct prompts
        list candidates, so audit.orders=K permutes their order (order)."""
        return frozenset({"template", "order"} if self.task.subtask in RANKED_SUBTASKS else {"template"})

    def _template_name(self) -> str:
        return str(self.task.cfg.get("template") or getattr(self.task, "template", ""))

    def template_files(self) -> list[str]:
        """The sub-task's template and its shipped paraphrases (<stem>_t1.j2, ...): audit.templates=K asks with the
        first K."""
        name = self._template_name()
        return variant_files(PKG, name) if name else []

    def messages(self, example: Example, template: int = 0) -> list[dict[str, str]]:
        """The task's chat messages; `template` k > 0: the user prompt from the k-th paraphrase (the system prompt
        unchanged)."""
        msgs = self.task.messages(example)
        if not template:
            return msgs
        from recbench.api.prompts import render

        user = render(PKG, variant_name(self._template_name(), template), **self.task.prompt_vars(example))
        return [m for m in msgs if m["role"] != "user"] + [{"role": "user", "content": user}]

    def params(self) -> SamplingParams:
        """Explicit decoding parameters from the run's `sampling` block; max_tokens from the method, else the task."""
        max_tokens = int(self.cfg.max_tokens or self.task.cfg.max_tokens)
        if getattr(self, "sampling_cfg", None) is not None:
            return self.sampling(max_tokens)
        return SamplingParams(max_tokens=max_tokens, seed=_run_seed(self))

    def constraint(self, example: Optional[Example] = None) -> Optional[Constraint]:
        """With `constrained` on: a choice constraint for sub-tasks with a fixed answer set (rating: 1-5) or, for
        sequential/direct, one choice per candidate of the example (in the shown order)."""
        if not self.cfg.constrained:
            return None
        subtask = self.task.subtask
        if subtask in RANKED_SUBTASKS and example is not None:
            return Constraint(kind="choice", choices=tuple(candidate_choice(c) for c in example.data["candidates"]))
        choices = ANSWER_CHOICES.get(subtask)
        return Constraint(kind="choice", choices=tuple(choices)) if choices else None

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        """Ask once, parse the answer; `variant.order` k > 0 (order audit) shows the candidates in the k-th seeded
        permutation, `variant.template` k > 0 (template audit) asks with the k-th paraphrase of the prompt."""
        order, template = variant.order, variant.template
        audited = order is not None and "order" in self.variants
        if audited and order:
            cands = list(example.data["candidates"])
            perm = np.random.default_rng(_seed_for(_run_seed(self), f"order{int(order)}|{example.id}")).permutation(len(cands))
            example = Example(example.id, {**example.data, "candidates": [cands[j] for j in perm]}, example.meta)
        constraint = self.constraint(example)
        [resp] = yield [Request.chat(self.messages(example, int(template or 0)), self.params(), constraint=constraint,
                                    purpose="answer", example_id=example.id)]
        how = None
        if constraint is not None and self.task.subtask in RANKED_SUBTASKS:
            ranked, how = ranking_from_choices(resp.logprobs, resp.text, list(example.data["candidates"]))
            if ranked:  # read as the python list the prompt asks for: the top n_recommend candidate ids
                top = ranked[: int(self.task.cfg.n_recommend)]
                resp = dataclasses.replace(resp, text="[" + ", ".join(top) + "]")
            else:  # an unenforced constraint (openai backend): the free-text answer is parsed as usual
                how = "free_text"
        elif constraint is not None:  # a chosen answer ("4 stars") is read as the value it stands for ("4")
            value = ANSWER_CHOICES[self.task.subtask].get(resp.text.strip())
            if value is not None:
                resp = dataclasses.replace(resp, text=value)
        outcome = self.task.parse(resp, example)
        if how is not None:
            outcome.details = {**outcome.details, "ranking_from": how}
        if audited:  # the display order (slot order) and the ranking, for the order audit
            outcome.display = Display(list(example.data["candidates"]),
                                      list(outcome.prediction) if outcome.prediction else None)
        return outcome


# ---- rating baselines ---------------------------------------------------------------------------
class _RatingBaseline(ReferenceMethod[ReviewTaskView]):
    settings_rules = settings.RATING_BASELINE

    def prepare(self, examples: list[Example]) -> None:
        """Fit means on the training reviews (everything but each user's held-out review)."""
        train, _ = self.task.split()
        self.global_mean = float(train["rating"].mean())
        self.user_means = train.groupby("user_id")["rating"].mean().to_dict()
        self.item_means = train.groupby("item_id")["rating"].mean().to_dict()

    def estimate(self, example: Example) -> tuple[float, str]:
        """(rating, source of the estimate)."""
        raise NotImplementedError

    def predict(self, example: Example) -> Outcome:
        """The estimate, with its source in the details."""
        pred, source = self.estimate(example)
        return Outcome(pred, "ok", {"source": source})


class GlobalMean(_RatingBaseline):
    """Mean training rating for everyone."""

    name = "global_mean"

    def estimate(self, example: Example) -> tuple[float, str]:
        """The global mean."""
        return self.global_mean, "global"


class UserMean(_RatingBaseline):
    """The user's mean training rating (global mean for users without training reviews)."""

    name = "user_mean"

    def estimate(self, example: Example) -> tuple[float, str]:
        """User mean, else global."""
        u = self.user_means.get(example.data["user_id"])
        return (u, "user") if u is not None else (self.global_mean, "global_fallback")


class ItemMean(_RatingBaseline):
    """The item's mean training rating (global mean for items without training reviews)."""

    name = "item_mean"

    def estimate(self, example: Example) -> tuple[float, str]:
        """Item mean, else global."""
        i = self.item_means.get(example.data["item_id"])
        return (i, "item") if i is not None else (self.global_mean, "global_fallback")


class RandomRating(_RatingBaseline):
    """A uniformly random integer rating 1-5 (seeded by `seed` and the example id)."""

    name = "random"

    def prepare(self, examples: list[Example]) -> None:
        """Nothing to fit."""

    def estimate(self, example: Example) -> tuple[float, str]:
        """Random 1-5."""
        rng = np.random.default_rng(_seed_for(_run_seed(self), example.id))
        return float(rng.integers(1, 6)), "random"


class Lead(ReferenceMethod[TaskView]):
    """Extractive summary baseline: the first `words` words of the review text."""

    name = "lead"
    settings_rules = settings.LEAD

    def predict(self, example: Example) -> Outcome:
        """First words of the review."""
        words = re.sub(r"\s+", " ", example.data["review_text"]).strip().split(" ")
        return Outcome(" ".join(words[: int(self.cfg.words)]), "ok")
