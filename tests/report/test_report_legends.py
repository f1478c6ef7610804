"""Metric legends: every registered metric has a one-line meaning; legend lines state it with the direction and,
where a metric is defined on fewer examples than the slice has, why."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from recbench.api.metrics import registered
from recbench.report.legends import legend_lines

pytestmark = pytest.mark.fast


def test_every_registered_metric_declares_a_meaning():
    # recbench's own metrics only: tests register toy metrics in this process (the registry is global), so the
    # names come from a fresh interpreter that imported every task package
    names = set(json.loads(subprocess.run(
        [sys.executable, "-c", "import json; from recbench.api.metrics import registered; "
         "print(json.dumps(sorted(registered())))"],
        check=True, capture_output=True, text=True).stdout))
    specs = {n: s for n, s in registered().items() if n in names}
    assert {"ptc", "cmr", "kg_existence", "ftr", "strict_recall", "hr", "rmse", "coverage"} <= set(specs)
    missing = sorted(n for n, s in specs.items() if not s.meaning.strip())
    assert missing == [], f"metrics without a meaning (MetricSpec(..., meaning=...)): {missing}"
    long = sorted(n for n, s in specs.items() if "\n" in s.meaning)
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
