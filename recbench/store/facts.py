"""The typed facts of metrics.json besides the metrics and audits: `Invocation` (this_invocation), `Cost` (cost) and
`TaskInfo` (task); each a `Facts` (api/facts.py): read with `from_dict`, written back by `to_dict` as the same JSON."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from recbench.api.facts import Facts


@dataclass
class Invocation(Facts):
    """metrics.json `this_invocation`: what this invocation of the run did (the loop's counters, the audits' extra
    requests added; a merge sums its shards' last invocations)."""

    examples_total: int = 0
    examples_skipped: int = 0
    examples_finished: int = 0
    backend_errors: int = 0
    backend_calls: int = 0  # requests actually sent to the backend
    cache_hits: int = 0
    cache_misses: int = 0
    prompt_tokens: int = 0  # of requests sent to the backend in this invocation
    completion_tokens: int = 0
    wall_time_s: float = 0.0
    total_wall_time_s: float = 0.0
    model_loaded: Optional[bool] = None  # None: a run dir of a recbench that did not say
    merged_shards: Optional[int] = None  # a merge of shards: how many

    @staticmethod
    def of(counters: Mapping[str, Any]) -> "Invocation":
        """From the counters as the loop gives them (key order kept: it is metrics.json's)."""
        return Invocation.from_dict(counters)


@dataclass
class Cost(Facts):
    """metrics.json `cost`: all the run's tokens priced by the model config's price table, and what this invocation
    paid (cache hits cost nothing)."""

    currency: str = "USD"
    prompt_per_1m: float = 0.0
    completion_per_1m: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_cost: float = 0.0
    completion_cost: float = 0.0
    total: float = 0.0
    source: str = ""
    this_invocation: Optional[float] = None


@dataclass
class TaskInfo(Facts):
    """metrics.json `task`: the task's name and its identity (`Task.identity()`: data and settings), the keys besides
    the name in `other`, as the task declared them."""

    name: str = ""

    @property
    def settings(self) -> dict[str, Any]:
        """The task's identity besides its name (data files, hashes, settings), in the file's order."""
        return dict(self.other)
