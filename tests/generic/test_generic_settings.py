"""config-only (generic) task and method keys are checked against their classes' settings_rules by build_task, before any
data is read: one ConfigError naming the key and what is valid (the mechanism: tests/core/test_core_settings.py)."""
from __future__ import annotations

import pytest

from tests.helpers import assert_build_task_refuses

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("overrides, message", [
    (["task=generic_yesno", "task.constrained=sometimes"], "task.constrained=sometimes: must be true or false"),
])
def test_build_task_refuses_before_reading_data(overrides, message):
    assert_build_task_refuses(overrides, message)
