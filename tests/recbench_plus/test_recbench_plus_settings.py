"""RecBench+ task and method keys are checked against their classes' settings_rules by build_task, before any
data is read: one ConfigError naming the key and what is valid (the mechanism: tests/core/test_core_settings.py)."""
from __future__ import annotations

import pytest

from tests.helpers import assert_build_task_refuses

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("overrides, message", [
    (["task=recbench_plus", "task.types=[]"], "task.types=[]: must be a list of at least 1"),
    (["task=recbench_plus", "task.domain=tv"], "task.domain=tv: must be one of movie, book"),
    (["task=recbench_plus", "task.match_threshold=5"], "task.match_threshold=5: must be a number in (0, 1]"),
    (["task=recbench_plus", "method=assistant", "method.k=-1"], "method.k=-1: must be a whole number >= 0"),
])
def test_build_task_refuses_before_reading_data(overrides, message):
    assert_build_task_refuses(overrides, message)
