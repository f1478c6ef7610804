"""A '(published)' row beside a measured row: the paper's values per column, measured cells outside their CI marked."""
from __future__ import annotations

from typing import Any, Callable, Hashable, Sequence

from recbench.report.tables import Cell

#: marks a measured cell whose published value lies outside its 95% CI
OUTSIDE_MARK = "‡"


def published_cells(columns: Sequence[Any], cells: Sequence[Cell], by: dict[Hashable, dict[str, Any]],
                    metric_of: Callable[[Any], str], fmt: str = ".4g") -> tuple[list[Cell], int]:
    """(the published row's cells, how many measured cells were marked): `by` maps a column to a
    recbench.report.published.compare() record; a measured cell whose published value is outside its CI gets OUTSIDE_MARK."""
    out, flagged = [], 0
    for col, c in zip(columns, cells):
        metric, r = metric_of(col), by.get(col)
        if r is None:
            out.append(Cell(metric=metric))
            continue
        out.append(Cell(metric=metric, mean=r["published"], note=f"published: {r['paper_name']}, {r['source']}"))
        if r["outside_ci"] and not c.missing:
            c.ref_mark += OUTSIDE_MARK
            c.note = (c.note + "; " if c.note else "") + f"published {r['published']:{fmt}} is outside this 95% CI"
            flagged += 1
    return out, flagged
