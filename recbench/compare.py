"""Public entry point `python -m recbench.compare`: the CLI is recbench/cli/compare.py, the verdicts recbench/stats/verdicts.py."""
from recbench.cli.compare import main

if __name__ == "__main__":
    raise SystemExit(main())
