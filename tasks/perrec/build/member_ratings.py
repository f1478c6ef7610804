"""The group members' ratings of a build (every rating of every user in a group): their item ids, each member's
history tokens, and ratings.csv.gz, from either engine. The pandas engine holds them as a frame; the duckdb engine
leaves them in the categories' databases and streams them (Arrow batches of ready CSV lines into one gzip stream), so
no frame of all the members' ratings is ever built. Both write the same CSV text (pandas' to_csv: header, QUOTE_MINIMAL
ids, floats as pandas prints them) at the same gzip level, so the two engines' files are byte-identical. A build over
named categories adds a `domain` column (each rating's category), so a loader can describe a group's members by their
ratings in the group's category only; a single-input build writes the four columns as before."""
from __future__ import annotations

import csv
import functools
import io
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

import numpy as np
import pandas as pd

from recbench.tasks.perrec.build.readers import RATING_COLS
from recbench.tasks.perrec.build.sql import q

#: zlib level of ratings.csv.gz (benchmarks/bench_perrec_write.py, 100 MB of a 25M build: level 1 takes 1/18 of level
#: 9's CPU and writes 14% more bytes; level 6 takes 1/3 and writes 0.8% more)
GZIP_LEVEL = 1
#: rows per streamed batch
BATCH_ROWS = 500_000
#: members' ratings per sorted range of users in ratings.csv.gz (_user_slices)
SLICE_ROWS = 3_000_000
HEADER = ",".join(RATING_COLS) + "\n"
#: the column naming each rating's category in a build over named categories
DOMAIN = "domain"
#: the members' ratings of one category (u, i, rating, ts) by user and item code: the codes are the ids' ranks in
#: sorted order, so ordering by (u, ts, i) is the file's order (user, time, item), and only the members' rows are ever
#: joined to their ids (the `r` view joins every rating first: 2.5x slower on 25M ratings of 590K users, 1.2M items)
_MEMBERS = "SELECT a.u, a.i, a.rating, a.ts FROM a SEMI JOIN mu USING (u)"
#: the ids of `users` (the members, registered per category) as user codes
_MEMBER_CODES = "CREATE OR REPLACE TEMP TABLE mu AS SELECT u FROM user_codes SEMI JOIN users USING (user_id)"


def gzip_file(path: str | Path, chunks: Iterable[Any], level: int = GZIP_LEVEL) -> None:
    """Write the chunks (bytes-like) to `path` as one gzip stream (no name, mtime 0: the same bytes every time)."""
    z = zlib.compressobj(level, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        for c in chunks:
            f.write(z.compress(c))
        f.write(z.flush())


def word_counts(items: pd.DataFrame) -> pd.Series:
    """Title words per item id (the first title of an id)."""
    n = pd.Series(items["title"].astype(str).str.split().str.len().to_numpy(), index=items["item_id"].to_numpy())
    return n[~n.index.duplicated()]


def csv_field(value: str) -> str:
    """One text field as pandas' to_csv writes it (Python's csv, QUOTE_MINIMAL)."""
    buf = io.StringIO()
    csv.writer(buf, quoting=csv.QUOTE_MINIMAL, lineterminator="").writerow([value])
    return buf.getvalue()


class FrameRatings:
    """The members' ratings as a frame (pandas engine), in user, time, item order (with a `domain` column: each
    category's ratings in that order, categories in build order; a user's history is then per category)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame[RATING_COLS + ([DOMAIN] if DOMAIN in frame.columns else [])]

    def item_ids(self) -> set:
        """The ids of the items the members rated."""
        return set(self.frame["item_id"])

    def history_tokens(self, words: pd.Series, keys: pd.DataFrame) -> pd.DataFrame:
        """(user_id, [domain,] item_id, hist_tokens): title words in a user's ratings (of the rating's domain, where
        the frame has that column) before this one, for every rating."""
        by = ["user_id"] + ([DOMAIN] if DOMAIN in self.frame.columns else [])
        r = self.frame[by + ["item_id"]].assign(_w=self.frame["item_id"].map(words).fillna(0).to_numpy())
        r["hist_tokens"] = r.groupby(by, sort=False)["_w"].cumsum() - r["_w"]
        return r[by + ["item_id", "hist_tokens"]]

    def write(self, path: str | Path, level: int = GZIP_LEVEL) -> None:
        """ratings.csv.gz: the CSV text of pandas' to_csv, written in batches."""
        df = self.frame
        gzip_file(path, (df.iloc[i:i + BATCH_ROWS].to_csv(index=False, header=i == 0).encode("utf-8")
                         for i in range(0, max(len(df), 1), BATCH_ROWS)), level)


