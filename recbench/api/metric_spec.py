"""A metric's declaration (MetricSpec) and the two tables that hold them: metrics selectable by name (`register`)
and the metrics task classes declare (`declare`). Lookups, checks and the standard metrics live in
recbench.api.metrics, which re-exports these names."""
from __future__ import annotations

import re

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Optional

MetricFn = Callable[..., float]
Aggregation = Literal["mean", "corpus"]
Direction = Literal["higher", "lower", "none", "unknown"]
#: directions that rank systems (the others never give a verdict)
RANKING_DIRECTIONS = ("higher", "lower")
#: how a legend states each direction
DIRECTION_WORDS = {"higher": "higher is better", "lower": "lower is better", "none": "no direction",
                   "unknown": "direction unknown: not registered"}


@dataclass(frozen=True)
class MetricSpec:
    """A registered metric.

    `fn(prediction, truth, **params)` gives the per-example value (None for metrics a task's score() computes);
    `aggregation` is "mean" (the run value is the mean of per-example values) or "corpus" (a statistic of the
    whole set, e.g. corpus BLEU or RMSE); `binary` means per-example values are 0/1 (exact McNemar tests apply).
    `corpus` computes the metric's run-level value, written to metrics.json `extra` (see `corpus_values`): with
    `per_example_name` it is `corpus(values)` over that per-example value (RMSE from squared errors: the form a
    paired comparison resamples); without, `corpus(records, task)` over the run's records (corpus BLEU, RMSE over
    parsed answers, corpus item shares), returning None where the metric does not apply to the run. A mean metric
    may have a corpus value too (an item share per answer, and over all named items).
    `higher_is_better=None` declares a metric without a direction (a descriptive count): it is compared but never
    called better or worse. `declared=False` marks the stand-in for a metric nobody registered (direction unknown).
    `meaning` is the one line a reader sees in legends (what the value says; the direction is added from the spec);
    `why_n` says on which examples the metric is defined when that is fewer than all (why a slice's n is smaller).
    """

    name: str
    higher_is_better: Optional[bool] = True
    binary: bool = False
    aggregation: Aggregation = "mean"
    fn: Optional[MetricFn] = None
    on_failure: Optional[float] = None  # value of a failed parse; None = undefined (NaN)
    params: tuple[str, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)
    corpus: Optional[Callable[..., Optional[float]]] = None
    per_example_name: Optional[str] = None
    doc: str = ""
    declared: bool = True
    meaning: str = ""
    why_n: str = ""

    @property
    def direction(self) -> Direction:
        """'higher' or 'lower' (is better), 'none' (declared without a direction) or 'unknown' (not registered)."""
        if not self.declared:
            return "unknown"
        if self.higher_is_better is None:
            return "none"
        return "higher" if self.higher_is_better else "lower"

    @property
    def ranks(self) -> bool:
        """True when the metric has a direction, so a difference can make one system better."""
        return self.direction in RANKING_DIRECTIONS

    def info(self) -> dict[str, Any]:
        """What a run dir records about the metric (direction, binary-ness, aggregation); higher_is_better is None
        when the direction is 'none' or 'unknown'."""
        return {"higher_is_better": self.higher_is_better if self.ranks else None, "direction": self.direction,
                "binary": self.binary, "aggregation": self.aggregation}


_REGISTRY: dict[str, MetricSpec] = {}  # register(): metrics selectable by name (and any a user adds)
_DECLARED: dict[str, MetricSpec] = {}  # declare(): the metrics task classes declare (Task.metric_specs)


def _add(table: dict[str, MetricSpec], s: MetricSpec, how: str) -> None:
    for other in (_REGISTRY, _DECLARED):
        old = other.get(s.name)
        if old is not None and old.info() != s.info():
            raise ValueError(f"metric '{s.name}' {how} with properties {s.info()}, but it is already declared with "
                             f"{old.info()}: one name, one direction, binary-ness and aggregation")
    old = table.get(s.name)
    if old is None or (s.fn is not None and old.fn is None):
        table[s.name] = s


def register(*specs: MetricSpec) -> None:
    """Add metrics selectable by name (a per-example `fn`); registering a name again with a different direction,
    binary-ness or aggregation is an error. A task's own metrics are declared in its class (Task.metric_specs)."""
    for s in specs:
        _add(_REGISTRY, s, "registered twice")


def declare(owner: str, specs: Iterable[MetricSpec]) -> None:
    """Record the metrics a task class declares (called when the class is defined, never by hand); a name another
    task or the registry already uses with a different direction, binary-ness or aggregation is an error."""
    for s in specs:
        _add(_DECLARED, s, f"declared by {owner}")


def legend(spec: MetricSpec, name: str = "") -> str:
    """One legend line: 'name: meaning (higher is better); defined on ...' (the meaning, else the doc); `name` is
    the name shown ('hr@10' for the family 'hr')."""
    text = spec.meaning or spec.doc or "(no meaning declared)"
    cut = (name or spec.name).partition("@")[2]
    if cut.isdigit():  # 'hr@5': 'the first 5', not the family's 'the first k'
        text = re.sub(r"\bfirst k\b", f"first {cut}", text)
    line = f"{name or spec.name}: {text} ({DIRECTION_WORDS[spec.direction]})"
    return f"{line}; {spec.why_n}" if spec.why_n else line
