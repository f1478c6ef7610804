"""What the explanation-judging methods need of their task (a typed view), and the seeds the random judge draws."""
from __future__ import annotations

import hashlib
from typing import Protocol

from recbench.api.task import TaskView
from recbench.api.types import Example, Outcome, Response


class JudgingTaskView(TaskView, Protocol):
    """What the judge prompt needs (recbench.tasks.explanation_judging.task.ExplanationJudgingTask provides it)."""

    def messages(self, example: Example) -> list[dict[str, str]]:
        """System + user chat messages asking for one aspect's 1-5 score."""

    def parse(self, response: Response, example: Example) -> Outcome:
        """The judge's answer as an Outcome (its score, or None) with a parse status."""


def seed_for(seed: int, key: str) -> int:
    """A 64-bit seed from the run seed and an example id (stable across processes and Python versions)."""
    return int.from_bytes(hashlib.blake2b(f"{seed}|{key}".encode(), digest_size=8).digest(), "big")


