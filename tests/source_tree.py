"""The project's source as installed: each import prefix and the folder it comes from (setup.py's ROOTS, Python only),
so the architecture tests read recbench/, tasks/ and kg/ as one package tree."""
from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: import prefix -> folder; the benchmarks (tasks/) and knowledge graphs (kg/) are top-level folders installed inside recbench
ROOTS = {"recbench": REPO / "recbench", "recbench.tasks": REPO / "tasks", "recbench.kg": REPO / "kg"}


def source_files() -> list[Path]:
    """Every .py file of the installed package, in a stable order."""
    return sorted(p for root in ROOTS.values() for p in root.rglob("*.py"))


def module_name(path: Path) -> str:
    """The import name of a source file (recbench.tasks.perrec.task for tasks/perrec/task.py)."""
    prefix, root = max(((k, r) for k, r in ROOTS.items() if path.is_relative_to(r)), key=lambda kr: len(kr[1].parts))
    parts = [p for p in path.relative_to(root).with_suffix("").parts if p != "__init__"]
    return ".".join([prefix, *parts])


def shown(path: Path) -> str:
    """A source file as a message names it: its path from the repository root."""
    return path.relative_to(REPO).as_posix()
