"""The `duckdb` build engine: each category is prepared out of core in its own DuckDB database (memory limit, spill
directory, threads), and only its separated chains come back into Python, streamed block by block; the selection
then runs the pandas engine's own code (build_select) over the chains of every category.

A category's work folder holds `db.duckdb` (its tables, see build_sql) and `chains.npz` + `prepared.json` (its
chains and counts), written last: a folder without `prepared.json` is not prepared. A single build prepares every
category in turn; a sharded build prepares one per job (build_shards); both end in `finalize`."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np
import pandas as pd

import recbench.tasks.perrec.build.sql as sql
from recbench.tasks.perrec.build.checks import no_ratings, scale_for
from recbench.tasks.perrec.build.config import BuildConfig
from recbench.tasks.perrec.build.pandas_engine import separated_chains


@dataclass(frozen=True)
class Category:
    """One input of a build: its source kind, ratings path, item metadata, and domain name ('' for a single input)."""

    source: str
    input: str
    meta: Optional[str] = None
    domain: str = ""


@dataclass(frozen=True)
class Engine:
    """DuckDB settings: memory limit, threads, rows per streamed batch."""

    memory_limit: str = "1GB"
    threads: int = 2
    batch_rows: int = 250_000  # 1M-row batches held ~0.15 GB more at 25 M ratings (docs/perrec.md)


def connect(db: Path, eng: Engine, read_only: bool = False) -> Any:
    """A DuckDB connection with the memory limit, thread count and a spill folder next to the database."""
    import duckdb

    con = duckdb.connect(str(db), read_only=read_only)
    con.execute(f"SET memory_limit = {sql.q(eng.memory_limit)}")
    con.execute(f"SET threads = {int(eng.threads)}")
    con.execute(f"SET temp_directory = {sql.q(db.parent / 'spill')}")
    con.execute("SET preserve_insertion_order = true")
    return con


def units_per_second(t_max: Optional[int], unit: str) -> int:
    """1 for second timestamps, 1000 for milliseconds ('auto': ms when values exceed 1e11)."""
    if unit == "auto":
        return 1000 if t_max is not None and t_max > 1e11 else 1
    return {"s": 1, "ms": 1000}[unit]


def _chain_batches(con: Any, lam: float, rows: int) -> Iterator[pd.DataFrame]:
    """The candidate rows in whole blocks, about `rows` at a time (a batch's last block waits for the next batch)."""
    reader = con.execute(sql.candidates_sql(lam)).to_arrow_reader(rows)
    carry: Optional[pd.DataFrame] = None
    for batch in reader:
        df = batch.to_pandas()
        df = df if carry is None else pd.concat([carry, df], ignore_index=True)
        last = df["blk"].iat[-1]
        cut = int(np.searchsorted(df["blk"].to_numpy(), last, "left"))
        carry = df.iloc[cut:]
        if cut:
            yield df.iloc[:cut]
    if carry is not None and len(carry):
        yield carry


def chains(con: Any, lam: float, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every block's separated chain of length >= 2: (members as `a` rowids, -1 padded; lengths; item codes)."""
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for df in _chain_batches(con, lam, rows):
        e = pd.DataFrame({"blk": df["blk"].to_numpy(), "i": df["icode"].to_numpy(),
                          "relative_rating": df["rel"].to_numpy(float)}, index=df["rid"].to_numpy())
        m, n, it = separated_chains(e, lam)
        keep = n >= 2
        parts.append((m[keep], n[keep], it[keep]))
    width = max([p[0].shape[1] for p in parts], default=2)
    members = np.concatenate([np.pad(m, ((0, 0), (0, width - m.shape[1])), constant_values=-1) for m, _, _ in parts]) \
        if parts else np.full((0, width), -1, np.int64)
    lengths = np.concatenate([n for _, n, _ in parts]) if parts else np.zeros(0, np.int64)
    items = np.concatenate([i for _, _, i in parts]) if parts else np.zeros(0, np.int64)
    return members.astype(np.int64), lengths.astype(np.int64), items.astype(np.int64)


def prepare(cat: Category, folder: Path, cfg: BuildConfig, eng: Engine) -> dict[str, Any]:
    """Load one category into its database, annotate it, find its chains; write chains.npz and prepared.json."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prepared.json").unlink(missing_ok=True)
    db = folder / "db.duckdb"
    db.unlink(missing_ok=True)
    path = sql.ratings_file(cat.source, cat.input) if cat.source in sql.SOURCES else Path(cat.input)
    con = connect(db, eng)
    try:
        scale = scale_for(cfg, cat.source)
        n_raw = sql.load(con, cat.source, path, scale) if cat.source in sql.SOURCES else _load_frame(con, cat, scale)
        con.execute("SET preserve_insertion_order = false")  # raw's rowids are file lines; later ones only labels
        sql.clean(con, cfg.min_rating, cfg.max_rating)
        summ = sql.summary(con)
        ups = units_per_second(summ["t_max"], cfg.time_unit)
        sql.annotate(con, cfg.avg)
        n_elig = sql.eligible(con, cfg.gamma, int(cfg.window_days * 86400 * ups))
        members, lengths, items = chains(con, cfg.lam, eng.batch_rows)
        n_items = int(con.execute("SELECT coalesce(max(icode) + 1, 0) FROM e").fetchone()[0])  # codes 0..n-1
        con.execute("CHECKPOINT")
    except Exception as e:
        import duckdb

        if isinstance(e, (OSError, duckdb.Error)):
            raise sql.duckdb_error(e, path, folder) from None
        raise
    finally:
        con.close()
    np.savez(folder / "chains.npz", members=members, lengths=lengths, items=items)
    info = {"category": cat.__dict__, "n_raw": n_raw, **summ, "units_per_second": ups, "n_eligible": n_elig,
            "n_eligible_items": n_items}
    tmp = folder / "prepared.json.tmp"
    tmp.write_text(json.dumps(info, default=str))
    os.replace(tmp, folder / "prepared.json")
    return info


def _load_frame(con: Any, cat: Category, scale: tuple[float, float]) -> int:
    """Sources without a DuckDB reader (amazon-user-json): read with pandas, then held as the `raw` table."""
    from recbench.tasks.perrec.build.readers import read_source

    ratings, _ = read_source(cat.source, cat.input, cat.meta, scale)
    no_ratings(len(ratings), cat.input)
    frame = ratings.astype({"rating": float, "timestamp": float})  # noqa: F841 (read by name below)
    con.execute("CREATE OR REPLACE TEMP TABLE raw AS SELECT user_id, item_id, rating, timestamp FROM frame")
    return len(ratings)
