"""Run-dir names (the override string of a run, made filesystem-safe and short; names that stay one path component;
a shard's name without its shard keys) and the removal of a run dir that a refused run left holding only Hydra's files."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path, PurePath

MAX_VALUE = 40  # a longer value (or any path) enters the name as its stem plus a short hash


def _short(value: str) -> str:
    if "://" in value:  # a URL's user info and query (credentials) never enter a folder name
        from recbench.store.redact import has_secret, redact_text, redact_url

        url = value.strip("'\"")
        if url.startswith("["):  # a list of servers (model.backend.base_url=[...]): their count, a hash without secrets
            return f"{url.count('://')}urls-{hashlib.sha256(redact_text(url).encode()).hexdigest()[:8]}"
        if has_secret(url):
            value = redact_url(url).split("?", 1)[0].split("#", 1)[0]
    if "/" not in value and len(value) <= MAX_VALUE:
        return value
    stem = PurePath(value.strip("'\"").rstrip("/")).name.split(".")[0][:MAX_VALUE] or "value"  # a quoted path too
    return f"{stem}-{hashlib.sha256(value.encode()).hexdigest()[:8]}"


def variant_name(overrides: str) -> str:
    """'limit=4,task.data_dir=/a/b/released' -> 'limit=4,task.data_dir=released-1a2b3c4d' ('' -> 'default');
    a secret-named key's value (api_key, token, password, secret) shows as '***'."""
    parts: list[str] = []
    for piece in overrides.split(","):  # hydra joins overrides with ','; a piece without '=' continues a value
        if parts and not re.match(r"^[+~]*[\w.@/-]+=", piece):
            parts[-1] += "," + piece
        else:
            parts.append(piece)
    from recbench.store.redact import MASK, secret_key

    out = []
    for p in parts:
        key, eq, value = p.partition("=")
        value = MASK if eq and secret_key(key) else value  # an api_key, token or password never names a folder
        out.append(f"{key}{eq}{_short(value)}" if eq else p)
    return ",".join(out).replace("/", "_") or "default"


#: the overrides that make a run a shard of another (run.shard=I run.shards=N); merged runs are named without them
SHARD_KEYS = ("run.shard", "run.shards")


def unsharded_name(name: str) -> str:
    """A shard's run-dir name without its shard overrides: 'limit=12,run.shard=0,run.shards=3' -> 'limit=12'
    ('run.shard=0,run.shards=3' -> 'default'), the run dir of the same command without sharding."""
    pieces = name.split(",")
    keep = [p for p in pieces if p.split("=", 1)[0].lstrip("+~") not in SHARD_KEYS]
    if len(keep) == len(pieces):
        return name
    return ",".join(keep) or "default"


def safe_name(name: str) -> str:
    """One path component for a task, model or method name: separators become '_', and '.', '..' or '' a name
    that stays inside the runs dir (the config check refuses such names first; this is the guarantee)."""
    s = str(name).replace("/", "_").replace("\\", "_").replace("\x00", "_")
    return s if s.strip(".") else f"_{s}_"


def bad_name(name: object) -> bool:
    """True for a name that is not one plain path component (it holds a separator, or is '', '.' or '..')."""
    s = str(name)
    return safe_name(s) != s


#: what Hydra itself writes into a job's run dir before recbench runs (its config copies and the job log)
_HYDRA_OWN = {".hydra"}


def discard_unused(run_dir: str | Path, runs_root: str | Path | None = None) -> bool:
    """Remove a run dir that holds nothing but Hydra's own files (a run refused before it wrote anything), and the
    folders above it that this left empty, up to the runs dir; a run dir with any recbench file is left alone.
    Returns True when it removed the run dir."""
    import os
    import shutil

    d = Path(run_dir)
    try:
        entries = list(d.iterdir())
    except OSError:
        return False
    if any(not (e.name in _HYDRA_OWN or (e.is_file() and e.suffix == ".log")) for e in entries):
        return False
    parent = d.resolve().parent
    shutil.rmtree(d, ignore_errors=True)
    root = Path(runs_root if runs_root is not None else os.environ.get("RECBENCH_RUNS_DIR", "runs")).resolve()
    while parent != root and root in parent.parents:
        try:
            parent.rmdir()  # only an empty folder
        except OSError:
            break
        parent = parent.parent
    return True


def runs_root() -> Path:
    """The folder every run dir and sweep dir goes under ($RECBENCH_RUNS_DIR, else ./runs)."""
    import os

    return Path(os.environ.get("RECBENCH_RUNS_DIR", "runs"))


def unusable_root(root: Path) -> str | None:
    """Why no run dir can be made under root (a file stands where a folder must be, or the nearest existing folder
    is not writable), in one sentence with the fix; None when it can."""
    import os

    p = root.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    fix = "Fix: set RECBENCH_RUNS_DIR to a writable folder, or move that file aside"
    if not p.is_dir():
        return f"cannot create the runs dir {root}: {p} is a file, not a folder. {fix}"
    if not os.access(p, os.W_OK | os.X_OK):
        return f"cannot create the runs dir {root}: {p} is not writable. {fix}"
    return None


def remove_if_empty(root: Path) -> None:
    """Remove root when it is an empty folder (a runs dir this invocation created and left unused)."""
    try:
        root.rmdir()
    except OSError:
        pass
