"""The `duckdb` build engine's SQL: load one category's ratings, refuse bad values by file and line, and compute the
per-user prior counts and averages, the eligible query ratings and the co-rating windows out of core.

User and item ids are read as text once, then replaced by integer codes numbered in the ids' sorted order, so every
sort, partition and tie-break below runs on integers and keeps the order the ids would give.

Tables of one category's database: `raw` (temporary: the rows as read, rowid = row in file order), `user_codes`
(user_id, u) and `item_codes` (item_id, i), `a` (one earliest rating per user and item, in the rating range, by code,
with n_prior and avg; the view `r` shows its rating columns with the ids) and `e` (temporary: eligible query ratings:
rid = rowid in `a`, user code `u`, relative rating `rel`, block number `blk` in (item, window) order and item code
`icode` among the eligible items)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

from recbench.api.datafiles import finite
from recbench.api.errors import DataError
from recbench.tasks.perrec.build.checks import GRID, no_ratings, out_of_scale, warn_off_grid
from recbench.store.diskspace import FULL_ERRNOS, disk_full

#: per source: (file inside --input or None for the file itself, id column, item column, format, header lines)
SOURCES = {"movielens": ("ratings.csv", "userId", "movieId", "csv", 1),
           "amazon-csv": (None, "user_id", "parent_asin", "csv", 1),
           "amazon-jsonl": (None, "user_id", "parent_asin", "json", 0),
           "parquet": (None, "user_id", None, "parquet", 0)}


def q(s: str | Path) -> str:
    """A SQL string literal."""
    return "'" + str(s).replace("'", "''") + "'"


def ratings_file(source: str, path: str | Path) -> Path:
    """The file holding the ratings of a source's --input (MovieLens: ratings.csv inside the folder)."""
    inner = SOURCES[source][0]
    return Path(path) / inner if inner else Path(path)


