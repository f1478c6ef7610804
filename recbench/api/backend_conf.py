"""model.backend: the typed base every backend shares and each backend's schema (`BACKEND_SCHEMAS`); each default
equals the backend constructor's own (each constructor takes it from here)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional

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


@dataclass
class HFBackendConf(ModelBackendConf):
    """transformers in-process (recbench.backends.hf.HFBackend)."""

    batch_size: Optional[int] = 16
    # torch threads: a positive integer, or auto = the cores other processes leave free (recbench/backends/threads.py)
    threads: Any = "auto"


@dataclass
class VLLMBackendConf(ModelBackendConf):
    """The vLLM offline engine (recbench.backends.vllm.VLLMBackend)."""

    batch_size: Optional[int] = 1024


@dataclass
class OpenAIBackendConf(ModelBackendConf):
    """Any OpenAI-compatible server (recbench.backends.openai.OpenAIBackend): concurrency, timeouts, retries."""

    # one URL, a list of servers of the same model, or a comma-separated string (env); None: the hosted OpenAI API
    base_url: Any = None
    api_key_env: Optional[str] = None  # environment variable holding the key (None: no key, a local server)
    concurrency: int = 8  # requests in flight
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 20.0
    backoff_jitter: float = 0.5
    max_retry_after_s: float = 60.0
    # server down (stop, exit 2): this many connection failures in a row AND no HTTP answer for down_after_s seconds
    max_consecutive_failures: int = 5
    down_after_s: float = 3.0
    seed_param: bool = True
    # an answer larger than this (headers and body, bytes) is a backend error for its request, read no further
    max_response_bytes: int = 16 * 2**20


@dataclass
class PredictionsBackendConf(BackendConf):
    """Recorded answers replayed from a file (recbench.backends.predictions.PredictionsBackend)."""

    batch_size: Optional[int] = 256


#: conf/model/*.yaml name these as `- /schema/backend@backend: <name>`
BACKEND_SCHEMAS = {"hf": HFBackendConf, "vllm": VLLMBackendConf, "openai": OpenAIBackendConf,
                   "predictions": PredictionsBackendConf}
