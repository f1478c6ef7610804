"""model.backend of the `vllm` backend (the offline engine); each default is VLLMBackend's own (it reads them here)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from recbench.api.backend_conf import ModelBackendConf


@dataclass
class VLLMBackendConf(ModelBackendConf):
    """The vLLM offline engine (recbench.backends.vllm.VLLMBackend)."""

    batch_size: Optional[int] = 1024


SCHEMA = VLLMBackendConf
