"""How numbers read and show, everywhere (report tables, audit tables and terminal lines, results.json, the terminal
summary): one reader and one formatter. No pandas here: the terminal summary imports this module on every run."""
from __future__ import annotations

import math
from typing import Any, Optional

#: what a missing value (None, NaN, text) shows as
MISSING = "—"


def number(v: Any, finite: bool = False) -> Optional[float]:
    """v as a float, or None when it is missing, NaN, a bool or not a number; finite=True also turns ±inf into None."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    if math.isnan(f) or (finite and math.isinf(f)):
        return None
    return f


def fmt(v: Any, digits: int = 3, finite: bool = False) -> str:
    """v with `digits` decimals, never '-0.000'; a missing value as MISSING, never as zero. ±inf shows as 'inf' /
    '-inf', or as MISSING with finite=True (the terminal summary)."""
    f = number(v, finite)
    if f is None:
        return MISSING
    s = f"{f:.{digits}f}"
    return s[1:] if s.startswith("-") and float(s) == 0 else s


def cell_text(stats: Optional[dict[str, Any]], slice_n: Optional[int] = None, ci: bool = True) -> str:
    """'0.564 [0.453, 0.667]' (CI left out where there is none, or with ci=False), '(n=38)' added when the metric
    has fewer values than the slice has examples; '—' for no value."""
    if not stats or number(stats.get("mean"), finite=True) is None:
        return "—"
    out = fmt(stats["mean"], finite=True)
    if ci and all(number(stats.get(k), finite=True) is not None for k in ("ci_low", "ci_high")):
        out += f" [{fmt(stats['ci_low'], finite=True)}, {fmt(stats['ci_high'], finite=True)}]"
    n = stats.get("n")
    if slice_n is not None and n is not None and int(n) != int(slice_n):
        out += f" (n={int(n)})"
    return out
