"""Public entry point `python -m recbench.results [RUNS_ROOT] --sql "SELECT ..."` and `recbench.results.connect()`:
DuckDB views (runs, metrics, samples) over every run dir under a folder. The CLI is recbench/cli/results.py, the
views recbench/store/sql_views.py."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from recbench.cli.results import main, run_query  # noqa: F401 - the public API


def connect(root: Optional[str | Path] = None, *paths: str | Path) -> Any:
    """A DuckDB connection with the views runs, metrics and samples over every run dir under root (default: the runs
    root, $RECBENCH_RUNS_DIR or runs) and any further paths."""
    from recbench.store.rundir import runs_root
    from recbench.store.sql_views import connect as _connect

    return _connect([root if root is not None else runs_root(), *paths])


if __name__ == "__main__":
    raise SystemExit(main())
