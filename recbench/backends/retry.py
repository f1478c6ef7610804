"""Retry policy for remote backends: which failures are retried, exponential backoff with jitter, Retry-After."""
from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass
from typing import Mapping, Optional

#: HTTP statuses worth retrying: request timeout, conflict, too early, rate limit, and every 5xx
RETRY_STATUSES = frozenset({408, 409, 425, 429})


def retryable_status(status: Optional[int]) -> bool:
    """True for statuses a later attempt may fix (408/409/425/429 and 5xx)."""
    return status is not None and (status in RETRY_STATUSES or 500 <= status <= 599)


def parse_retry_after(headers: Optional[Mapping[str, str]]) -> Optional[float]:
    """Seconds to wait from retry-after-ms / Retry-After (seconds or HTTP date); None when absent or invalid."""
    if not headers:
        return None
    get = headers.get
    ms = get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    val = get("retry-after")
    if not val:
        return None
    try:
        return max(0.0, float(val))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(val)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries: attempt k waits min(max_s, initial_s * 2**k) scaled by random jitter, or Retry-After."""

    max_retries: int = 4
    initial_s: float = 0.5
    max_s: float = 20.0
    jitter: float = 0.5  # wait *= uniform(1 - jitter, 1 + jitter)
    max_retry_after_s: float = 60.0  # a server asking for longer than this is capped (keeps runs bounded)

    def delay(self, attempt: int, retry_after: Optional[float] = None, rng: random.Random | None = None) -> float:
        """Seconds to sleep before retry number `attempt` (0-based)."""
        if retry_after is not None:
            return min(retry_after, self.max_retry_after_s)
        base = min(self.max_s, self.initial_s * (2 ** attempt))
        r = (rng or random).uniform(1.0 - self.jitter, 1.0 + self.jitter)
        return max(0.0, base * r)