def _quoted(col: str) -> str:
    """SQL: the column as pandas' to_csv writes it (Python's csv, QUOTE_MINIMAL: quoted when it holds , \" or LF, and
    CR where this Python's csv module quotes CR)."""
    cr = f" OR contains({col}, chr(13))" if _quotes_cr() else ""
    return (f"CASE WHEN contains({col}, ',') OR contains({col}, '\"') OR contains({col}, chr(10)){cr} "
            f"THEN '\"' || replace({col}, '\"', '\"\"') || '\"' ELSE {col} END")


@functools.lru_cache(maxsize=1)
def _quotes_cr() -> bool:
    """Whether to_csv quotes a field holding a CR (it depends on the Python version)."""
    return pd.DataFrame({"a": ["x\ry"]}).to_csv(index=False, header=False).startswith('"')


def rating_texts(values: np.ndarray) -> pd.DataFrame:
    """(rating, txt): each rating value as pandas' to_csv writes a float64 column."""
    values = np.asarray(values, dtype=float)
    txt = pd.DataFrame({"rating": values}).to_csv(index=False, header=False).splitlines() if len(values) else []
    return pd.DataFrame({"rating": values, "txt": pd.Series(txt, dtype=object)})


def _line_bytes(arr: Any) -> memoryview:
    """The concatenated values of an Arrow string column (its data buffer between the first and last offset)."""
    import pyarrow as pa

    if pa.types.is_string_view(arr.type):
        arr = arr.cast(pa.string())
    if arr.null_count:
        raise ValueError("a members' ratings line is NULL")
    wide = pa.types.is_large_string(arr.type)
    _, offsets, data = arr.buffers()
    offs = np.frombuffer(offsets, np.int64 if wide else np.int32)[arr.offset:arr.offset + len(arr) + 1]
    return memoryview(data)[int(offs[0]):int(offs[-1])] if len(arr) else memoryview(b"")


