"""Metric legends: one line per metric shown (its meaning, direction, and on which examples it is defined when not
all), read from the metric registry, for the report's tables and the terminal summary."""
from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping, Optional

from recbench.api.metric_spec import DIRECTION_WORDS
from recbench.api.metrics import find_spec, legend


def legend_lines(metric_names: Iterable[str], own: Optional[Mapping[str, str]] = None) -> list[str]:
    """One legend line per distinct metric name, in first-seen order ('hr@10' explained by its family 'hr'); `own`:
    the meanings the run's task declares, which win over a registered metric of the same name (a task's own ndcg),
    as `list metrics --task` shows them."""
    lines = []
    for name in dict.fromkeys(str(n) for n in metric_names if n):
        spec = find_spec(name)
        if spec is not None and own and own.get(name):
            spec = dataclasses.replace(spec, meaning=own[name])
        lines.append(legend(spec, name) if spec is not None
                     else f"{name}: not registered, so its meaning is unknown ({DIRECTION_WORDS['unknown']})")
    return lines


def table_metrics(table) -> list[str]:
    """The metrics a report table shows, in column order (its cells' `metric`)."""
    return list(dict.fromkeys(c.metric for _, cells in table.rows for c in cells if getattr(c, "metric", None)))
