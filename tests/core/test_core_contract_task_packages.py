"""Issue 24, item 4: a task package that fails to import is an error naming the package and the cause (the metric
registry's scan of recbench.tasks and `python -m recbench.build` both), never silently skipped. The broken package
is planted in a temporary folder added to recbench.tasks' search path."""
from __future__ import annotations

import sys

import pytest

import recbench.tasks
from recbench.api import metrics
from recbench.api.errors import CannotRun
from recbench.cli import build

pytestmark = pytest.mark.fast
BROKEN = "zz_issue24_broken"


@pytest.fixture
def broken_package(tmp_path, monkeypatch):
    """recbench.tasks.zz_issue24_broken: its task.py imports a module that does not exist; its build.py is fine."""
    pkg = tmp_path / BROKEN
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "task.py").write_text('"""A broken task module."""\nimport numpy\nimport recbench_no_such_dependency\n')
    (pkg / "build.py").write_text("from recbench.tasks.zz_issue24_broken.task import nothing\n\n\n"
                                  "def main(argv):\n    pass\n")
    monkeypatch.setattr(recbench.tasks, "__path__", [*recbench.tasks.__path__, str(tmp_path)])
    monkeypatch.setattr(metrics, "_PLUGINS_LOADED", False)
    yield pkg
    for name in [m for m in sys.modules if m.startswith(f"recbench.tasks.{BROKEN}")]:
        del sys.modules[name]


def test_the_scan_lists_every_task_package():
    assert {"generic", "llmrec", "perrec", "recbench_plus"} <= set(metrics.task_packages())


def test_a_broken_task_package_stops_the_metric_scan_naming_package_cause_and_line(broken_package):
    assert BROKEN in metrics.task_packages()
    with pytest.raises(CannotRun) as e:
        metrics.find_spec("issue24_metric_nobody_has")  # unknown name: the scan runs, and stops at the broken package
    msg = str(e.value)
    assert f"task package '{BROKEN}' failed to import" in msg
    assert "ModuleNotFoundError: No module named 'recbench_no_such_dependency'" in msg
    assert f"{broken_package / 'task.py'}:3" in msg  # the line that raised
    assert isinstance(e.value.__cause__, ModuleNotFoundError)
    assert metrics._PLUGINS_LOADED is False  # not marked done: the next lookup says it again
    with pytest.raises(CannotRun, match=BROKEN):
        metrics.registered()


def test_a_broken_task_package_is_named_by_the_build_dispatcher(broken_package):
    assert build.builders()[BROKEN] == f"recbench.tasks.{BROKEN}.build"  # listed from disk, nothing imported
    with pytest.raises(CannotRun, match=rf"task package '{BROKEN}' failed to import: recbench.tasks.{BROKEN}.build "
                                        r"raised ModuleNotFoundError: .*task.py:3"):  # build.py imports the task
        build.main([BROKEN])


def test_a_working_package_imports_through_the_same_path():
    mod = metrics.import_task_module("perrec")
    assert mod.__name__ == "recbench.tasks.perrec.task" and hasattr(mod, "PerRecTask")
