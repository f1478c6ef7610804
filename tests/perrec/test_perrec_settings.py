"""PerRecBench task and method keys are checked against their classes' settings_rules by build_task, before any
data is read: one ConfigError naming the key and what is valid (the mechanism: tests/core/test_core_settings.py)."""
from __future__ import annotations

import pytest

from tests.helpers import assert_build_task_refuses

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("overrides, message", [
    (["task.history_max=0"], "task.history_max=0: must be a whole number >= 1"),
    (["task.format=bogus"], "task.format=bogus: must be one of recbench, released"),
    (["task.legacy_tau=maybe"], "task.legacy_tau=maybe: must be true or false"),
    (["task.difficulties=[]"], "task.difficulties=[]: must be a list of at least 1"),
    (["method=listwise_fewshot", "method.shots=-1"], "method.shots=-1: must be a whole number >= 0"),
    (["method=listwise_sc", "method.samples=0"], "method.samples=0: must be a whole number >= 1"),
    (["method=random", "method.seed=abc"], "method.seed=abc: must be a whole number, or null"),
])
def test_build_task_refuses_before_reading_data(overrides, message):
    assert_build_task_refuses(["task=perrec", *overrides], message)
