"""Report settings (conf/report/layouts.yaml: subset and ignored config keys) and metric directions.

Directions come from the metric registry (recbench.api.metrics) or, for metrics a run registered itself
(e.g. a user's YAML benchmark), from the `metric_info` the run wrote into metrics.json. Per-benchmark tables and
plots belong to the tasks (Task.report_tables / Task.report_plots), not to this module.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Optional

import yaml

from recbench.api.metrics import metric_spec


@dataclass
class Layouts:
    """Subset and ignored config keys, plus the metric properties the loaded runs recorded."""

    subset_keys: list[str]
    ignore_keys: list[str]
    metric_info: dict[str, dict[str, Any]] = field(default_factory=dict)

    @staticmethod
    def load(path: Optional[str | Path] = None) -> "Layouts":
        """The packaged settings (or a YAML file of the same shape)."""
        text = (Path(path).read_text() if path else
                resources.files("recbench.conf").joinpath("report", "layouts.yaml").read_text())
        d = yaml.safe_load(text) or {}
        return Layouts(subset_keys=list(d.get("subset_keys", [])), ignore_keys=list(d.get("ignore_keys", [])))

    def note_metrics(self, info: dict[str, dict[str, Any]]) -> None:
        """Remember what a run recorded about its metrics (direction, binary-ness)."""
        for k, v in (info or {}).items():
            self.metric_info.setdefault(k, v)

    def higher_is_better(self, metric: str) -> Optional[bool]:
        """Direction of a metric, from the registry or the runs' recorded metric_info; None = no direction."""
        return metric_spec(metric, self.metric_info.get(metric)).higher_is_better
