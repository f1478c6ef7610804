"""The typed result of a run: `RunResult` (metrics.json) and its parts (`MetricSummary`, `SliceResult`, `Counts`),
`Aggregate` (what the loop's aggregation gives), and `PlanResult` (plan.json).

Version history of metrics.json: 1 = the first layout (no metric_info / cluster_by); 2 = adds metric_info and
cluster_by.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from recbench.api.audits import Block, block_type
from recbench.api.facts import MetricInfo
from recbench.store.records import SchemaError, _float, _known

if TYPE_CHECKING:  # imported where a result is built or read (store/facts.py): not at start-up
    from recbench.store.facts import Cost, Invocation, RunFacts, TaskInfo

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)


# ---- the run result (metrics.json) --------------------------------------------------------------------
@dataclass
class MetricSummary:
    """A metric over a set of examples: mean, bootstrap CI, defined and undefined counts."""

    mean: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    n: int = 0
    n_undefined: int = 0

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "MetricSummary":
        """From metrics.json (None = NaN)."""
        return MetricSummary(mean=_float(d.get("mean")), ci_low=_float(d.get("ci_low")), ci_high=_float(d.get("ci_high")),
                             n=int(d.get("n") or 0), n_undefined=int(d.get("n_undefined") or 0))


@dataclass
class SliceResult:
    """The metrics of one breakdown value (e.g. difficulty=easy)."""

    n: int
    metrics: dict[str, MetricSummary]

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "SliceResult":
        """From metrics.json."""
        return SliceResult(n=int(d.get("n") or 0),
                           metrics={k: MetricSummary.from_dict(v) for k, v in (d.get("metrics") or {}).items()})


@dataclass
class Counts:
    """Example, parse, call and token counts of a run (all its records, not only this invocation)."""

    examples: int = 0
    parsed: int = 0
    parse_ok: int = 0
    parse_repaired: int = 0
    parse_failed: int = 0
    parse_failure_rate: Optional[float] = None
    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    backend_errors: int = 0
    finish_length: int = 0  # answers cut by the token limit

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Counts":
        """From metrics.json."""
        return Counts(**_known(Counts, d))


@dataclass(frozen=True)
class Aggregate:
    """What the aggregation of a run's records gives (run/loop.py `aggregate`): a RunResult's measured part."""

    headline_metric: str
    metrics: dict[str, MetricSummary]
    breakdown: dict[str, dict[str, SliceResult]]
    counts: Counts
    extra: dict[str, Any]
    metric_info: dict[str, MetricInfo]
    cluster_by: Optional[str] = None


def split_extra(extra: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Block]]:
    """metrics.json's extra as (the task's own values, every registered audit's block as its typed record), each in
    the file's order; an audit key whose value is not an object stays in the first."""
    own: dict[str, Any] = {}
    blocks: dict[str, Block] = {}
    for k, v in extra.items():
        tp = block_type(k) if isinstance(v, dict) else None  # only the block modules of the keys present
        if isinstance(v, Block):  # built typed by its audit
            blocks[k] = v
        elif tp is not None:
            blocks[k] = tp.from_dict(v)
        else:
            own[k] = v
    return own, blocks


