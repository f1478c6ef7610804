"""Per-benchmark report layouts, read from conf/report/layouts.yaml (packaged as recbench.conf)."""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Optional

import yaml


@dataclass
class Layouts:
    """Benchmarks (title, task prefixes, layout settings), metric directions, subset and ignored config keys."""

    benchmarks: dict[str, dict[str, Any]]
    lower_is_better: set[str]
    subset_keys: list[str]
    ignore_keys: list[str]

    @staticmethod
    def load(path: Optional[str | Path] = None) -> "Layouts":
        """The packaged layouts (or a YAML file of the same shape)."""
        text = (Path(path).read_text() if path else
                resources.files("recbench.conf").joinpath("report", "layouts.yaml").read_text())
        d = yaml.safe_load(text)
        return Layouts(benchmarks=d["benchmarks"], lower_is_better=set(d.get("lower_is_better", [])),
                       subset_keys=list(d.get("subset_keys", [])), ignore_keys=list(d.get("ignore_keys", [])))

    def benchmark_of(self, task: str) -> str:
        """The benchmark a task name belongs to (first matching prefix; '' matches anything)."""
        for name, b in self.benchmarks.items():
            if any(task.startswith(p) for p in b.get("tasks", [])):
                return name
        return "other"

    def title(self, benchmark: str) -> str:
        """Display title of a benchmark."""
        return str(self.benchmarks.get(benchmark, {}).get("title", benchmark))

    def higher_is_better(self, metric: str) -> bool:
        """Direction of a metric (for best / second-best marks)."""
        return metric not in self.lower_is_better
