"""The task classes' method names and declared metrics, kept in task_index.json beside this module, so `list
methods --task T` and `list metrics` answer without importing the task packages (pandas, networkx: seconds on a
busy machine). `python -m recbench.cli.task_index` rewrites the file; a test fails when it differs from the classes.
"""
from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

INDEX = Path(__file__).resolve().parent / "task_index.json"
REGENERATE = "python -m recbench.cli.task_index"


def task_targets() -> list[str]:
    """The `_target_` class paths of the packaged task configs (merged with their defaults), sorted."""
    from recbench.api.conf_files import conf_dir, merged

    tasks = [p.stem for p in (conf_dir() / "task").glob("*.yaml")]
    return sorted({str(t) for n in tasks if (t := merged("task", n).get("_target_"))})


def class_entry(target: str) -> dict[str, Any]:
    """One class's method names and declared metrics (name, direction, meaning, why_n), imported; a class whose
    answers are item lists (it defines item_catalogue) lists the list metrics (api/item_lists.py), and one with a
    judge rubric its judged metrics (judge_<aspect>, judge_win_rate: docs/judges.md)."""
    from recbench.api.judge_metrics import judge_metric_specs

    from recbench.api.item_lists import LIST_METRICS
    from recbench.api.task import Task

    mod, _, cls_name = target.rpartition(".")
    cls = getattr(importlib.import_module(mod), cls_name)
    rubric = getattr(cls, "judge_rubric", None) or {}
    # a task whose answers are item lists (it defines item_catalogue); a config-defined task (its metrics may be
    # undeclared) has them only where its config says so (task.items: catalogue.list_metrics)
    lists = cls.item_catalogue is not Task.item_catalogue and cls.undeclared_metrics == "error"
    current = tuple(s for s in LIST_METRICS if not s.meaning.startswith("old name of")) if lists else ()
    specs = (*cls.metric_specs, *current, *(judge_metric_specs(rubric) if rubric else ()))
    return {"methods": sorted(cls.methods),
            "metrics": [{"name": s.name, "direction": s.direction, "meaning": s.meaning, "why_n": s.why_n}
                        for s in specs]}


def build_index() -> dict[str, Any]:
    """The index as the classes define it now (imports every task class)."""
    return {t: class_entry(t) for t in task_targets()}


def read_index() -> dict[str, Any]:
    """The stored index ({} when the file is missing)."""
    return json.loads(INDEX.read_text(encoding="utf-8")) if INDEX.exists() else {}


def entry(target: str) -> dict[str, Any]:
    """A class's entry: from the stored index, else (a class it does not list, e.g. a user's own) imported."""
    return read_index().get(target) or class_entry(target)


def main() -> int:
    """Rewrite task_index.json from the task classes."""
    INDEX.write_text(json.dumps(build_index(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {INDEX}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
