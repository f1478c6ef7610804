"""model.backend of the `hf` backend (transformers in-process); each default is HFBackend's own (it reads them here)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from recbench.api.backend_conf import ModelBackendConf


@dataclass
class HFBackendConf(ModelBackendConf):
    """transformers in-process (recbench.backends.hf.HFBackend)."""

    batch_size: Optional[int] = 16
    # torch threads: a positive integer, or auto = the cores other processes leave free (recbench/backends/threads.py)
    threads: Any = "auto"
    # seconds one batch may take: the first batch holds 2 prompts, the next ones as many as the measured rate fits,
    # up to batch_size (recbench/backends/batch_pace.py); 0 or null: always batch_size prompts
    batch_seconds: Optional[float] = 25.0


SCHEMA = HFBackendConf
