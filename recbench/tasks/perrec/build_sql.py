"""The `duckdb` build engine's SQL: load one category's ratings, refuse bad values by file and line, and compute the
per-user prior counts and averages, the eligible query ratings and the co-rating windows out of core.

Tables of one category's database: `raw` (the rows as read, rowid = row in file order; dropped once cleaned), `a`
(one earliest rating per user and item, in the rating range, with n_prior and avg; the view `r` shows its rating
columns) and `e` (eligible query ratings: rid = rowid in `a`, window `win`, block number `blk` in (item, window)
order, item code `icode`, relative rating `rel`, the count `ib_n` and sum `ib_s` of the item's ratings strictly
before it)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

from recbench.api.datafiles import finite
from recbench.api.errors import DataError
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
        types = f"{{'{uid}': 'VARCHAR', '{iid}': 'VARCHAR', 'rating': 'DOUBLE', 'timestamp': 'DOUBLE'}}"
        _require(con, f"read_csv({q(path)}, header=true, all_varchar=true)", path, [uid, iid, "rating", "timestamp"])
        src = f"read_csv({q(path)}, header=true, types={types})"
    else:
        src = f"read_parquet({q(path)})"
        names = [d[0] for d in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
        iid = "item_id" if "item_id" in names else "parent_asin"
        _require(con, src, path, [uid, iid, "rating", "timestamp"])
    return (f"SELECT CAST({uid} AS VARCHAR) AS user_id, CAST({iid} AS VARCHAR) AS item_id, "
            f"CAST(rating AS DOUBLE) AS rating, CAST(timestamp AS DOUBLE) AS timestamp FROM {src}")


def _require(con: Any, src: str, path: Path, columns: list[str]) -> None:
    names = [d[0] for d in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
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
    return DataError(f"{where}: not a well-formed {'line' if line else 'file'} ({first}). Fix the file")


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


def load(con: Any, source: str, path: Path) -> int:
    """Read the file into `raw` and refuse a rating or timestamp that is missing or not a finite number (DataError
    naming the line); returns the number of rows read."""
    con.execute(f"CREATE OR REPLACE TABLE raw AS {reader_sql(con, source, path)}")
    bad = con.execute("SELECT rowid, rating, timestamp, count(*) OVER () FROM raw WHERE NOT coalesce(isfinite(rating) "
                      "AND isfinite(timestamp), false) ORDER BY rowid LIMIT 1").fetchone()
    if bad:
        rowid, rating, ts, n = bad
        header = SOURCES[source][4]
        field, value = ("rating", rating) if rating is None or rating != rating or abs(rating) == float("inf") \
            else ("timestamp", ts)
        if SOURCES[source][3] == "json":
            finite(value, f"{path}:{rowid + 1}", field)
        shown = "empty" if value is None else repr(str(value))
        raise DataError(f"{path}:{rowid + 1 + header}: column '{field}' is {shown}, not a finite number ({n} such "
                        "row(s)). Fix the value or remove the row")
    return int(con.execute("SELECT count(*) FROM raw").fetchone()[0])


def clean(con: Any, min_rating: Optional[float], max_rating: Optional[float]) -> None:
    """`r`: one (the earliest; then the first in the file) rating per user and item, in the rating range."""
    lo = "-'inf'::DOUBLE" if min_rating is None else repr(float(min_rating))
    hi = "'inf'::DOUBLE" if max_rating is None else repr(float(max_rating))
    con.execute(f"""CREATE OR REPLACE TABLE r AS
        SELECT user_id, item_id, rating, ts FROM (
          SELECT user_id, item_id, rating, CAST(trunc(timestamp) AS BIGINT) AS ts, rowid AS rn FROM raw
          WHERE user_id IS NOT NULL AND item_id IS NOT NULL
          QUALIFY row_number() OVER (PARTITION BY user_id, item_id ORDER BY ts, rn) = 1)
        WHERE rating BETWEEN {lo} AND {hi}""")
    con.execute("DROP TABLE raw")


def annotate(con: Any, avg: str) -> None:
    """`a`: r with n_prior (ratings strictly before: same-time ratings are not before each other) and avg (the
    prior mean, or the whole-history mean with avg='whole')."""
    if avg not in ("prior", "whole"):
        raise ValueError(f"avg must be 'prior' or 'whole', not '{avg}'")
    whole = "avg(rating) OVER (PARTITION BY user_id)" if avg == "whole" else "NULL"
    con.execute(f"""CREATE OR REPLACE TABLE a AS
        SELECT user_id, item_id, rating, ts, n_prior,
               {"wavg" if avg == "whole" else "CASE WHEN n_prior > 0 THEN cs / n_prior END"} AS avg
        FROM (SELECT user_id, item_id, rating, ts,
                     rank() OVER (PARTITION BY user_id ORDER BY ts) - 1 AS n_prior,
                     sum(rating) OVER (PARTITION BY user_id ORDER BY ts
                                       RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS cs,
                     {whole} AS wavg
              FROM r)""")
    con.execute("DROP TABLE r")
    con.execute("CREATE VIEW r AS SELECT user_id, item_id, rating, ts FROM a")


def eligible(con: Any, gamma: int, span: int) -> int:
    """`e`: the ratings with more than gamma prior ratings, their tumbling window (anchored at the item's first
    eligible rating), block number, item code, and the count and sum of the item's ratings strictly before them
    (ib_n, ib_s: a group's item mean); returns how many."""
    con.execute(f"""CREATE OR REPLACE TEMP TABLE e0 AS
        SELECT rid, user_id, item_id, rel, (ts - t0) // {max(span, 1)} AS win, ib_n, ib_s FROM (
          SELECT rowid AS rid, user_id, item_id, rating - avg AS rel, ts, n_prior,
                 min(ts) FILTER (WHERE n_prior > {int(gamma)}) OVER (PARTITION BY item_id) AS t0,
                 count(*) OVER before AS ib_n, sum(rating) OVER before AS ib_s
          FROM a WINDOW before AS (PARTITION BY item_id ORDER BY ts
                                   RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING))
        WHERE n_prior > {int(gamma)}""")
    con.execute("""CREATE OR REPLACE TABLE e AS
        WITH blocks AS (SELECT item_id, win, row_number() OVER (ORDER BY item_id, win) - 1 AS blk
                        FROM (SELECT DISTINCT item_id, win FROM e0)),
             codes AS (SELECT item_id, row_number() OVER (ORDER BY item_id) - 1 AS icode
                       FROM (SELECT DISTINCT item_id FROM e0))
        SELECT e0.rid, e0.user_id, e0.item_id, e0.rel, e0.win, blocks.blk, codes.icode, e0.ib_n, e0.ib_s
        FROM e0 JOIN blocks USING (item_id, win) JOIN codes USING (item_id)""")
    con.execute("DROP TABLE e0")
    return int(con.execute("SELECT count(*) FROM e").fetchone()[0])


def candidates_sql(lam: float) -> str:
    """The rows of every block that may hold a separated pair (count >= 2 and a spread above lam, with slack for the
    chain scan's float keys), ordered as the chain scan needs: block, relative rating, user."""
    return f"""SELECT e.blk, e.icode, e.rel, e.rid FROM e
        SEMI JOIN (SELECT blk FROM e GROUP BY blk HAVING count(*) >= 2 AND max(rel) - min(rel) > {float(lam)} - 1e-3) b
        ON e.blk = b.blk ORDER BY e.blk, e.rel, e.user_id"""


def summary(con: Any) -> dict[str, Any]:
    """Deduplicated ratings, users, items and the first and last time in `r`."""
    n, users, items, t0, t1 = con.execute(
        "SELECT count(*), count(DISTINCT user_id), count(DISTINCT item_id), min(ts), max(ts) FROM r").fetchone()
    return {"n": int(n), "users": int(users), "items": int(items), "t_min": t0, "t_max": t1}
