"""What LLMRec's methods need of their task (typed views), and the seeds they draw with."""
from __future__ import annotations

import hashlib
from typing import Any, Protocol

from recbench.api.task import Method, TaskView
from recbench.api.types import Example, Outcome, Response


class LLMRecTaskView(TaskView, Protocol):
    """What zero-shot prompting needs of an LLMRec task (recbench.tasks.llmrec.task.LLMRecTask provides it)."""

    subtask: str

    def messages(self, example: Example) -> list[dict[str, str]]:
        """System + user chat messages of the sub-task's prompt."""

    def prompt_vars(self, example: Example) -> dict[str, Any]:
        """Template variables for one example."""

    def parse(self, response: Response, example: Example) -> Outcome:
        """The model's answer as an Outcome with a parse status."""


class ReviewTaskView(TaskView, Protocol):
    """What the rating baselines need: the review split (the rating task provides it)."""

    def split(self) -> tuple[Any, Any]:
        """(train, test) reviews as DataFrames: each user's most recent review held out."""


class RankTaskView(TaskView, Protocol):
    """What the ranking baselines need (the sequential and direct tasks provide it)."""

    ordered_history: bool

    @property
    def data(self) -> Any:
        """The P5-format data: `items` (the catalogue) and the sequences."""

    @property
    def ks(self) -> tuple[int, ...]:
        """Cut-offs of HR@k / NDCG@k."""

    def train_sequences(self) -> dict[str, tuple[str, ...]]:
        """Every user's items except the held-out one."""


def _run_seed(method: Method) -> int:
    """The method's `seed` key, else the run seed (sampling.seed), else 0."""
    if method.cfg.seed is not None:
        return int(method.cfg.seed)
    return int(getattr(method, "seed", 0) or 0)


def _seed_for(seed: int, key: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{seed}|{key}".encode(), digest_size=8).digest(), "big")
