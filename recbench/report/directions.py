"""Metric directions in reports: from the metric registry (recbench.api.metrics) or, for metrics a run registered
itself (e.g. a user's YAML benchmark), from the `metric_info` the run wrote into metrics.json."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

from recbench.api.facts import MetricInfo
from recbench.api.metrics import metric_spec


@dataclass
class Directions:
    """Which way each metric is better, for best marks, arrows and captions."""

    metric_info: dict[str, MetricInfo] = field(default_factory=dict)

    @staticmethod
    def of(infos: Iterable[dict[str, MetricInfo]]) -> "Directions":
        """Directions knowing what the runs recorded (the first run to record a metric wins)."""
        d = Directions()
        for info in infos:
            d.note_metrics(info)
        return d

    def note_metrics(self, info: dict[str, MetricInfo]) -> None:
        """Remember what a run recorded about its metrics (direction, binary-ness)."""
        for k, v in (info or {}).items():
            self.metric_info.setdefault(k, v)

    def higher_is_better(self, metric: str) -> Optional[bool]:
        """Direction of a metric, from the registry or the runs' recorded metric_info; None = no direction."""
        return metric_spec(metric, self.metric_info.get(metric)).higher_is_better
