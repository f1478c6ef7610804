"""The typed facts of metrics.json besides the metrics and audits: `Invocation` (this_invocation), `Cost` (cost) and
`TaskInfo` (task); each a `Facts` (api/facts.py): read with `from_dict`, written back by `to_dict` as the same JSON.
`RunFacts`: the task facts the core reads (RunResult.facts), typed, from the `extra` keys api/facts.py declares.
store/result.py imports this module where a result is built or read, not when it is imported (start-up)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from recbench.store.records import LoopStats
from recbench.api.facts import (
    FALLBACK_COUNT,
    FALLBACK_VALUE,
    PROBE_VERDICT,
    RANDOM_EXPECTATION,
    SUMMARY,
    Facts,
)


@dataclass
class Invocation(Facts, LoopStats):
    """metrics.json `this_invocation`: what this invocation of the run did (the loop's counters, the audits' extra
    requests added; a merge sums its shards' last invocations)."""

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


@dataclass
class RunFacts:
    """What the core reads of a task's run, typed: a task writes these under metrics.json `extra` (from
    `Task.run_facts`, or as corpus metrics for the fallback pair) by the keys above, and the terminal summary, the
    report and the contamination audit read them here, never by key. A value of the wrong shape reads as absent."""

    summary: tuple[str, ...] = ()  # the task's own verdict lines, printed under the run's tables
    random_expectation: dict[str, float] = field(default_factory=dict)  # metric -> its exact value under chance
    fallback_count: int = 0  # failed answers scored with the fallback value (metrics marked 'fallback')
    fallback_value: Optional[float] = None  # that value
    probe_verdict: Optional[dict[str, Any]] = None  # a recall probe's verdict (the contamination split reads it)

    @staticmethod
    def of(extra: Mapping[str, Any]) -> "RunFacts":
        """The facts in a run's `extra` (the task's own values)."""
        lines, rnd, probe = extra.get(SUMMARY), extra.get(RANDOM_EXPECTATION), extra.get(PROBE_VERDICT)
        count, value = extra.get(FALLBACK_COUNT), extra.get(FALLBACK_VALUE)
        return RunFacts(summary=tuple(str(x) for x in lines) if isinstance(lines, list) else (),
                        random_expectation={k: float(v) for k, v in rnd.items() if _number(v)}
                        if isinstance(rnd, dict) else {},
                        fallback_count=int(count) if _number(count) else 0,
                        fallback_value=float(value) if _number(value) else None,
                        probe_verdict=dict(probe) if isinstance(probe, dict) else None)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v
