"""Public entry point `python -m recbench.view`: the viewer is recbench/cli/view.py."""
from recbench.cli.view import main, write_view  # noqa: F401 - the public API

if __name__ == "__main__":
    raise SystemExit(main())
