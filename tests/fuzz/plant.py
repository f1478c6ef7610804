"""Defect planters for the fuzz cases: each returns a function of the case's Ctx that edits a file of its data copy,
run dir or cache (the bundled data itself is never touched)."""
from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any, Callable

Plant = Callable[[Any], None]


def _data(ctx: Any, name: str) -> Path:
    return ctx.data / name


def write(name: str, content: str | bytes) -> Plant:
    """Replace a data file's content."""
    def plant(ctx: Any) -> None:
        p = _data(ctx, name)
        p.write_bytes(content.encode() if isinstance(content, str) else content)
    return plant


def delete(name: str) -> Plant:
    """Remove a data file."""
    return lambda ctx: _data(ctx, name).unlink()


def replace(name: str, old: bytes, new: bytes, gz: bool = False) -> Plant:
    """Replace the first occurrence of `old` in a data file (inside the gzip stream when gz)."""
    def plant(ctx: Any) -> None:
        p = _data(ctx, name)
        raw = gzip.decompress(p.read_bytes()) if gz else p.read_bytes()
        assert old in raw, (name, old)
        raw = raw.replace(old, new, 1)
        p.write_bytes(gzip.compress(raw) if gz else raw)
    return plant


def lines(name: str, fn: Callable[[list[str]], list[str]], gz: bool = False) -> Plant:
    """Rewrite a data file's list of lines."""
    def plant(ctx: Any) -> None:
        p = _data(ctx, name)
        text = (gzip.decompress(p.read_bytes()) if gz else p.read_bytes()).decode()
        out = ("\n".join(fn(text.splitlines())) + "\n").encode()
        p.write_bytes(gzip.compress(out) if gz else out)
    return plant


def record(name: str, line: int, fn: Callable[[dict], Any], gz: bool = False) -> Plant:
    """Edit the JSON record on a line (1-based) of a JSON Lines data file."""
    def edit(ls: list[str]) -> list[str]:
        rec = json.loads(ls[line - 1])
        fn(rec)
        ls[line - 1] = json.dumps(rec)
        return ls
    return lines(name, edit, gz)


def json_doc(name: str, fn: Callable[[Any], Any]) -> Plant:
    """Edit a JSON document data file in place (fn mutates the parsed value)."""
    def plant(ctx: Any) -> None:
        p = _data(ctx, name)
        doc = json.loads(p.read_text())
        fn(doc)
        p.write_text(json.dumps(doc))
    return plant


def csv_cell(name: str, row: int, col: int, value: str, gz: bool = False) -> Plant:
    """Set one cell (1-based row counting the header, 0-based column) of a CSV data file."""
    def edit(ls: list[str]) -> list[str]:
        parts = ls[row - 1].split(",")
        parts[col] = value
        ls[row - 1] = ",".join(parts)
        return ls
    return lines(name, edit, gz)


def ungzip(name: str) -> Plant:
    """The plain bytes under a .gz name."""
    return lambda ctx: _data(ctx, name).write_bytes(gzip.decompress(_data(ctx, name).read_bytes()))


def cut(name: str, keep: int) -> Plant:
    """Keep only the first `keep` bytes (a copy cut short)."""
    return lambda ctx: _data(ctx, name).write_bytes(_data(ctx, name).read_bytes()[:keep])


def all_of(*plants: Plant) -> Plant:
    """Several planters in order."""
    def plant(ctx: Any) -> None:
        for p in plants:
            p(ctx)
    return plant


# ---- run-store damage (after a clean first run) --------------------------------------------------------------------
def run_file(name: str, fn: Callable[[Path], None]) -> Plant:
    """Apply fn to a file of the case's one run dir."""
    return lambda ctx: fn(ctx.run_dir() / name)


def append_bytes(b: bytes) -> Callable[[Path], None]:
    """Append raw bytes to a file."""
    def edit(p: Path) -> None:
        with open(p, "ab") as f:
            f.write(b)
    return edit


def insert_line(at: int, text: bytes) -> Callable[[Path], None]:
    """Insert a raw line before line `at` (1-based)."""
    def edit(p: Path) -> None:
        ls = p.read_bytes().splitlines()
        p.write_bytes(b"\n".join(ls[:at - 1] + [text] + ls[at - 1:]) + b"\n")
    return edit


def cache_file(fn: Callable[[Path], None]) -> Plant:
    """Apply fn to the response cache file (cache/responses.sqlite), creating the folder first."""
    def plant(ctx: Any) -> None:
        ctx.cache.mkdir(exist_ok=True)
        fn(ctx.cache / "responses.sqlite")
    return plant


def corrupt_table_leaves(path: Path) -> None:
    """Overwrite every table-leaf page of an SQLite file: it still opens (schema and key index intact), the damage
    shows when a run reads its first stored answer."""
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[16:18], "big")
    size = 65536 if size == 1 else size
    hit = 0
    for off in range(size, len(data), size):
        if data[off] == 0x0D:
            data[off:off + size] = b"\xa5" * size
            hit += 1
    assert hit, "no table-leaf page to damage"
    path.write_bytes(bytes(data))
    con = sqlite3.connect(path)
    try:
        con.execute("SELECT key FROM responses LIMIT 1").fetchall()  # still opens
    finally:
        con.close()


def cache_rows(ctx: Any) -> int:
    """Rows in the case's response cache (0 when there is no cache file)."""
    p = ctx.cache / "responses.sqlite"
    if not p.exists():
        return 0
    with sqlite3.connect(p) as c:
        return c.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
