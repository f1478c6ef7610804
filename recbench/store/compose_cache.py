"""A plain run's composed config kept on disk (`~/.cache/recbench/compose/<key>.pkl`, see `folder`), so that a command
run again skips Hydra's compose and the schema registration before it (0.2-0.5 s of start-up on a busy machine).

The key is a hash of everything composing reads: the overrides (as Hydra gets them), the working directory (the
config's `hydra.runtime.cwd`), the task name, Python's, Hydra's and OmegaConf's versions, `HYDRA_MAIN_MODULE`, and the
path, modification time and size of every file under the config package (conf/), of every `.py` file of recbench
(the structured-config schemas live there), of Hydra's plugin folders and of the command's own config folders
(`hydra.searchpath`). An edited config file or schema is a new key. A file that cannot be read or written is a miss,
never an error; `RECBENCH_COMPOSE_CACHE=0` turns the cache off."""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any, Iterable, Optional

#: the cache's folder under the cache dir
FOLDER = "compose"
#: bumped when the kept value's shape changes
FORMAT = 1
#: at most this many kept configs (each ~26 kB; a test suite's runs from temporary folders are all different keys):
#: a save beyond it removes the oldest down to KEEP
MAX_FILES, KEEP = 256, 192


def enabled() -> bool:
    """False under RECBENCH_COMPOSE_CACHE=0."""
    return os.environ.get("RECBENCH_COMPOSE_CACHE", "1") != "0"


def folder() -> Path:
    """$RECBENCH_COMPOSE_CACHE_DIR, else ${XDG_CACHE_HOME:-~/.cache}/recbench/compose: one per user, not per
    RECBENCH_CACHE_DIR (a fresh response cache still finds the composed configs)."""
    if os.environ.get("RECBENCH_COMPOSE_CACHE_DIR"):
        return Path(os.environ["RECBENCH_COMPOSE_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "recbench" / FOLDER


def _stat_tree(root: Path, suffix: Optional[str], out: list) -> None:
    """(relative path, mtime_ns, size) of every file under root (those ending in suffix), in a stable order."""
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if suffix is None or f.endswith(suffix):
                st = os.stat(os.path.join(dirpath, f))
                out.append((os.path.relpath(os.path.join(dirpath, f), root), st.st_mtime_ns, st.st_size))


def key_for(overrides: list[str], task_name: str, trees: Iterable[tuple[Path, Optional[str]]]) -> Optional[str]:
    """The cache key of a compose (None: not cacheable, or the cache is off). `trees`: (folder, file suffix or None)."""
    if not enabled():
        return None
    import hydra
    import omegaconf

    files: list = []
    try:
        for root, suffix in trees:
            files.append(str(root))
            _stat_tree(root, suffix, files)
    except OSError:
        return None
    parts = {"format": FORMAT, "overrides": overrides, "cwd": os.getcwd(), "task_name": task_name,
             "python": sys.version, "hydra": hydra.__version__, "omegaconf": omegaconf.__version__,
             "main_module": os.environ.get("HYDRA_MAIN_MODULE"), "files": files}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def load(key: Optional[str]) -> Optional[Any]:
    """The value kept under key, or None (no key, no file, or a file that cannot be read back)."""
    if key is None:
        return None
    try:
        with open(folder() / f"{key}.pkl", "rb") as f:
            return pickle.load(f)
    except Exception:  # noqa: BLE001 - a missing, torn or stale file is a miss: the config is composed again
        return None


def save(key: Optional[str], value: Any) -> None:
    """Keep value under key (written to a temporary file, then renamed); a failure to write is ignored."""
    if key is None:
        return
    d = folder()
    tmp = d / f".{key}.{os.getpid()}.tmp"
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        tmp.replace(d / f"{key}.pkl")
        _prune(d)
    except Exception:  # noqa: BLE001 - the cache only saves time: a read-only or full disk composes each time
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass


def _prune(d: Path) -> None:
    """Remove the oldest kept configs when there are more than MAX_FILES (down to KEEP)."""
    kept = [e for e in os.scandir(d) if e.name.endswith(".pkl")]
    if len(kept) <= MAX_FILES:
        return
    kept.sort(key=lambda e: e.stat().st_mtime_ns)
    for e in kept[: len(kept) - KEEP]:
        try:
            os.unlink(e.path)
        except OSError:
            pass
