"""Rich tables on the terminal: the widest table, a table's width, splitting columns to fit, the console, and the
lines a table prints (for tests and measurements)."""
from __future__ import annotations

from typing import Any, Iterator

#: widest terminal table (characters); wider content is split into several tables or wrapped
MAX_WIDTH = 120


def table_width(widths: list[int]) -> int:
    """Width of a rich table with the default box, edges and one space of padding on each side of every column."""
    return sum(w + 2 for w in widths) + len(widths) + 1


def chunk_columns(fixed: list[int], columns: list[tuple[str, int]], width: int = MAX_WIDTH) -> list[list[str]]:
    """Split metric columns (name, content width) into consecutive groups that fit `width` beside the fixed columns;
    a column too wide on its own gets a group of its own (rich wraps it)."""
    groups: list[list[str]] = [[]]
    used: list[int] = []
    for name, w in columns:
        if groups[-1] and table_width(fixed + used + [w]) > width:
            groups.append([])
            used = []
        groups[-1].append(name)
        used.append(w)
    return [g for g in groups if g]


def console(width: int = MAX_WIDTH) -> Any:
    """A rich console at most `width` wide (narrower on a narrower terminal)."""
    from rich.console import Console

    probe = Console()
    return Console(width=min(width, probe.width) if probe.is_terminal else width)


def iter_lines(renderables: list[Any], width: int = MAX_WIDTH) -> Iterator[str]:
    """The text lines rich prints for renderables at `width` (for tests and measurements)."""
    import io

    from rich.console import Console

    con = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    for r in renderables:
        con.print(r)
    yield from con.export_text().splitlines()


def wrap_lines(lines: list[str], width: int = MAX_WIDTH, indent: str = "    ") -> list[str]:
    """Each line wrapped at word boundaries to `width`, its continuation lines indented (paths and ids kept whole)."""
    import textwrap

    out: list[str] = []
    for line in lines:
        out += textwrap.wrap(line, width=width, subsequent_indent=indent, break_long_words=False,
                             break_on_hyphens=False) or [""]
    return out