def reader_sql(con: Any, source: str, path: Path) -> str:
    """SELECT of (user_id, item_id, rating DOUBLE, timestamp DOUBLE) from the file, in file order."""
    _, uid, iid, fmt, _ = SOURCES[source]
    if fmt == "json":
        cols = f"{{'{uid}': 'VARCHAR', '{iid}': 'VARCHAR', 'rating': 'DOUBLE', 'timestamp': 'DOUBLE'}}"
        src = f"read_json({q(path)}, format='newline_delimited', columns={cols})"
    elif fmt == "csv":
        # the header read here and the dialect given, nothing sniffed: a sniffer that meets a line with an extra field
        # in its sample takes the whole header for one column (and names the header instead of the line)
        names = csv_header(path)
        _require(path, names, [uid, iid, "rating", "timestamp"])
        cols = ", ".join(f"{q(n)}: '{'DOUBLE' if n in ('rating', 'timestamp') else 'VARCHAR'}'" for n in names)
        src = (f"read_csv({q(path)}, header=true, auto_detect=false, delim=',', quote='\"', escape='\"', "
               f"columns={{{cols}}})")
    else:
        src = f"read_parquet({q(path)})"
        names = [d[0] for d in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
        iid = "item_id" if "item_id" in names else "parent_asin"
        _require(path, names, [uid, iid, "rating", "timestamp"])
    return (f"SELECT CAST({uid} AS VARCHAR) AS user_id, CAST({iid} AS VARCHAR) AS item_id, "
            f"CAST(rating AS DOUBLE) AS rating, CAST(timestamp AS DOUBLE) AS timestamp FROM {src}")


def csv_header(path: Path) -> list[str]:
    """The column names of a CSV file's first line (gzip for .gz)."""
    import csv
    import gzip

    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8-sig", errors="replace", newline="") as f:
        return next(csv.reader(f), [])


def _require(path: Path, names: list[str], columns: list[str]) -> None:
    """DataError naming the columns the file's header (`names`) lacks."""
    missing = [c for c in columns if c not in names]
    if missing:
        raise DataError(f"{path}: missing column(s) {missing} (has {names}). Fix the header")


def duckdb_error(e: Exception, path: Path, work: Path) -> Exception:
    """A DuckDB error as recbench's: DiskFull for no space left, a DataError naming file and line for a bad row
    (an input or conversion error); any other error as it is."""
    import duckdb

    msg = str(e)
    if "No space left" in msg or "Disk quota" in msg or getattr(e, "errno", None) in FULL_ERRNOS:
        return disk_full(work, "the build's work database", "point --work-dir at a disk with room")
    if not isinstance(e, (duckdb.InvalidInputException, duckdb.ConversionException)):
        return e
    line = re.search(r"(?:Line: |in line )(\d+)", msg)
    where = f"{path}:{_json_line(path, int(line.group(1))) if 'Malformed JSON' in msg else line.group(1)}" \
        if line else str(path)
    conv = re.search(r'converting column "([^"]+)"\. Could not convert string "(.*?)"', msg)
    if conv:
        return DataError(f"{where}: column '{conv.group(1)}' is '{conv.group(2)}', not a finite number. "
                         "Fix the value or remove the row")
    cast = re.search(r'Failed to cast value to numerical: (.*)', msg)
    if cast:
        return DataError(f"{where}: a rating or timestamp is {cast.group(1).splitlines()[0]}, not a finite number. "
                         "Fix the value or remove the line")
    first = msg.splitlines()[0].split("Error: ", 1)[-1]
    mixed = _mixed_line_ending(path) if "invalid state" in msg and not path.name.endswith(".gz") else None
    if mixed is not None:
        return DataError(f"{path}:{mixed}: this line ends otherwise than the header line (LF and CRLF mixed), which "
                         "DuckDB's CSV reader does not read. Fix: give the file one line ending (e.g. dos2unix), or "
                         "build with --engine pandas")
    return DataError(f"{where}: not a well-formed {'line' if line else 'file'} ({first}). Fix the file")


def _mixed_line_ending(path: Path) -> Optional[int]:
    """The number of the first line whose ending (CRLF or LF) differs from the first line's, or None."""
    with open(path, "rb") as f:
        first = f.readline()
        crlf = first.endswith(b"\r\n")
        for no, line in enumerate(f, 2):
            if line.endswith(b"\n") and line.endswith(b"\r\n") != crlf:
                return no
    return None


def _json_line(path: Path, reported: int) -> int:
    """The line DuckDB means by 'Malformed JSON ... in line N' (it counts one past the line in some versions): the
    first of N-1, N that is not JSON."""
    import gzip
    import json

    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        for no, text in enumerate(f, 1):
            if no >= reported - 1:
                try:
                    json.loads(text)
                except ValueError:
                    return no
            if no >= reported:
                break
    return reported


def load(con: Any, source: str, path: Path, scale: Optional[tuple[float, float]] = None) -> int:
    """Read the file into the temporary table `raw`; refuse a rating or timestamp that is missing or not a finite
    number, or (with a scale) a rating outside it, and warn once about ratings off the binary-exact grid (each named
    by file and line); returns the number of rows read."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE raw AS {reader_sql(con, source, path)}")
    lo, hi = scale if scale is not None else (float("-inf"), float("inf"))
    fin = "coalesce(isfinite(rating) AND isfinite(timestamp), false)"
    out = f"rating < {float(lo)!r}::DOUBLE OR rating > {float(hi)!r}::DOUBLE" if scale is not None else "false"
    off = f"rating * {GRID} <> round(rating * {GRID})" if scale is not None else "false"
    n_bad, bad, n_out, first_out, n_off, first_off, n = con.execute(f"""SELECT
        count(*) FILTER (WHERE NOT {fin}), min(rowid) FILTER (WHERE NOT {fin}),
        count(*) FILTER (WHERE {fin} AND ({out})), min(rowid) FILTER (WHERE {fin} AND ({out})),
        count(*) FILTER (WHERE {fin} AND ({off})), min(rowid) FILTER (WHERE {fin} AND ({off})), count(*)
        FROM raw""").fetchone()
    header = SOURCES[source][4]
    if n_bad:
        rating, ts = con.execute(f"SELECT rating, timestamp FROM raw WHERE rowid = {int(bad)}").fetchone()
        field, value = ("rating", rating) if rating is None or rating != rating or abs(rating) == float("inf") \
            else ("timestamp", ts)
        if SOURCES[source][3] == "json":
            finite(value, f"{path}:{bad + 1}", field)
        shown = "empty" if value is None else repr(str(value))
        raise DataError(f"{path}:{bad + 1 + header}: column '{field}' is {shown}, not a finite number ({n_bad} such "
                        "row(s)). Fix the value or remove the row")
    rating_at = lambda rowid: con.execute(f"SELECT rating FROM raw WHERE rowid = {int(rowid)}").fetchone()[0]  # noqa: E731
    if n_out:
        raise out_of_scale(f"{path}:{first_out + 1 + header}", rating_at(first_out), n_out, scale, source)
    if n_off:
        warn_off_grid(f"{path}:{first_off + 1 + header}", rating_at(first_off), n_off, n)
    no_ratings(int(n), path)
    return int(n)


def _codes(con: Any, table: str, id_col: str, code: str) -> None:
    """`table` (id_col, code): each distinct non-NULL id of `raw` and its rank in sorted order, from 0."""
    con.execute(f"""CREATE OR REPLACE TABLE {table} AS
        SELECT {id_col}, CAST(row_number() OVER (ORDER BY {id_col}) - 1 AS INTEGER) AS {code}
        FROM (SELECT DISTINCT {id_col} FROM raw WHERE {id_col} IS NOT NULL)""")


def clean(con: Any, min_rating: Optional[float], max_rating: Optional[float]) -> None:
    """`c` (temporary; u, i, rating, ts): one (the earliest; then the first in the file) rating per user and item, in
    the rating range, by user and item code (`user_codes`, `item_codes`); `raw` is dropped."""
    lo = "-'inf'::DOUBLE" if min_rating is None else repr(float(min_rating))
    hi = "'inf'::DOUBLE" if max_rating is None else repr(float(max_rating))
    _codes(con, "user_codes", "user_id", "u")
    _codes(con, "item_codes", "item_id", "i")
    # the earliest rating per (u, i); among ratings at the same time the first in the file: the least (ts, rowid) key
    con.execute(f"""CREATE OR REPLACE TEMP TABLE c AS
        SELECT u, i, rating, ts FROM (
          SELECT u, i, min(ts) AS ts, arg_min(rating, CAST(ts AS HUGEINT) * 1099511627776 + rn) AS rating
          FROM (SELECT uc.u, ic.i, raw.rating, CAST(trunc(raw.timestamp) AS BIGINT) AS ts, raw.rowid AS rn
                FROM raw JOIN user_codes uc USING (user_id) JOIN item_codes ic USING (item_id))
          GROUP BY u, i)
        WHERE rating BETWEEN {lo} AND {hi}""")
    con.execute("DROP TABLE raw")


def annotate(con: Any, avg: str) -> None:
    """`a`: c with n_prior (ratings strictly before: same-time ratings are not before each other) and avg (the
    prior mean, or the whole-history mean with avg='whole'); the view `r` (user_id, item_id, rating, ts)."""
    if avg not in ("prior", "whole"):
        raise ValueError(f"avg must be 'prior' or 'whole', not '{avg}'")
    whole = "avg(rating) OVER (PARTITION BY u)" if avg == "whole" else "NULL"
    con.execute(f"""CREATE OR REPLACE TABLE a AS
        SELECT u, i, rating, ts, n_prior,
               {"wavg" if avg == "whole" else "CASE WHEN n_prior > 0 THEN cs / n_prior END"} AS avg
        FROM (SELECT u, i, rating, ts, rank() OVER w - 1 AS n_prior,
                     sum(rating) OVER (w RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS cs, {whole} AS wavg
              FROM c WINDOW w AS (PARTITION BY u ORDER BY ts))""")
    con.execute("DROP TABLE c")
    con.execute("""CREATE OR REPLACE VIEW r AS SELECT uc.user_id, ic.item_id, a.rating, a.ts
                   FROM a JOIN user_codes uc USING (u) JOIN item_codes ic USING (i)""")


def eligible(con: Any, gamma: int, span: int) -> int:
    """`e` (temporary): the ratings with more than gamma prior ratings, their tumbling window (anchored at the item's
    first eligible rating), block number and item code among the eligible items; returns how many."""
    con.execute(f"""CREATE OR REPLACE TEMP TABLE e0 AS
        SELECT rowid AS rid, u, i, rating - avg AS rel, ts FROM a WHERE n_prior > {int(gamma)}""")
    con.execute(f"""CREATE OR REPLACE TEMP TABLE e AS
        WITH first AS (SELECT i, min(ts) AS t0 FROM e0 GROUP BY i),
             w AS (SELECT e0.rid, e0.u, e0.i, e0.rel, (e0.ts - first.t0) // {max(span, 1)} AS win
                   FROM e0 JOIN first USING (i)),
             blocks AS (SELECT i, win, row_number() OVER (ORDER BY i, win) - 1 AS blk
                        FROM (SELECT DISTINCT i, win FROM w)),
             codes AS (SELECT i, row_number() OVER (ORDER BY i) - 1 AS icode FROM first)
        SELECT w.rid, w.u, w.rel, blocks.blk, codes.icode FROM w JOIN blocks USING (i, win) JOIN codes USING (i)""")
    con.execute("DROP TABLE e0")
    return int(con.execute("SELECT count(*) FROM e").fetchone()[0])


def candidates_sql(lam: float) -> str:
    """The rows of every block that may hold a separated pair (count >= 2 and a spread above lam, with slack for the
    chain scan's float keys), ordered as the chain scan needs: block, relative rating, user (codes in id order)."""
    return f"""SELECT e.blk, e.icode, e.rel, e.rid FROM e
        SEMI JOIN (SELECT blk FROM e GROUP BY blk HAVING count(*) >= 2 AND max(rel) - min(rel) > {float(lam)} - 1e-3) b
        ON e.blk = b.blk ORDER BY e.blk, e.rel, e.u"""


def summary(con: Any) -> dict[str, Any]:
    """Deduplicated ratings, users, items and the first and last time in `c`."""
    n, users, items, t0, t1 = con.execute(
        "SELECT count(*), count(DISTINCT u), count(DISTINCT i), min(ts), max(ts) FROM c").fetchone()
    return {"n": int(n), "users": int(users), "items": int(items), "t_min": t0, "t_max": t1}
