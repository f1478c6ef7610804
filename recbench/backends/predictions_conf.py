"""model.backend of the `predictions` backend (replayed answers); each default is PredictionsBackend's own."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from recbench.api.backend_conf import BackendConf


@dataclass
class PredictionsBackendConf(BackendConf):
    """Recorded answers replayed from a file (recbench.backends.predictions.PredictionsBackend)."""

    batch_size: Optional[int] = 256


SCHEMA = PredictionsBackendConf
