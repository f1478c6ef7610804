"""model.backend: the typed bases every backend's schema extends. Each backend's own schema lives with the backend
(`recbench/backends/<kind>_conf.py`, found by `recbench/backends/schemas.py`); its defaults are the constructor's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from omegaconf import MISSING


@dataclass
class BackendConf:
    """Keys of every backend (model.backend); a backend's own keys are free-form additions to this node."""

    _target_: str = MISSING
    name: Optional[str] = None  # shown in records and the cache identity
    batch_size: Optional[int] = None  # requests handed to the backend at once


@dataclass
class ModelBackendConf(BackendConf):
    """Keys of every backend that serves a model (hf, vllm, openai)."""

    model: str = ""
    revision: Optional[str] = None
    quirks: Optional[List[str]] = None  # chat-template quirks (recbench/backends/quirks.py)
