"""`python -m recbench.cache merge SRC... DEST | stats PATH...`: combine per-job response caches, and describe them."""
from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any, Iterable

from recbench.store.response_cache import SCHEMA

COLUMNS = "key, model, request, response, created"
CHUNK = 2000


def cache_files(paths: Iterable[str | Path]) -> list[Path]:
    """SQLite cache files named directly, or found (*.sqlite, recursively) under named folders such as a sweep dir."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.rglob("*.sqlite") if q.is_file())
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(f"no cache file or folder at {p}")
    return list(dict.fromkeys(q.resolve() for q in out))


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=60, isolation_level=None)
    conn.execute("PRAGMA busy_timeout=60000")
    return conn


def _check_table(conn: sqlite3.Connection, path: Path) -> None:
    cols = [r[1] for r in conn.execute("PRAGMA table_info(responses)")]
    if cols[:5] != ["key", "model", "request", "response", "created"]:
        raise ValueError(f"{path}: not a recbench response cache (table 'responses' has columns {cols or 'none'}; "
                         f"expected {COLUMNS})")


def merge(sources: Iterable[str | Path], dest: str | Path, progress: bool = True) -> dict[str, Any]:
    """Copy every row of the source caches into DEST (created if absent); a key DEST already holds is kept as is.

    Keys are content hashes of (model identity, request), so the same key means the same question to the same model:
    which copy is kept does not change what a later run is served. Returns {rows_before, rows_after, sources: [...]}.
    """
    from tqdm.auto import tqdm

    dest = Path(dest)
    srcs = [s for s in cache_files(sources) if s != dest.resolve()]
    dest.parent.mkdir(parents=True, exist_ok=True)
    out = _connect(dest)
    out.execute("PRAGMA journal_mode=WAL")
    out.execute(SCHEMA)
    _check_table(out, dest)
    before = out.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    report = []
    for src in tqdm(srcs, desc="merging caches", unit="file", disable=not progress):
        conn = _connect(src)
        _check_table(conn, src)
        read = added = 0
        cur = conn.execute(f"SELECT {COLUMNS} FROM responses")
        while rows := cur.fetchmany(CHUNK):
            out.execute("BEGIN IMMEDIATE")
            n0 = out.total_changes
            out.executemany("INSERT OR IGNORE INTO responses VALUES (?,?,?,?,?)", rows)
            added += out.total_changes - n0
            out.execute("COMMIT")
            read += len(rows)
        conn.close()
        report.append({"path": str(src), "rows": read, "added": added})
    after = out.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
    out.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file: safe to copy or read elsewhere
    out.close()
    return {"dest": str(dest), "rows_before": before, "rows_after": after, "sources": report}


def stats(path: str | Path) -> dict[str, Any]:
    """Rows, size on disk, time span, and rows per model name of one cache file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no cache file at {path}")
    conn = _connect(path)
    _check_table(conn, path)
    n, first, last = conn.execute("SELECT COUNT(*), MIN(created), MAX(created) FROM responses").fetchone()
    per_model = dict(conn.execute("SELECT model, COUNT(*) FROM responses GROUP BY model ORDER BY COUNT(*) DESC"))
    conn.close()
    size = sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.is_file())
    return {"path": str(path), "rows": n, "bytes": size, "first_created": first, "last_created": last,
            "models": per_model}


def seed_copy(shared: str | Path, job_cache: str | Path) -> bool:
    """Start a job's own cache as a copy of the shared one (SQLite backup API); False when there is nothing to copy."""
    shared, job_cache = Path(shared), Path(job_cache)
    if not shared.is_file() or job_cache.exists() or shared.resolve() == job_cache.resolve():
        return False
    job_cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = job_cache.with_name(job_cache.name + ".seeding")
    src = sqlite3.connect(f"file:{shared}?mode=ro", uri=True, timeout=60)
    dst = sqlite3.connect(str(tmp))
    src.backup(dst)
    dst.close()
    src.close()
    tmp.rename(job_cache)
    return True


try:  # the callback needs hydra; `python -m recbench.cache stats` does not
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover - hydra is a core dependency
    Callback = object  # type: ignore[misc,assignment]


class PerJobCacheCallback(Callback):  # type: ignore[misc]
    """Sweeps on many hosts: each job writes its own cache file (set by the launcher preset through
    hydra.job.env_set), seeded from the shared cache at job start; when the multirun ends, every job's file is
    merged back into the shared cache. No SQLite file is ever written by two hosts."""

    def __init__(self, shared: str, seed: bool = True, merge_back: bool = True, caches_subdir: str = "caches"):
        self.shared = Path(shared).absolute()
        self.seed = seed
        self.merge_back = merge_back
        self.caches_subdir = caches_subdir

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        """Copy the shared cache into this job's (empty) cache file, so answers already paid for are hits."""
        if self.seed and config.cache.enabled:
            seed_copy(self.shared, Path(str(config.cache.path)).absolute())

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        """Merge every job's cache under <sweep dir>/caches into the shared cache."""
        folder = Path(str(config.hydra.sweep.dir)) / self.caches_subdir
        if self.merge_back and folder.is_dir() and any(folder.rglob("*.sqlite")):
            res = merge([folder], self.shared, progress=False)
            added = sum(r["added"] for r in res["sources"])
            print(f"recbench: merged {len(res['sources'])} job cache(s) into {self.shared} (+{added} rows, "
                  f"{res['rows_after']} in all)", file=sys.stderr)
