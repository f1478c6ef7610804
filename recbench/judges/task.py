"""The judge pass as a task the run's EvalLoop drives: one example per judged answer (what the judge reads: the
context, the answer, and for the pairwise protocol the reference run's answer), the protocol as its one method, and
the judged metrics as its score. Its records are the judge records of docs/judges.md."""
from __future__ import annotations

import math
from typing import Any, Optional

from recbench.api.judge_metrics import judge_metric_specs
from recbench.api.metrics import MetricSpec
from recbench.api.task import Method, Task, TaskView
from recbench.api.types import Example, MethodGen, Outcome
from recbench.api.variant import PLAIN, Variant
from recbench.judges.protocols import Protocol


class JudgeTask(Task):
    """The judged answers of a run as a task: `load` gives them, `score` gives the protocol's metrics."""

    def __init__(self, tag: str, protocol: Protocol, examples: list[Example]):
        super().__init__({"name": tag})
        self.name = f"judge {tag}"
        self.protocol, self.examples = protocol, examples

    def load(self) -> list[Example]:
        """One example per judged answer."""
        return self.examples

    def score(self, example: Example, outcome: Outcome) -> dict[str, float]:
        """The protocol's judged metrics (NaN where the judge's answer failed)."""
        return self.protocol.metrics(outcome)

    def rubric(self) -> dict[str, str]:
        """The rubric the judge was asked with."""
        return dict(self.protocol.setup.rubric)

    def declared_metrics(self) -> dict[str, MetricSpec]:
        """judge_<aspect> per aspect and judge_win_rate."""
        return {s.name: s for s in judge_metric_specs(self.rubric())}


class JudgeMethod(Method[TaskView]):
    """The protocol's requests for one judged answer, then its reading as an Outcome."""

    single_round = True

    def __init__(self, task: JudgeTask, tag: str):
        super().__init__(task, {"name": tag})
        self.name = tag
        self.protocol = task.protocol

    def run(self, example: Example, variant: Variant = PLAIN) -> MethodGen:
        """The protocol's request generator, with the judge's tag in the record's details."""
        outcome = yield from self.protocol.ask(example)
        outcome.details = {"judge": self.name, "protocol": self.protocol.key(), **outcome.details}
        return outcome


def judge_examples(task: Any, examples: list[Example], records: list[Any],
                   reference: Optional[dict[str, Any]] = None) -> list[Example]:
    """One judge example per finished record of the run (in the run's example order): the task's judge context and
    answer, and the reference run's answer to the same example id (`reference`: records by id; pairwise)."""
    by_id = {r.id: r for r in records}
    out = []
    for e in examples:
        r = by_id.get(e.id)
        if r is None:
            continue
        data = {"context": task.judge_context(e), "answer": task.judge_answer(r)}
        if reference is not None:
            data["reference_answer"] = task.judge_answer(reference[e.id])
        out.append(Example(e.id, data, dict(r.meta)))
    return out


def nan_to_none(metrics: dict[str, float]) -> dict[str, Optional[float]]:
    """Metrics with NaN as None (what a joined record holds for an undefined value)."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in metrics.items()}
