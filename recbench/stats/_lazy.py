"""A module imported on first attribute access (scipy.stats costs more start-up time than the rest of a run)."""
from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for a module; the first attribute access imports it."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


def lazy_module(name: str) -> Any:
    """A stand-in for module `name` that imports it on first use."""
    return LazyModule(name)