@dataclass
class RunResult:
    """metrics.json: what a run measured, typed; `extra` holds the task's own values and `audits` every audit's typed
    block (both written under metrics.json's extra, the audits' after the task's)."""

    task: TaskInfo
    model: str
    method: str
    headline_metric: str
    metrics: dict[str, MetricSummary]
    breakdown: dict[str, dict[str, SliceResult]] = field(default_factory=dict)
    counts: Counts = field(default_factory=Counts)
    extra: dict[str, Any] = field(default_factory=dict)
    audits: dict[str, Block] = field(default_factory=dict)
    complete: bool = False
    run_dir: str = ""
    this_invocation: Invocation = field(default_factory=lambda: _facts().Invocation())
    cost: Optional[Cost] = None
    metric_info: dict[str, MetricInfo] = field(default_factory=dict)  # name -> direction, binary, aggregation
    cluster_by: Optional[str] = None  # example-meta key of the resampling unit; None = the example
    schema_version: int = SCHEMA_VERSION
    #: metrics.json's extra keys in the order they came (task values and audit blocks interleave, e.g. a task's
    #: run_facts may give an audit's block): to_dict writes them back in it, so a read result writes the same bytes
    extra_order: list[str] = field(default_factory=list, repr=False, compare=False)

    @property
    def task_name(self) -> str:
        """The task's name."""
        return self.task.name

    @property
    def facts(self) -> RunFacts:
        """The task facts the core reads (verdict lines, chance levels, the fallback count, a probe's verdict)."""
        return _facts().RunFacts.of(self.extra)

    @staticmethod
    def of(agg: Aggregate, *, task: TaskInfo, model: str, method: str, complete: bool, run_dir: str,
           this_invocation: Invocation, backend_errors: int = 0, extra: Optional[dict[str, Any]] = None,
           cost: Optional[Cost] = None) -> "RunResult":
        """The result of a run from its aggregate, the audits' blocks (`extra`, after the aggregate's) and cost."""
        counts = Counts(**{**asdict(agg.counts), "backend_errors": backend_errors})
        merged = {**agg.extra, **(extra or {})}
        own, blocks = split_extra(merged)
        return RunResult(task=task, model=model, method=method, headline_metric=agg.headline_metric,
                         metrics=agg.metrics, breakdown=agg.breakdown, counts=counts,
                         extra=own, audits=blocks, complete=complete, run_dir=run_dir,
                         this_invocation=this_invocation, cost=cost, metric_info=agg.metric_info,
                         cluster_by=agg.cluster_by, extra_order=list(merged))

    @staticmethod
    def from_dict(d: dict[str, Any], where: str = "metrics.json") -> "RunResult":
        """From metrics.json content; refuses versions this reader does not know, naming the file."""
        v = d.get("schema_version")
        if v not in READABLE_VERSIONS:
            raise SchemaError(f"{where}: schema_version {v!r} is not readable by this recbench (reads "
                              f"{', '.join(map(str, READABLE_VERSIONS))}); upgrade recbench, or rerun the same command "
                              "to rebuild metrics.json from samples.jsonl")
        facts = _facts()
        try:
            own, blocks = split_extra(d.get("extra") or {})
            return RunResult(
                task=facts.TaskInfo.from_dict(d["task"]), model=str(d.get("model", "none")), method=str(d["method"]),
                headline_metric=str(d.get("headline_metric", "")),
                metrics={k: MetricSummary.from_dict(s) for k, s in (d.get("metrics") or {}).items()},
                breakdown={key: {val: SliceResult.from_dict(b) for val, b in vals.items()}
                           for key, vals in (d.get("breakdown") or {}).items()},
                counts=Counts.from_dict(d.get("counts") or {}), extra=own, audits=blocks,
                complete=bool(d.get("complete", False)), run_dir=str(d.get("run_dir", "")),
                this_invocation=facts.Invocation.from_dict(d.get("this_invocation") or {}),
                cost=None if d.get("cost") is None else facts.Cost.from_dict(d["cost"]),
                metric_info=MetricInfo.all_of(d.get("metric_info")), cluster_by=d.get("cluster_by"),
                schema_version=int(v),
                extra_order=list(d.get("extra") or {}))
        except (KeyError, TypeError, ValueError) as e:
            raise SchemaError(f"{where}: malformed ({type(e).__name__}: {e}); rerun the same command to rebuild it") from e

    def to_dict(self) -> dict[str, Any]:
        """The metrics.json form (schema_version first; the audits' blocks under extra, after the task's values)."""
        d = {**asdict(self), "task": self.task.to_dict(), "this_invocation": self.this_invocation.to_dict(),
             "cost": None if self.cost is None else self.cost.to_dict(),
             "metric_info": {k: v.to_dict() for k, v in self.metric_info.items()}}
        extra = {**d["extra"], **{k: b.to_dict() for k, b in self.audits.items()}}
        first = [k for k in self.extra_order if k in extra]
        d["extra"] = {k: extra[k] for k in [*first, *(k for k in extra if k not in first)]}
        return {"schema_version": SCHEMA_VERSION,
                **{k: v for k, v in d.items() if k not in ("schema_version", "audits", "extra_order")}}


def _facts() -> Any:
    """store/facts.py, imported on first use."""
    import recbench.store.facts as facts

    return facts


# ---- plan.json -------------------------------------------------------------------------------------------
@dataclass
class PlanResult:
    """plan.json (mode=plan): requests, tokens, cached share, context overflows and cost, without calling a model."""

    task: str
    model: str
    method: str
    examples: int
    already_finished: int
    requests: int = 0
    requests_exact: bool = True
    unique_requests: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    prompt_tokens_uncached: int = 0
    max_prompt_tokens: int = 0
    max_completion_tokens: int = 0
    over_context: int = 0
    context_length: Optional[int] = None
    tokenizer: str = "none"
    cost: Optional[dict[str, Any]] = None
    cost_uncached: Optional[dict[str, Any]] = None
    power: Optional[dict[str, Any]] = None
    judge: Optional[dict[str, Any]] = None  # judge=<model>: its requests, tokens and cost, apart (run/judge_plan.py)
    notes: list[str] = field(default_factory=list)

    @property
    def cached_share(self) -> Optional[float]:
        """Share of the unique requests already in the response cache."""
        return self.cached / self.unique_requests if self.unique_requests else None

    def to_dict(self) -> dict[str, Any]:
        """The plan.json form."""
        return {"schema_version": SCHEMA_VERSION, **asdict(self), "cached_share": self.cached_share}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "PlanResult":
        """From plan.json."""
        return PlanResult(**_known(PlanResult, d))
