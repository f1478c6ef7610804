"""Public entry point `python -m recbench.build <benchmark>`: the CLI is recbench/cli/build.py."""
from recbench.cli.build import main

if __name__ == "__main__":
    main()
