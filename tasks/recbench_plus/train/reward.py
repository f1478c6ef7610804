"""GRPO rewards from recbench's own RecBench+ metrics: official recall and CMR, a format reward, a hallucination penalty.

Every component scores a sampled answer exactly as an evaluation run would (`RecBenchPlusTask.score` on the raw
text): `recall` is the official title-matched (and, on condition queries, id-matched) recall, `cmr` the official
condition match rate (None where a query has no conditions or no answer is found in the KG, which trl skips),
`format` 1 for a `[SEP]` list (the official format), 0.5 for a list the assistant method repairs (lines / JSON),
0 otherwise, and `hallucination` minus the share of answered titles that resolve to no catalogue item.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Optional, Sequence

from recbench.api.item_lists import list_scores
from recbench.api.parsing import parse_list
from recbench.tasks.recbench_plus import metrics as M
from recbench.tasks.recbench_plus.task import RecBenchPlusTask
from recbench.api.types import Example, Outcome

COMPONENTS = ("recall", "cmr", "format", "hallucination")


def completion_text(completion: Any) -> str:
    """The answer text of a trl completion (conversational: a list of messages; standard: a string)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], Mapping):
        return str(completion[-1].get("content") or "")
    return str(completion)


def parse_answer(text: str) -> tuple[list[str], str]:
    """Titles and parse status exactly as the assistant method reads an answer (ok | repaired | failed)."""
    if M.SEP in text:
        return [t.strip() for t in text.split(M.SEP) if t.strip()], "ok"
    parsed = parse_list(text)
    return (parsed.value or []), ("repaired" if parsed.ok else "failed")


def _num(x: Any) -> Optional[float]:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


class RecBenchPlusReward:
    """Reward components of sampled answers to known queries, computed with the task's evaluation metrics."""

    def __init__(self, task: RecBenchPlusTask, examples: Sequence[Example], weights: Mapping[str, float]):
        unknown = set(weights) - set(COMPONENTS)
        if unknown:
            raise ValueError(f"unknown reward component(s) {sorted(unknown)} in rft.reward; valid: {', '.join(COMPONENTS)}")
        self.task, self.weights = task, dict(weights)
        self.examples = {e.id: e for e in examples}
        self._memo: dict[tuple[str, str], dict[str, Optional[float]]] = {}

    def components(self, example_id: str, text: str) -> dict[str, Optional[float]]:
        """recall, cmr (None when undefined), format and hallucination (<= 0) of one answer."""
        if (example_id, text) in self._memo:
            return self._memo[(example_id, text)]
        ex = self.examples[example_id]
        titles, status = parse_answer(text)
        outcome = Outcome(prediction=text, parse_status=status, details={"titles": titles, "k": 0})
        scores = self.task.score(ex, outcome)
        list_scores(self.task, ex, outcome, scores)  # the answer errors, as the run records them (invalid_rate, ...)
        halluc = _num(scores.get("invalid_rate"))
        out = {"recall": float(scores["recall"]), "cmr": _num(scores.get("cmr")),
               "format": {"ok": 1.0, "repaired": 0.5}.get(status, 0.0), "hallucination": -(halluc or 0.0)}
        self._memo[(example_id, text)] = out
        return out

    def total(self, example_id: str, text: str) -> float:
        """The weighted sum of the defined components (what GRPO optimizes)."""
        c = self.components(example_id, text)
        return sum(w * c[k] for k, w in self.weights.items() if c.get(k) is not None)

    def funcs(self) -> list[Callable[..., list[Optional[float]]]]:
        """One trl reward function per weighted component (logged by trl as rewards/<name>/mean)."""
        out = []
        for name in self.weights:
            def f(prompts, completions, example_id, _name=name, **_: Any) -> list[Optional[float]]:
                return [self.components(i, completion_text(c))[_name] for i, c in zip(example_id, completions)]
            f.__name__ = name
            out.append(f)
        return out

    def weight_list(self) -> list[float]:
        """Weights in the order of funcs()."""
        return [float(w) for w in self.weights.values()]
