"""Config-only benchmarks in reports: one table per task with every metric it computes."""
from __future__ import annotations

from recbench.report.presentation import Presentation

PRESENTATION = Presentation(benchmark="generic", title="Config-only benchmarks", order=3)
