"""Typed JSON objects that keep their bytes: `Facts`, the base of metrics.json's typed facts (store/facts.py), and
`MetricInfo`, one entry of metrics.json `metric_info` (what `metrics.py` `MetricSpec.info` writes and `metric_spec`
reads back). The `extra` keys of the task facts the core reads (store/facts.py `RunFacts`).

A `Facts` is read with `from_dict` and written back with `to_dict` as exactly the JSON it was read from: the keys it
had, in their order (a key this recbench does not know, e.g. a counter of an older version, is kept in `other` and
written back in its place), so a run dir read and written again keeps its bytes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, TypeVar

F = TypeVar("F", bound="Facts")


@dataclass
class Facts:
    """A typed JSON object: its declared fields, the keys it does not declare (`other`) and the order of its keys."""

    other: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    keys: list[str] = field(default_factory=list, repr=False, compare=False)

    @classmethod
    def from_dict(cls: type[F], d: Mapping[str, Any]) -> F:
        """From the JSON object: declared keys typed by their field's default, the rest in `other`."""
        names = _declared(cls)
        known = {k: _typed(cls, k, v) for k, v in d.items() if k in names}
        return cls(**known, other={k: v for k, v in d.items() if k not in names}, keys=list(d))

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: every key it was built from, in that order (typed values for the declared ones)."""
        names = _declared(type(self))
        return {k: getattr(self, k) if k in names else self.other[k] for k in self.keys}


def _declared(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)} - {"other", "keys"}


def _typed(cls: type, key: str, value: Any) -> Any:
    """A JSON value as its field's type (int and float counters; bool; None and text left as they are)."""
    default = next(f.default for f in dataclasses.fields(cls) if f.name == key)
    if value is None or isinstance(default, bool) or default is None:
        return value
    if isinstance(default, float) and isinstance(value, (int, float)):
        return float(value)
    return value


@dataclass
class MetricInfo(Facts):
    """One entry of metrics.json `metric_info`: a metric's direction, binary-ness and aggregation as the run knew
    them (`higher_is_better`: the form of run dirs written before directions were named)."""

    direction: Optional[str] = None  # higher | lower | unknown
    binary: bool = False
    aggregation: str = "mean"
    higher_is_better: Optional[bool] = None

    @staticmethod
    def all_of(d: Optional[Mapping[str, Any]]) -> dict[str, "MetricInfo"]:
        """metric_info by metric name (an entry already typed is kept)."""
        return {k: v if isinstance(v, MetricInfo) else MetricInfo.from_dict(v or {}) for k, v in (d or {}).items()}


#: the metrics.json `extra` keys the core reads of a task's run, each a field of store/facts.py `RunFacts`
SUMMARY, RANDOM_EXPECTATION, PROBE_VERDICT = "summary", "random_expectation", "memorization"
#: the corpus metrics of a task that scores failed answers with a fallback value: how many, and the value
FALLBACK_COUNT, FALLBACK_VALUE = "n_fallback", "fallback_rating"
