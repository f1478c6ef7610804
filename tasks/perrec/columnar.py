"""The PerRecBench ratings as columns (numpy), sorted by user and time, and the per-user slices the groups need.

The ratings file is read by pyarrow (fast, compact); a file it cannot read cleanly (a malformed line, a value that is
not a finite number, ids pandas would read differently) is read again by the pandas reader, which names the line.

A file with a `domain` column (a build over several categories) keeps each rating's category: a user's rows are then
sorted by domain, then time, so the user's ratings in one domain are one contiguous slice (`Ratings.rows`)."""
from __future__ import annotations

import csv
import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from recbench.api.errors import DataError

COLUMNS = ("user_id", "item_id", "rating", "timestamp")
DOMAIN = "domain"  # optional fifth column: each rating's category


@dataclass
class Ratings:
    """Every rating, sorted by user id then time (file order among ties); ids as codes into sorted id arrays. With a
    domain column: sorted by user id, domain, then time."""

    users: np.ndarray      # user ids (str), sorted; a user's rows are user_ptr[u]:user_ptr[u+1]
    user_ptr: np.ndarray   # int64
    items: np.ndarray      # item ids (str) by item code
    item: np.ndarray       # int32 item code per row
    rating: np.ndarray     # float64
    timestamp: np.ndarray  # float64
    values: Optional[np.ndarray] = None  # the distinct ratings, sorted (None when there are more than 4096)
    value: Optional[np.ndarray] = None   # int16 code of each row's rating into `values`
    domains: Optional[np.ndarray] = None  # the distinct domains (str), sorted (None: the file has no domain column)
    domain: Optional[np.ndarray] = None   # int16 domain code per row (None: no domain column, or not kept)

    def rows(self, u: int, domain: Optional[str] = None) -> Optional[tuple[int, int]]:
        """(lo, hi): the rows of user code u, or of its ratings in `domain` where the file has a domain column
        (None when the file has no such domain)."""
        lo, hi = int(self.user_ptr[u]), int(self.user_ptr[u + 1])
        if self.domain is None or domain is None:
            return lo, hi
        d = int(np.searchsorted(self.domains, domain))
        if d >= len(self.domains) or self.domains[d] != domain:
            return None
        seg = self.domain[lo:hi]
        return lo + int(np.searchsorted(seg, d, side="left")), lo + int(np.searchsorted(seg, d, side="right"))

    def most_common(self, lo: int, end: int) -> float:
        """The most frequent rating of rows lo:end (ties: the one seen first), as Counter.most_common(1) picks it."""
        if self.value is None:
            return most_common(self.rating[lo:end])
        seg = self.value[lo:end]
        counts = np.bincount(seg, minlength=len(self.values))
        tied = np.flatnonzero(counts == counts.max())
        if len(tied) > 1:  # the value seen first among the most frequent
            tied = tied[int(np.argmin([int(np.argmax(seg == c)) for c in tied]))]
        return float(self.values[int(np.ravel(tied)[0])])

    def user_code(self, user_id: str) -> Optional[int]:
        """The code of a user id (None when the user has no ratings)."""
        i = int(np.searchsorted(self.users, user_id))
        return i if i < len(self.users) and self.users[i] == user_id else None

    def mean(self) -> float:
        """The mean of all ratings (as pandas computes it)."""
        import pandas as pd

        return float(pd.Series(self.rating).mean())


def has_domain(path: Path) -> bool:
    """Whether the ratings file's header names a `domain` column (False when the header cannot be read)."""
    try:
        with (gzip.open if path.name.endswith(".gz") else open)(path, "rt", encoding="utf-8", newline="") as f:
            return DOMAIN in next(csv.reader(f), [])
    except (OSError, UnicodeDecodeError, EOFError, csv.Error):
        return False


def _arrow_table(path: Path):
    """The four columns (and the domain, where the header has one) read by pyarrow, or None where pandas must read the
    file (it then names the problem)."""
    try:
        import pyarrow as pa
        import pyarrow.csv as pacsv
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        return None
    domain = has_domain(path)
    cols = list(COLUMNS) + ([DOMAIN] if domain else [])
    try:
        tbl = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
            include_columns=cols, column_types={DOMAIN: pa.dictionary(pa.int32(), pa.string())} if domain else None))
    except (pa.ArrowInvalid, pa.ArrowKeyError, KeyError, ValueError, OSError):
        return None
    for c in ("user_id", "item_id"):
        t = tbl.schema.field(c).type
        # integer ids: pandas reads them as integers too, then as their decimal text (_codes writes them so)
        if not (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)):
            return None
    for c in ("rating", "timestamp"):
        t = tbl.schema.field(c).type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t)) or tbl[c].null_count:
            return None
    return tbl


def _codes(column) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique ids, int32 code per row) of an arrow id column (integers: ids are their decimal text)."""
    enc = column.combine_chunks().dictionary_encode() if hasattr(column, "combine_chunks") else column.dictionary_encode()
    names = np.asarray([str(v) for v in enc.dictionary.to_pylist()], dtype=object)
    order = np.argsort(names.astype(str), kind="stable")
    rank = np.empty(len(order), np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    return names[order], rank[enc.indices.to_numpy(zero_copy_only=False)]


def _text_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted unique ids, code per row) of an array of id strings."""
    names, codes = np.unique(values.astype(str), return_inverse=True)
    return names.astype(object), codes.astype(np.int64)


