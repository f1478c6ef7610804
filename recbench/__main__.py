"""Entry point: python -m recbench task=... model=... method=... | python -m recbench <subcommand> ..."""
from __future__ import annotations

import importlib
import sys

#: `python -m recbench <name> ...` -> module whose main(argv) handles it (imported only when named)
SUBCOMMANDS = {
    "list": "recbench.catalogue",
    "doctor": "recbench.doctor",
}


def main() -> None:
    """Dispatch a subcommand (list, doctor), else run the Hydra app."""
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        sys.exit(importlib.import_module(SUBCOMMANDS[sys.argv[1]]).main(sys.argv[2:]) or 0)
    from recbench.app import main as app_main

    app_main()


if __name__ == "__main__":
    main()