class DuckRatings:
    """The members' ratings left in each category's database (duckdb engine): `users[i]` are category i's users;
    `open_db(path)` opens a database read-only (duckdb_engine.connect with the build's settings); `domains[i]`, when
    given, names category i (written as the `domain` column; histories are then per category)."""

    def __init__(self, dbs: list[Path], users: list[list[str]], open_db: Callable[[Path], Any],
                 domains: Optional[list[str]] = None) -> None:
        self.dbs, self.users, self.open_db, self.domains = dbs, users, open_db, domains

    def _each(self) -> Iterator[tuple[int, Any]]:
        for i, (db, users) in enumerate(zip(self.dbs, self.users)):
            con = self.open_db(db)
            try:
                con.register("users", pd.DataFrame({"user_id": pd.Series(users, dtype=object)}))
                con.execute(_MEMBER_CODES)
                yield i, con
            finally:
                con.close()

    def item_ids(self) -> set:
        """The ids of the items the members rated."""
        out: set = set()
        for _, con in self._each():
            out.update(con.execute(f"SELECT item_id FROM item_codes WHERE i IN (SELECT i FROM ({_MEMBERS}))")
                       .fetchnumpy()["item_id"].tolist())
        return out

    def history_tokens(self, words: pd.Series, keys: pd.DataFrame) -> pd.DataFrame:
        """(user_id, [domain,] item_id, hist_tokens) of the ratings at `keys` (user_id, item_id): title words in the
        user's ratings of the category before this one (without domains: the user's ratings in earlier categories
        counted first, as in one frame)."""
        w = pd.DataFrame({"item_id": words.index.astype(str), "w": words.to_numpy(float)})  # noqa: F841
        k = keys[["user_id", "item_id"]].drop_duplicates()  # noqa: F841
        parts, before = [], pd.Series(dtype=float)
        for i, con in self._each():
            con.register("w", w)
            con.register("k", k)
            con.execute(f"""CREATE OR REPLACE TEMP TABLE h AS SELECT m.u, m.i, m.ts, coalesce(wi.w, 0) AS w
                FROM ({_MEMBERS}) m LEFT JOIN (SELECT i, w.w FROM item_codes JOIN w USING (item_id)) wi USING (i)""")
            part = con.execute("""SELECT uc.user_id, ic.item_id, t.hist_tokens FROM (SELECT u, i, sum(w) OVER
                (PARTITION BY u ORDER BY ts, i ROWS UNBOUNDED PRECEDING) - w AS hist_tokens FROM h) t
                SEMI JOIN (SELECT u, i FROM k JOIN user_codes USING (user_id) JOIN item_codes USING (item_id)) kc
                USING (u, i) JOIN user_codes uc USING (u) JOIN item_codes ic USING (i)""").df()
            if self.domains:
                part.insert(1, DOMAIN, self.domains[i])
            else:
                part["hist_tokens"] += part["user_id"].map(before).fillna(0).to_numpy()
            parts.append(part)
            if len(self.dbs) > 1 and not self.domains:
                tot = con.execute("SELECT user_id, sum(w) AS s FROM h JOIN user_codes USING (u) GROUP BY user_id"
                                  ).df().set_index("user_id")["s"]
                before = before.add(tot, fill_value=0)
            con.execute("DROP TABLE h")
        cols = ["user_id"] + ([DOMAIN] if self.domains else []) + ["item_id", "hist_tokens"]
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)

    def _chunks(self) -> Iterator[Any]:
        yield (HEADER[:-1] + f",{DOMAIN}\n" if self.domains else HEADER).encode()
        for i, con in self._each():
            end = "," + csv_field(self.domains[i]) + "\n" if self.domains else "\n"
            con.register("fmt", rating_texts(con.execute(f"SELECT DISTINCT rating FROM ({_MEMBERS})").fetchnumpy()
                                             ["rating"]))
            for lo, hi in _user_slices(con):
                sql = (f"SELECT {_quoted('uc.user_id')} || ',' || {_quoted('ic.item_id')} || ',' || fmt.txt || ',' || "
                       f"CAST(m.ts AS VARCHAR) || {q(end)} AS line FROM ({_MEMBERS}) m JOIN fmt USING (rating) "
                       f"JOIN user_codes uc USING (u) JOIN item_codes ic USING (i) WHERE m.u BETWEEN {lo} AND {hi} "
                       "ORDER BY m.u, m.ts, m.i")
                for batch in con.execute(sql).to_arrow_reader(BATCH_ROWS):
                    yield _line_bytes(batch.column(0))

    def write(self, path: str | Path, level: int = GZIP_LEVEL) -> None:
        """ratings.csv.gz: every category's members' ratings by user, time and item, as pandas' to_csv writes them
        (with domains: each line ends with its category's name, the `domain` column)."""
        gzip_file(path, self._chunks(), level)


def _user_slices(con: Any, rows: Optional[int] = None) -> list[tuple[int, int]]:
    """The members' user codes in ranges of about `rows` ratings (SLICE_ROWS), in order: ratings.csv.gz sorts one
    range at a time (the same lines in the same order; at 25 M ratings of the wide shape, 11 M members' ratings in one
    sort took the build's peak 0.1 GB over the tree before codes)."""
    n = con.execute(f"SELECT u, count(*) AS n FROM ({_MEMBERS}) GROUP BY u ORDER BY u").fetchnumpy()
    if not len(n["u"]):
        return []
    part = (np.cumsum(n["n"]) - 1) // (rows or SLICE_ROWS)
    starts = np.flatnonzero(np.r_[True, part[1:] != part[:-1]])
    ends = np.r_[starts[1:], len(part)] - 1
    return [(int(n["u"][a]), int(n["u"][b])) for a, b in zip(starts, ends)]


def history_tokens(rated: Any, items: pd.DataFrame, members: pd.DataFrame) -> pd.Series:
    """Title words in each member's history before its query rating (ratings in user, time, item order; per
    category where both the ratings and the members have a `domain`)."""
    if not len(members):
        return pd.Series(dtype=float)
    keys = members[["user_id", "query_item"]].rename(columns={"query_item": "item_id"})
    r = rated.history_tokens(word_counts(items), keys)
    by = ["user_id"] + ([DOMAIN] if DOMAIN in r.columns and DOMAIN in members.columns else [])
    return members.merge(r, left_on=by + ["query_item"], right_on=by + ["item_id"], how="left")["hist_tokens"]


def as_rated(x: Any) -> Any:
    """FrameRatings for a frame; the object itself otherwise."""
    return FrameRatings(x) if isinstance(x, pd.DataFrame) else x

