"""How numbers read and show in reports: the report's name for recbench/api/numbers.py (one reader and one formatter,
kept below the audits so that their terminal lines and the report's tables show numbers alike)."""
from __future__ import annotations

from recbench.api.numbers import MISSING, cell_text, fmt, number  # noqa: F401 - re-exported for the report modules
