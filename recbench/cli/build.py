"""`python -m recbench.build <benchmark> ...`: build benchmark data from raw inputs (dispatches to the task's builder)."""
from __future__ import annotations

import sys
from pathlib import Path

from recbench.api.errors import lookup
from recbench.api.metrics import import_task_module, task_packages


def builders() -> dict[str, str]:
    """Benchmark name -> module whose main(argv) builds it: every task package with a `build` module or package (found on disk,
    so listing them imports no task code)."""
    import recbench.tasks as tasks_pkg

    return {name: f"recbench.tasks.{name}.build" for name in task_packages()
            if any((Path(p) / name / "build.py").is_file() or (Path(p) / name / "build" / "__init__.py").is_file()
                   for p in tasks_pkg.__path__)}


def main(argv: list[str] | None = None) -> None:
    """Dispatch to a benchmark builder: python -m recbench.build <benchmark> --help."""
    argv = list(sys.argv[1:] if argv is None else argv)
    table = builders()
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: python -m recbench.build {{{','.join(table)}}} [builder options]  (--help after the name for its options)")
        return
    lookup(table, argv[0], what="builder", hint="python -m recbench.build ")
    import_task_module(argv[0], "build").main(argv[1:])  # a package that fails to import: an error naming it


if __name__ == "__main__":
    main()
