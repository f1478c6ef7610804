"""Public entry point `python -m recbench.tool <module>`: the CLI is recbench/cli/tool.py."""
from recbench.cli.tool import main

if __name__ == "__main__":
    main()
