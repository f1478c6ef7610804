"""Metric legends: one line per metric shown (its meaning, direction, and on which examples it is defined when not
all), read from the metric registry, for the report's tables and the terminal summary."""
from __future__ import annotations

from typing import Iterable

from recbench.api.metric_spec import DIRECTION_WORDS
from recbench.api.metrics import find_spec, legend


def legend_lines(metric_names: Iterable[str]) -> list[str]:
    """One legend line per distinct metric name, in first-seen order ('hr@10' explained by its family 'hr')."""
    lines = []
    for name in dict.fromkeys(str(n) for n in metric_names if n):
        spec = find_spec(name)
        lines.append(legend(spec, name) if spec is not None
                     else f"{name}: not registered, so its meaning is unknown ({DIRECTION_WORDS['unknown']})")
    return lines


def table_metrics(table) -> list[str]:
    """The metrics a report table shows, in column order (its cells' `metric`)."""
    return list(dict.fromkeys(c.metric for _, cells in table.rows for c in cells if getattr(c, "metric", None)))
