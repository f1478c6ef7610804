"""Reading a user's data files (text lines, JSON, JSON Lines, CSV, numbers) so that every defect is one DataError
naming the file, the line (or record) and the fix: a file that is empty, not gzip, not UTF-8, not JSON, a field that
is not a finite number, an id given twice."""
from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from recbench.api.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

UTF8_FIX = "re-save the file as UTF-8"


def _is_gzip(path: Path) -> bool:
    return path.suffix == ".gz"


def read_bytes(path: str | Path) -> bytes:
    """The file's bytes, gunzipped for a .gz name; DataError for a missing, empty or damaged file."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"data file missing: {p}")
    raw = p.read_bytes()
    if not raw:
        raise DataError(f"{p}: the file is empty (0 bytes). Fix: restore the file or point the task at another one")
    if not _is_gzip(p):
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        hint = "it is not gzip data: gzip it or drop the .gz suffix" if raw[:2] != b"\x1f\x8b" else \
            "the gzip stream is damaged or cut short: restore the file"
        raise DataError(f"{p}: cannot be read as gzip ({type(e).__name__}: {e}). Fix: {hint}") from None


def _decode_error(path: Path, data: bytes, e: UnicodeDecodeError) -> DataError:
    line = data.count(b"\n", 0, e.start) + 1
    col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
    return DataError(f"{path}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x} at column {col}). Fix: {UTF8_FIX}")


def read_text(path: str | Path) -> str:
    """The whole file as UTF-8 text (gunzipped for .gz; a leading byte-order mark dropped); DataError naming the line
    of a byte that is not UTF-8."""
    p = Path(path)
    data = read_bytes(p)
    if data.startswith(b"\xef\xbb\xbf"):  # as spreadsheet programs save "UTF-8" CSV
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _decode_error(p, data, e) from None


def text_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of every non-blank line; DataError for a file with none."""
    p = Path(path)
    n = 0
    for no, line in enumerate(read_text(p).splitlines(), 1):
        if line.strip():
            n += 1
            yield no, line
    if n == 0:
        raise DataError(f"{p}: the file holds no records (only blank lines). Fix: restore the file or point the task "
                        "at another one")


def read_json(path: str | Path) -> Any:
    """A JSON document; DataError naming the line of a syntax error or of an object key given twice."""
    p = Path(path)
    text = read_text(p)

    def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                raise DataError(f"{p}: key '{k}' appears twice in one JSON object (the second would silently replace "
                                "the first). Fix: merge or rename the two entries")
            out[k] = v
        return out

    try:
        return json.loads(text, object_pairs_hook=no_duplicate_keys)
    except json.JSONDecodeError as e:
        raise DataError(f"{p}:{e.lineno}: not valid JSON ({e.msg}, column {e.colno}). Fix the file") from None


def jsonl_records(path: str | Path, *, objects: bool = True) -> Iterator[tuple[int, Any]]:
    """(line number, record) of every non-blank line of a JSON Lines file (gzip for .gz); DataError naming the line
    that is not JSON (or, with objects=True, not a JSON object)."""
    p = Path(path)
    for no, line in text_lines(p):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{p}:{no}: not valid JSON ({e.msg}, column {e.colno}). Fix or remove the line") from None
        if objects and not isinstance(rec, dict):
            raise DataError(f"{p}:{no}: expected a JSON object, got {type(rec).__name__}. Fix or remove the line")
        yield no, rec


def finite(value: Any, where: str, field: str) -> float:
    """value as a float; DataError ('<where>: field ... is not a finite number') for text, null, NaN or infinity."""
    if isinstance(value, bool) or value is None:
        ok = False
    else:
        try:
            x = float(value)
            ok = math.isfinite(x)
        except (TypeError, ValueError):
            ok = False
    if not ok:
        shown = json.dumps(value) if value is None or isinstance(value, (float, str, bool)) else repr(value)
        raise DataError(f"{where}: field '{field}' = {shown} is not a finite number. Fix the value or remove the "
                        "record (a value that is missing or not a number cannot be scored)")
    return x


def read_csv(path: str | Path, **kwargs: Any) -> "pd.DataFrame":
    """pandas.read_csv of a (gzip) CSV/TSV with DataErrors for an empty, non-gzip, non-UTF-8 or malformed file."""
    import io

    import pandas as pd

    p = Path(path)
    text = read_text(p)
    if not text.strip():
        raise DataError(f"{p}: the file holds no header and no rows. Fix: restore the file")
    try:
        return pd.read_csv(io.StringIO(text), **kwargs)
    except pd.errors.ParserError as e:
        first = str(e).strip().splitlines()[0]
        line = re.search(r"in line (\d+)", first)  # pandas counts the file's lines, header included
        where = f"{p}:{line.group(1)}: not a well-formed line" if line else f"{p}: not a well-formed table"
        raise DataError(f"{where} ({first}). Fix the file") from None
    except pd.errors.EmptyDataError:
        raise DataError(f"{p}: the file holds no header and no rows. Fix: restore the file") from None


def numeric_columns(df: "pd.DataFrame", columns: Iterable[str], path: str | Path, header_lines: int = 1,
                    convert: bool = True) -> "pd.DataFrame":
    """df with the columns as floats (as they were with convert=False); DataError naming the first line whose value
    is not a finite number."""
    import numpy as np
    import pandas as pd

    for c in columns:
        vals = pd.to_numeric(df[c], errors="coerce")
        bad = ~np.isfinite(vals.to_numpy(dtype=float))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raw = df[c].iloc[i]
            shown = ("empty" if raw is None or (isinstance(raw, float) and math.isnan(raw)) or raw == "" else
                     repr(raw if isinstance(raw, str) else str(raw)))  # 'inf', not np.float64(inf)
            raise DataError(f"{path}:{i + 1 + header_lines}: column '{c}' is {shown}, not a finite number "
                            f"({int(bad.sum())} such row(s)). Fix the value or remove the row")
        if convert:
            df[c] = vals.astype(float)
    return df


def require_columns(df: "pd.DataFrame", columns: Iterable[str], path: str | Path) -> None:
    """DataError naming the file, the missing columns and the ones it has."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {missing}; present: {list(df.columns)}. Fix the file's header")


def check_unique(ids: Iterable[tuple[str, str]], what: str, fix: str = "give each one its own id") -> None:
    """Refuse an id given twice: ids are (id, where) pairs; the error names both places."""
    seen: dict[str, str] = {}
    for i, where in ids:
        if i in seen:
            raise DataError(f"{where}: {what} '{i}' was already given at {seen[i]}; a duplicate would be scored "
                            f"twice or replace the first. Fix: {fix}")
        seen[i] = where

