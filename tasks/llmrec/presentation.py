"""LLMRec in reports, declared: one table per task, each showing its sub-task's own metrics."""
from __future__ import annotations

from recbench.report.presentation import Presentation, TableSpec
from recbench.tasks.llmrec.task import DirectTask, ExplanationTask, RatingTask, SequentialTask, SummaryTask

TEXT = ("bleu4", "rouge1", "rouge2", "rougeL")
#: the judged metrics (judge=MODEL, docs/judges.md): a column shows only where some run was judged
JUDGED = ("judge_win_rate", *(f"judge_{a}" for a in (*ExplanationTask.judge_rubric, *SummaryTask.judge_rubric)))
RANKING = ("hr@1", "hr@5", "ndcg@5", "hr@10", "ndcg@10")

PRESENTATION = Presentation(benchmark="llmrec", title="LLMRec", order=2, tables=(TableSpec(
    per_task=True, task_metrics={RatingTask: ("rmse", "mae"), ExplanationTask: TEXT + JUDGED,
                                 SummaryTask: TEXT + JUDGED,
                                 SequentialTask: RANKING, DirectTask: RANKING}),))
