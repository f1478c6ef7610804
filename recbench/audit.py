"""Public entry point `python -m recbench.audit`: the CLI is recbench/cli/audit.py, the order audit recbench/audits/."""
from recbench.cli.audit import main

if __name__ == "__main__":
    raise SystemExit(main())
