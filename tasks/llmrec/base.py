"""What the five LLMRec tasks share: prompt rendering from templates/, identity, lazy id -> example lookup, history
buckets and title clipping."""
from __future__ import annotations

import functools
from typing import Any, ClassVar

from recbench.api.prompts import render
from recbench.api.task import Task
from recbench.api.types import Example, Outcome, Response

PKG = "recbench.tasks.llmrec"


#: history length buckets of history_bucket, shortest first
HISTORY_BUCKETS = ("<=4", "5-9", "10+")


def history_bucket(n: int) -> str:
    """History length bucket of a user: <=4, 5-9 or 10+ items."""
    return "<=4" if n <= 4 else "5-9" if n <= 9 else "10+"


def _clip(s: str, n: int | None) -> str:
    s = " ".join(str(s).split())
    return s if not n or len(s) <= n else s[: n - 1].rstrip() + "…"


class LLMRecTask(Task):
    """Shared parts: prompt rendering from templates/, task identity, lazy id -> example lookup."""

    breakdown_order = {"history": HISTORY_BUCKETS, "popularity": ("low", "mid", "high"),
                       "activity": ("cold", "warm", "heavy")}

    subtask: ClassVar[str] = ""
    template: ClassVar[str] = ""

    def identity(self) -> dict[str, Any]:
        """Task name, LLMRec sub-task, dataset label and data location."""
        return {"name": self.cfg.name, "benchmark": "llmrec", "subtask": self.subtask,
                "dataset": self.cfg.dataset, "data_dir": str(self.cfg.data_dir)}

    def messages(self, example: Example) -> list[dict[str, str]]:
        """System + user chat messages for the zero-shot prompt."""
        user = render(PKG, self.cfg.template or self.template, **self.prompt_vars(example))
        return [{"role": "system", "content": render(PKG, self.cfg.system_template)},
                {"role": "user", "content": user}]

    def prompt_vars(self, example: Example) -> dict[str, Any]:
        """Template variables for one example."""
        raise NotImplementedError

    def parse(self, response: Response, example: Example) -> Outcome:
        """Turn a model answer into an Outcome with a parse status."""
        raise NotImplementedError

    @functools.cached_property
    def by_id(self) -> dict[str, Example]:
        """Examples by id (for corpus-level aggregates over run records)."""
        return {e.id: e for e in self.load()}
