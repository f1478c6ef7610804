"""`python -m recbench.build <benchmark> ...`: build benchmark data from raw inputs (dispatches to the task's builder)."""
from __future__ import annotations

import importlib
import sys

from recbench.registry import lookup

#: benchmark name -> module whose main(argv) builds it
BUILDERS = {"perrec": "recbench.tasks.perrec.build"}


def main(argv: list[str] | None = None) -> None:
    """Dispatch to a benchmark builder: python -m recbench.build perrec --help."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: python -m recbench.build {{{','.join(BUILDERS)}}} [builder options]  (--help after the name for its options)")
        return
    module = lookup(BUILDERS, argv[0], what="builder", hint="python -m recbench.build ")
    importlib.import_module(module).main(argv[1:])


if __name__ == "__main__":
    main()
