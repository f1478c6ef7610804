"""Issue 24, item 4: every `recbench.<...>` name docs/new_benchmark.md points a reader to exists (a module, or a
module's attribute), so the page never names a function that is gone."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast
DOCS = Path(__file__).resolve().parents[2] / "docs"
DOTTED = re.compile(r"\brecbench(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def resolve(name: str) -> object:
    """The module or attribute a dotted name points to (the longest importable module, then attributes)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)  # AttributeError: the page names something that does not exist
        return obj
    raise ModuleNotFoundError(name)


def names(doc: str) -> list[str]:
    """The dotted recbench names of a docs page (a trailing '.' of a sentence is not part of a name)."""
    return sorted(set(DOTTED.findall((DOCS / doc).read_text(encoding="utf-8"))))


def test_new_benchmark_page_names_only_what_exists():
    found = names("new_benchmark.md")
    assert {"recbench.api.metrics.register", "recbench.api.metrics.MetricSpec", "recbench.api.task.ReferenceMethod",
            "recbench.tasks.generic.task.GenericTask"} <= set(found)
    missing = []
    for name in found:
        try:
            resolve(name)
        except (ModuleNotFoundError, AttributeError) as e:
            missing.append(f"{name} ({e})")
    assert missing == []


def test_the_checker_catches_the_function_the_page_used_to_name():
    with pytest.raises((ModuleNotFoundError, AttributeError)):
        resolve("recbench.tasks.generic.metrics.register")
    with pytest.raises(AttributeError):
        resolve("recbench.api.metrics.no_such_function")
