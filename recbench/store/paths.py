"""Paths a command takes, checked before anything is read or written: a readable file, an existing folder, a folder
that can be written; each refusal is a PathRefused whose message names the flag, the path, what is wrong and the fix.

The builder and every `python -m recbench.<command>` share these checks, so one bad path reads the same everywhere."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from recbench.api.errors import DataError


class PathRefused(DataError):
    """A path that is missing, of the wrong kind, unreadable or not writable."""


def readable_file(path: Any, label: str, fix: str) -> Path:
    """path, unless it is missing, a folder, unreadable or empty (PathRefused `label: what is wrong. Fix: fix`)."""
    p = Path(path)
    wrong = ("no such file" if not p.exists() else "a folder, not a file" if p.is_dir() else
             "not readable (permissions)" if not os.access(p, os.R_OK) else
             "the file is empty (0 bytes)" if p.stat().st_size == 0 else "")
    if wrong:
        raise PathRefused(f"{label}: {wrong}. Fix: {fix}")
    return p


def existing_dir(path: Any, label: str, fix: str) -> Path:
    """path, unless it is missing or a file (PathRefused)."""
    p = Path(path)
    if not p.is_dir():
        raise PathRefused(f"{label}: {'no such folder' if not p.exists() else 'a file, not a folder'}. Fix: {fix}")
    return p


def writable_dir(path: Any, label: str, what: str) -> Path:
    """path, unless a folder cannot be made there: it is a file, lies under a file, or its nearest existing parent
    takes no new folder (probed by making and removing a temporary folder there, so nothing is left behind)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise PathRefused(f"{label}: a file, not a folder. Fix: give a folder for {what}")
    base = p if p.is_dir() else p.parent
    while not base.exists():
        base = base.parent
    if not base.is_dir():
        raise PathRefused(f"{label}: {base} is a file, not a folder. Fix: give a folder for {what}")
    try:
        shutil.rmtree(tempfile.mkdtemp(prefix=".recbench-probe-", dir=base))
    except OSError as e:
        raise PathRefused(f"{label}: cannot write in {base} ({e.strerror}). Fix: give a writable folder for "
                          f"{what}") from None
    return p


def writable_file(path: Any, label: str, what: str) -> Path:
    """path, unless it is a folder or its folder cannot be written (PathRefused)."""
    p = Path(path)
    if p.is_dir():
        raise PathRefused(f"{label}: a folder, not a file. Fix: give a file name for {what}")
    writable_dir(p.parent, label, what)
    return p
