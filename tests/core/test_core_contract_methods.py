"""Issue 24, item 4: model-free methods share one base class (ReferenceMethod: `predict(example) -> Outcome`, no fake
generator), and the task functions a method needs are reached through a typed interface (the method's type
parameter, a Protocol), checked by Task.make_method: no cast of the task anywhere in the task packages."""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Protocol

import pytest
from omegaconf import OmegaConf

from recbench.api.task import Method, ReferenceMethod, TaskView, missing_members
from recbench.api.types import Example, Outcome
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast
TASKS = Path(__file__).resolve().parents[2] / "tasks"
#: task configs on the bundled data (the others need ../shared/data; their classes are the same)
BUNDLED = ["perrec", "recbench_plus", "llmrec_rating", "llmrec_explanation", "llmrec_summary", "llmrec_sequential",
           "llmrec_direct", "generic_yesno"]


def _task(name: str):
    from recbench.run.construct import build_task

    return build_task(compose_cfg([f"task={name}"]))


def _unreachable_yields(path: Path) -> list[str]:
    """`yield` statements placed after a `return` in the same block (a function faking a generator)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        seen_return = False
        for stmt in body:
            if isinstance(stmt, ast.Return):
                seen_return = True
            elif seen_return and isinstance(stmt, ast.Expr) and isinstance(stmt.value, (ast.Yield, ast.YieldFrom)):
                out.append(f"{path.relative_to(TASKS.parent)}:{stmt.lineno}")
    return out


def test_no_method_fakes_a_generator_with_an_unreachable_yield():
    found = [hit for p in sorted(TASKS.rglob("*.py")) for hit in _unreachable_yields(p)]
    assert found == []


def test_the_unreachable_yield_finder_sees_one(tmp_path):
    planted = TASKS / "_issue24_probe.py"
    try:
        planted.write_text("def run(x):\n    return x\n    yield  # fake\n")
        assert _unreachable_yields(planted) == ["tasks/_issue24_probe.py:3"]
    finally:
        planted.unlink()


@pytest.mark.parametrize("task_name", BUNDLED)
def test_every_model_free_method_is_a_reference_method_and_every_method_gets_its_interface(task_name):
    task = _task(task_name)
    assert task.methods
    for name, cls in task.methods.items():
        assert issubclass(cls, Method) and (not cls.needs_backend) == issubclass(cls, ReferenceMethod), \
            f"{task_name}/{name}: {cls.__name__} (needs_backend={cls.needs_backend})"
        interface = cls.task_interface()
        assert interface is not None, f"{cls.__name__} names no task interface (Method[<Protocol>])"
        assert missing_members(task, interface) == [], f"{task_name}/{name}"


def test_shipped_methods_name_their_benchmark_interfaces():
    from recbench.tasks.generic.task import GenericTask, RandomChoice, ZeroShot as GenericZeroShot
    from recbench.tasks.llmrec.methods import ItemKNN, LLMRecTaskView, RankTaskView, ReviewTaskView, UserMean, ZeroShot
    from recbench.tasks.perrec.methods import Listwise, PerRecTaskView, RandomOrder
    from recbench.tasks.recbench_plus.methods import AssistantMethod, RecBenchPlusTaskView
    from recbench.tasks.recbench_plus.reference import PopularMatch

    assert Listwise.task_interface() is PerRecTaskView and RandomOrder.task_interface() is TaskView
    assert ZeroShot.task_interface() is LLMRecTaskView and UserMean.task_interface() is ReviewTaskView
    assert ItemKNN.task_interface() is RankTaskView
    assert AssistantMethod.task_interface() is RecBenchPlusTaskView is PopularMatch.task_interface()
    assert GenericZeroShot.task_interface() is GenericTask is RandomChoice.task_interface()
    from typing_extensions import get_protocol_members

    assert get_protocol_members(PerRecTaskView) == {"name", "cfg", "released", "heldout", "profile_table"}


def test_no_method_casts_its_task():
    casts = [f"{p.relative_to(TASKS)}:{i}" for p in sorted(TASKS.rglob("*.py"))
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if "self.task" in line and "type: ignore" in line
             or re.search(r"task: \w+ = self\.task\b.*type: ignore", line)]
    assert casts == []


class NeedsShelf(TaskView, Protocol):
    """A method's needs: a shelf of items."""

    def shelf(self) -> list[str]:
        """The items on the shelf."""


class FirstOnShelf(ReferenceMethod[NeedsShelf]):
    """The first item of the task's shelf, for every example."""

    name = "first_on_shelf"

    def predict(self, example: Example) -> Outcome:
        """The first shelf item."""
        return Outcome(self.task.shelf()[0])


def test_make_method_refuses_a_task_without_the_interface_naming_what_it_lacks():
    from recbench.tasks.perrec.task import PerRecTask

    class Shelved(PerRecTask):
        methods = {**PerRecTask.methods, "first_on_shelf": FirstOnShelf}

    task = Shelved(compose_cfg(["task=perrec"]).task)
    with pytest.raises(TypeError, match=r"method 'first_on_shelf' \(FirstOnShelf\) needs NeedsShelf of its task; "
                                        r"task 'perrec' \(Shelved\) lacks: shelf"):
        task.make_method(OmegaConf.create({"name": "first_on_shelf"}))

    class WithShelf(Shelved):
        def shelf(self) -> list[str]:
            return ["Heat", "Alien"]

    method = WithShelf(compose_cfg(["task=perrec"]).task).make_method(OmegaConf.create({"name": "first_on_shelf"}))
    gen = method.run(Example("e1", {}))
    with pytest.raises(StopIteration) as stop:  # a generator that asks nothing: the Outcome at the first step
        next(gen)
    assert stop.value.value == Outcome("Heat")


def test_the_interface_check_runs_no_property(monkeypatch):
    """A rank task's `data` (a cached property loading the P5 files) is found without being loaded."""
    task = _task("llmrec_sequential")
    from recbench.tasks.llmrec.methods import RankTaskView

    assert missing_members(task, RankTaskView) == [] and "data" not in vars(task)

