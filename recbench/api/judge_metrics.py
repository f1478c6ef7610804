"""The metrics an LLM judge gives a run (docs/judges.md): `judge_<aspect>` (the judge's 1-5 score of one aspect of
a task's rubric, mean aggregation) and `judge_win_rate` (against a reference run, both orders asked; ties count half).
Declared here once, so every task that declares a rubric gets the same direction, binary-ness and aggregation."""
from __future__ import annotations

import re
from typing import Mapping

from recbench.api.errors import ConfigError
from recbench.api.metric_spec import MetricSpec, register

#: the prefix of every judged metric
PREFIX = "judge_"
#: an aspect name: it becomes a JSON key of the judge's answer and a metric name
ASPECT = re.compile(r"[a-z][a-z0-9_]*")

WIN_RATE = MetricSpec(
    "judge_win_rate",
    meaning="LLM judge, pairwise (judge=MODEL judge.protocol=pairwise judge.reference=RUN_DIR): share of examples "
            "where the judge preferred this run's answer to the reference run's in both display orders (a tie or a "
            "disagreement between the orders counts half), 0-1; the judge is named in metrics.json extra.judge, its "
            "validity in extra.judge_validity",
    doc="pairwise judge: 1 win, 0.5 tie, 0 loss per example", why_n="defined where both judge answers parsed")
register(WIN_RATE)


def judge_metric_name(aspect: str) -> str:
    """The metric of one rubric aspect: judge_<aspect>."""
    return f"{PREFIX}{aspect}"


def aspect_metric(aspect: str, definition: str) -> MetricSpec:
    """The metric of one rubric aspect: the judge's whole 1-5 score, higher is better, averaged."""
    return MetricSpec(judge_metric_name(aspect), meaning=f"LLM judge, pointwise (judge=MODEL): the judge's score of "
                      f"{aspect} ({definition}), 1-5, mean over answers",
                      doc=f"LLM judge score 1-5: {aspect}", why_n="defined where the judge's answer parsed")


def check_rubric(rubric: Mapping[str, str], where: str) -> dict[str, str]:
    """A rubric as a plain dict, refusing an aspect that cannot be a JSON key and metric name (ConfigError)."""
    out = {str(a): str(d) for a, d in rubric.items()}
    bad = [a for a in out if not ASPECT.fullmatch(a)]
    if bad:
        raise ConfigError(f"{where}: aspect name(s) {', '.join(map(repr, bad))} must be lower-case words joined by _ "
                          "(they become JSON keys and judge_<aspect> metric names)")
    return out


def judge_metric_specs(rubric: Mapping[str, str]) -> tuple[MetricSpec, ...]:
    """The judged metrics of a task's rubric: judge_<aspect> per aspect, and judge_win_rate."""
    return (*(aspect_metric(a, d) for a, d in rubric.items()), WIN_RATE)
