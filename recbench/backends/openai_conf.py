"""model.backend of the `openai` backend (any OpenAI-compatible server); each default is OpenAIBackend's own."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from recbench.api.backend_conf import ModelBackendConf


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


SCHEMA = OpenAIBackendConf
