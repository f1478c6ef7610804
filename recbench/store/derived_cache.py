"""On-disk cache of data derived from input files (loaded examples, rating counts, de-quantized model weights), so
that a second run on the same data skips parsing, pandas, retrieval and GGUF conversion. An entry is keyed by the
input files' bytes, the arguments and the source of the module that builds it; a missing, stale or unreadable entry
is rebuilt, never trusted."""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
import os
import pickle
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, TypeVar

from recbench.api.types import file_sha256

log = logging.getLogger(__name__)
T = TypeVar("T")

_DIR: dict[str, Optional[Path]] = {}


def configure(directory: Optional[str | Path]) -> None:
    """Use this folder for derived data (cache.derived_dir); None turns the cache off."""
    _DIR["dir"] = Path(directory) if directory else None


def cache_dir() -> Optional[Path]:
    """The configured folder, else ${RECBENCH_CACHE_DIR:-.cache}/derived."""
    if "dir" in _DIR:
        return _DIR["dir"]
    return Path(os.environ.get("RECBENCH_CACHE_DIR") or ".cache") / "derived"


@functools.lru_cache(maxsize=None)
def _source_hash(*files: str) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(Path(f).read_bytes())
    return h.hexdigest()


def entry_key(kind: str, args: tuple, inputs: Iterable[Path], sources: tuple[str, ...]) -> str:
    """The key of one entry: kind, arguments, each input file's name and sha256, the builder's source files."""
    payload = {"kind": kind, "args": [str(a) for a in args], "code": _source_hash(*sources),
               "inputs": [[p.name, file_sha256(p)] for p in inputs]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


def disk_cached(kind: str, inputs: Callable[..., list[Path]]) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorator: keep fn(*args)'s result on disk, keyed by `inputs(*args)` (the files it reads), the arguments and
    fn's module source (plus recbench/api/types.py). Missing inputs skip the cache, so fn reports them itself."""

    def deco(fn: Callable[..., T]) -> Callable[..., T]:
        sources = tuple(sorted({inspect.getsourcefile(fn) or "", inspect.getsourcefile(file_sha256) or ""} - {""}))

        @functools.wraps(fn)
        def wrapper(*args: Any) -> T:
            d = cache_dir()
            files = inputs(*args)
            if d is None or not all(p.is_file() for p in files):
                return fn(*args)
            path = d / f"{kind}-{entry_key(kind, args, files, sources)}.pkl"
            try:
                with open(path, "rb") as f:
                    return pickle.load(f)
            except FileNotFoundError:
                pass
            except Exception as e:  # noqa: BLE001 - a torn or foreign entry is rebuilt, never trusted
                log.warning("derived-data cache entry %s unreadable (%s): rebuilt", path, e)
            out = fn(*args)
            _write_atomic(path, out)
            return out

        wrapper.uncached = fn  # type: ignore[attr-defined]
        return wrapper

    return deco


def _write_atomic(path: Path, obj: Any) -> None:
    """Pickle obj to path through a temporary file (a crash leaves no torn entry); a read-only cache is skipped."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError as e:
        log.warning("derived-data cache %s not written (%s)", path.parent, e)
        if tmp:
            Path(tmp).unlink(missing_ok=True)


MANIFEST = ".recbench-manifest.json"


def folder_entry(kind: str, args: tuple, inputs: list[Path], sources: tuple[str, ...],
                 build: Callable[[Path], None]) -> Optional[Path]:
    """A folder that build(folder) fills once, kept in the cache under `kind-key` (None when the cache is off or
    cannot be written). It is written under a temporary name and renamed when complete, its manifest listing every
    file and size last; an entry whose manifest or files do not match (torn, truncated, edited) is rebuilt."""
    d = cache_dir()
    if d is None:
        return None
    dest = d / f"{kind}-{entry_key(kind, args, inputs, sources)}"
    if folder_complete(dest):
        return dest
    from filelock import FileLock

    try:
        d.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(d / f".{dest.name}.lock"))
        lock.acquire()
    except OSError as e:
        log.warning("derived-data cache %s not writable (%s): not cached", d, e)
        return None
    try:  # one builder at a time (parallel jobs); a killed holder's lock is released by the OS
        if folder_complete(dest):
            return dest
        for stale in [dest, *d.glob(f"{dest.name}.tmp*")]:  # a torn entry, a crashed build's leftovers
            if stale.exists():
                log.warning("derived-data cache entry %s incomplete: rebuilt", stale)
                shutil.rmtree(stale, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(dir=d, prefix=f"{dest.name}.tmp"))
        try:
            build(tmp)
            files = {str(f.relative_to(tmp)): f.stat().st_size for f in sorted(tmp.rglob("*")) if f.is_file()}
            (tmp / MANIFEST).write_text(json.dumps({"kind": kind, "files": files}, indent=1))
            os.rename(tmp, dest)
        except OSError as e:
            log.warning("derived-data cache entry %s not written (%s)", dest, e)
            return None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return dest
    finally:
        lock.release()


def folder_complete(path: Path) -> bool:
    """True when a folder entry's manifest is readable and every file it lists is there at its size."""
    try:
        files = json.loads((path / MANIFEST).read_text())["files"]
        return all((path / name).stat().st_size == size for name, size in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def discard(path: Path) -> None:
    """Remove a folder entry found unusable, so the next folder_entry call rebuilds it."""
    log.warning("derived-data cache entry %s unreadable: rebuilt", path)
    (path / MANIFEST).unlink(missing_ok=True)
    shutil.rmtree(path, ignore_errors=True)
