"""A full disk as one clear error (DiskFull) for the run-dir writer and the response cache, never a traceback."""
from __future__ import annotations

import contextlib
import errno
import shutil
from pathlib import Path
from typing import Iterator, Optional

#: OSError numbers that mean "no room": the disk is full, or the user's quota is used up
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
#: an SQLite I/O error (it reports a full disk as SQLITE_IOERR_SHMSIZE / _WRITE / ...) on a disk with less than this
#: free is a full disk
NEARLY_FULL_BYTES = 1 << 20


class DiskFull(RuntimeError):
    """A write failed because the disk (or quota) holding a recbench file is full."""


def free_bytes(path: str | Path) -> Optional[int]:
    """Free bytes on the disk holding path (its first existing ancestor), or None when unknown."""
    p = Path(path)
    for q in [p, *p.parents]:
        try:
            return shutil.disk_usage(q).free
        except OSError:
            continue
    return None


def _free(path: Path) -> str:
    """Free space on the disk holding path, e.g. '0 B free', or '' when unknown."""
    n: Optional[float] = free_bytes(path)
    if n is None:
        return ""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit} free" if unit == "B" else f"{n:.1f} {unit} free"
        n /= 1024
    return ""


def disk_full(path: str | Path, what: str, fix: str) -> DiskFull:
    """The DiskFull for a failed write of `what` at `path`, with the free space and `fix` (what to point elsewhere)."""
    p = Path(path)
    free = _free(p)
    return DiskFull(f"disk full: cannot write {what + ' ' if what else ''}{p}{f' ({free})' if free else ''}: free "
                    f"space on that disk, or {fix}")


def is_full(e: BaseException, path: Optional[str | Path] = None) -> bool:
    """True for an OSError meaning no space left (ENOSPC / EDQUOT), SQLite's 'database or disk is full', or an SQLite
    I/O error while the disk holding `path` has (almost) no free space left."""
    if isinstance(e, OSError):
        return e.errno in FULL_ERRNOS
    if type(e).__module__ == "sqlite3":  # sqlite3.Error, told apart without importing sqlite3 here
        name = str(getattr(e, "sqlite_errorname", ""))
        if name == "SQLITE_FULL" or "disk is full" in str(e):
            return True
        if name.startswith("SQLITE_IOERR") and path is not None:
            free = free_bytes(path)
            return free is not None and free < NEARLY_FULL_BYTES
    return False


@contextlib.contextmanager
def writing(path: str | Path, what: str, fix: str, tmp: Optional[Path] = None) -> Iterator[None]:
    """Map a no-space OSError raised inside the block to DiskFull; remove `tmp` (a half-written temp file) on any
    failure."""
    try:
        yield
    except BaseException as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        if is_full(e):
            raise disk_full(path, what, fix) from None
        raise