def read_ratings(path: Path, pandas_reader: Callable[[Path], "object"]) -> Ratings:
    """The ratings file as sorted columns; `pandas_reader(path)` is the checked fallback (DataError on bad lines)."""
    tbl = _arrow_table(path)
    if tbl is not None:
        rating = tbl["rating"].to_numpy().astype(np.float64, copy=False)
        ts = tbl["timestamp"].to_numpy().astype(np.float64, copy=False)
        if not (np.isfinite(rating).all() and np.isfinite(ts).all()):
            tbl = None
    if tbl is None:
        df = pandas_reader(path)
        missing = [c for c in COLUMNS if c not in df.columns]
        if missing:
            raise DataError(f"{path}: missing field(s) {missing}; present: {list(df.columns)}. "
                            "Fix the file or regenerate it with `python -m recbench.tasks.perrec.build.synth`")
        rating, ts = df["rating"].to_numpy(np.float64), df["timestamp"].to_numpy(np.float64)
        (users, ucode), (items, icode) = (_text_codes(df[c].astype(str).to_numpy()) for c in ("user_id", "item_id"))
        doms = _domain_codes(df[DOMAIN], path) if DOMAIN in df.columns else None
        del df
    else:
        doms = None
        if DOMAIN in tbl.column_names:  # coded first and dropped: its column is freed before the ids are coded
            doms, tbl = _domain_codes(tbl[DOMAIN], path), tbl.drop_columns([DOMAIN])
        (users, ucode), (items, icode) = _codes(tbl["user_id"]), _codes(tbl["item_id"])
        del tbl
        _release_arrow_memory()
    return _sorted(users, ucode, items, icode, rating, ts, doms)


def _domain_codes(column, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct domains, int16 code per row) of the domain column (an arrow dictionary column, or the pandas
    reader's Series); DataError naming the first empty one."""
    if hasattr(column, "isna"):  # pandas
        names, codes = _text_codes(column.astype(str).to_numpy())
        empty = column.isna().to_numpy() | (codes == (np.searchsorted(names, "") if "" in names else -1))
    else:
        col = column.unify_dictionaries()
        words = [str(v) for v in col.chunk(0).dictionary.to_pylist()] if col.num_chunks else []
        raw = np.concatenate([c.indices.fill_null(-1).to_numpy() for c in col.chunks]) if col.num_chunks else \
            np.zeros(0, np.int32)
        names = np.asarray(sorted(words), dtype=object)
        rank = np.asarray([int(np.searchsorted(names, w)) for w in words] + [0], np.int32)  # + a null's (-1) rank
        codes = rank[raw]
        empty = (raw < 0) | (raw == (words.index("") if "" in words else -2))
    first = np.flatnonzero(empty)
    if len(first):
        raise DataError(f"{path}:{int(first[0]) + 2}: field 'domain' is empty ({len(first)} line(s)). Fix: give every "
                        "rating its category, or rebuild the data (python -m recbench.build perrec --category NAME=PATH)")
    return names, codes.astype(np.int16 if len(names) < 2 ** 15 else np.int32)


def _sorted(users: np.ndarray, ucode: np.ndarray, items: np.ndarray, icode: np.ndarray, rating: np.ndarray,
            ts: np.ndarray, doms: Optional[tuple[np.ndarray, np.ndarray]] = None) -> Ratings:
    """The rows sorted by user code (then domain code, given `doms`: names and codes) then time (stable: file order
    among ties), one column at a time."""
    # stable: file order among equal (user, [domain,] time)
    order = np.lexsort((ts, ucode)) if doms is None else np.lexsort((ts, doms[1], ucode))
    ptr = np.zeros(len(users) + 1, np.int64)
    np.cumsum(np.bincount(ucode, minlength=len(users)), out=ptr[1:])
    del ucode
    item = icode[order].astype(np.int32, copy=False)
    del icode
    rating = rating[order]
    ts = ts[order]
    domain = None if doms is None else doms[1][order]
    del order
    out = Ratings(users, ptr, items, item, rating, ts)
    if doms is not None:
        out.domains, out.domain = doms[0], domain
    values = np.unique(rating)
    if len(values) <= 4096:  # each row's code into the sorted distinct values (np.unique's inverse)
        out.values, out.value = values, np.searchsorted(values, rating).astype(np.int16)
    return out


def _release_arrow_memory() -> None:
    """Hand the memory arrow's pool keeps after a read back to the system (mimalloc and jemalloc keep it otherwise)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def item_rows(r: Ratings) -> tuple[np.ndarray, np.ndarray]:
    """(rows sorted by item code, stable; item_ptr): item c's rows (in table order) are rows[item_ptr[c]:item_ptr[c+1]]."""
    rows = np.argsort(r.item, kind="stable")
    ptr = np.searchsorted(r.item[rows], np.arange(len(r.items) + 1)).astype(np.int64)
    return rows, ptr


def most_common(values: np.ndarray) -> float:
    """The most frequent value (ties: the one seen first), as collections.Counter.most_common(1) picks it."""
    uniq, first, counts = np.unique(values, return_index=True, return_counts=True)
    best = np.flatnonzero(counts == counts.max())
    return float(uniq[best[np.argmin(first[best])]])
