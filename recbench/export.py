"""Public entry point `python -m recbench.export RUN_DIR... --hub OUT [--push REPO]`: the CLI is recbench/cli/export.py,
the export recbench/publish/hub.py and hub_card.py."""
from recbench.cli.export import main

if __name__ == "__main__":
    raise SystemExit(main())
