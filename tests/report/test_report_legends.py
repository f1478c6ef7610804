"""Metric legends: every registered metric has a one-line meaning; legend lines state it with the direction and,
where a metric is defined on fewer examples than the slice has, why."""
from __future__ import annotations

import pytest

from recbench.api.metrics import registered
from recbench.report.legends import legend_lines

pytestmark = pytest.mark.fast


def test_every_registered_metric_declares_a_meaning():
    from recbench.api.metric_spec import _REGISTRY
    from recbench.cli.task_index import build_index

    registered()  # the task packages' declarations; then recbench's own: the standard ones and every task class's
    specs = {n: s.meaning for n, s in _REGISTRY.items() if s.fn is not None and s.fn.__module__.startswith("recbench.")}
    specs.update({m["name"]: m["meaning"] for e in build_index().values() for m in e["metrics"]})
    assert {"ptc", "cmr", "kg_existence", "ftr", "strict_recall", "hr", "rmse", "coverage"} <= set(specs)
    missing = sorted(n for n, meaning in specs.items() if not meaning.strip())
    assert missing == [], f"metrics without a meaning (MetricSpec(..., meaning=...)): {missing}"
    long = sorted(n for n, meaning in specs.items() if "\n" in meaning)
    assert long == []


def test_legend_lines_state_meaning_direction_and_why_n():
    lines = legend_lines(["ftr", "cmr", "hr@10", "n_recommended", "ftr", "no_such_metric"])
    assert len(lines) == 5  # one per distinct name, first-seen order
    assert lines[0].startswith("ftr: format-error rate") and lines[0].endswith("(lower is better)")
    assert "(higher is better); defined on condition queries only (explicit, implicit, misinformed)" in lines[1]
    assert "interest and demographics queries have none" in lines[1]
    assert lines[2].startswith("hr@10: hit rate") and "(higher is better)" in lines[2]
    assert lines[3].endswith("(no direction)")
    assert lines[4] == "no_such_metric: not registered, so its meaning is unknown (direction unknown: not registered)"
