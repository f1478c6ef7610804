"""Run-dir names: the override string of a run, made filesystem-safe and short."""
from __future__ import annotations

import hashlib
import re
from pathlib import PurePath

MAX_VALUE = 40  # a longer value (or any path) enters the name as its stem plus a short hash


def _short(value: str) -> str:
    if "/" not in value and len(value) <= MAX_VALUE:
        return value
    stem = PurePath(value.rstrip("/")).name.split(".")[0][:MAX_VALUE] or "value"
    return f"{stem}-{hashlib.sha256(value.encode()).hexdigest()[:8]}"


def variant_name(overrides: str) -> str:
    """'limit=4,task.data_dir=/a/b/released' -> 'limit=4,task.data_dir=released-1a2b3c4d' ('' -> 'default')."""
    parts: list[str] = []
    for piece in overrides.split(","):  # hydra joins overrides with ','; a piece without '=' continues a value
        if parts and not re.match(r"^[+~]*[\w.@/-]+=", piece):
            parts[-1] += "," + piece
        else:
            parts.append(piece)
    out = []
    for p in parts:
        key, eq, value = p.partition("=")
        out.append(f"{key}{eq}{_short(value)}" if eq else p)
    return ",".join(out).replace("/", "_") or "default"
