"""Cross-benchmark reports: collect run dirs into one table; write Markdown, CSV and a self-contained HTML page."""
from typing import Any

__all__ = ["build_report", "write_report"]


def __getattr__(name: str) -> Any:
    """build_report / write_report, imported on first use (the writer pulls in matplotlib: the Hydra report
    callback imports this package on every run, reports are written only at the end of a sweep)."""
    if name in __all__:
        from recbench.report import writer

        return getattr(writer, name)
    raise AttributeError(f"module 'recbench.report' has no attribute '{name}'")
