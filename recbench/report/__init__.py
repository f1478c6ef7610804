"""Cross-benchmark reports: collect run dirs into one table; write Markdown, CSV and a self-contained HTML page."""
from recbench.report.writer import build_report, write_report

__all__ = ["build_report", "write_report"]
