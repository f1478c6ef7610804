"""Public entry point `python -m recbench.cache merge|stats`: the CLI is recbench/cli/cache.py."""
import sys

from recbench.cli.cache import main

if __name__ == "__main__":
    sys.exit(main())
