"""LLMRec task and method keys are checked against their classes' settings_rules by build_task, before any
data is read: one ConfigError naming the key and what is valid (the mechanism: tests/core/test_core_settings.py)."""
from __future__ import annotations

import pytest

from tests.helpers import assert_build_task_refuses

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("overrides, message", [
    (["task=llmrec_rating", "method=global_mean", "task.fallback_rating=9"], "task.fallback_rating=9: must be a number in [1, 5]"),
    (["task=llmrec_explanation", "task.reference=bogus"], "task.reference=bogus: must be one of first_sentence, text"),
    (["task=llmrec_sequential", "method=popularity", "task.ks=[0]"], "task.ks=[0]: must be a list"),
    (["task=llmrec_sequential", "method=popularity", "task.history_max=0"], "task.history_max=0: must be a whole number >= 1"),
    (["task=llmrec_summary", "method=lead", "method.words=0"], "method.words=0: must be a whole number >= 1"),
    (["task=llmrec_direct", "method=item_knn", "method.recency_decay=0"], "method.recency_decay=0: must be a number in (0, 1]"),
])
def test_build_task_refuses_before_reading_data(overrides, message):
    assert_build_task_refuses(overrides, message)
