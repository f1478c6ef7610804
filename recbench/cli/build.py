"""`python -m recbench.build <benchmark> ...`: build benchmark data from raw inputs (dispatches to the task's builder)."""
from __future__ import annotations

import importlib
import importlib.util
import sys

from recbench.api.errors import lookup


def builders() -> dict[str, str]:
    """Benchmark name -> module whose main(argv) builds it: every task package with a `build` module."""
    import pkgutil

    import recbench.tasks as tasks_pkg

    return {m.name: f"recbench.tasks.{m.name}.build" for m in pkgutil.iter_modules(tasks_pkg.__path__) if m.ispkg
            and importlib.util.find_spec(f"recbench.tasks.{m.name}.build") is not None}


def main(argv: list[str] | None = None) -> None:
    """Dispatch to a benchmark builder: python -m recbench.build <benchmark> --help."""
    argv = list(sys.argv[1:] if argv is None else argv)
    table = builders()
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: python -m recbench.build {{{','.join(table)}}} [builder options]  (--help after the name for its options)")
        return
    module = lookup(table, argv[0], what="builder", hint="python -m recbench.build ")
    importlib.import_module(module).main(argv[1:])


if __name__ == "__main__":
    main()
