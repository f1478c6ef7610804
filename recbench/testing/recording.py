"""A backend wrapper that keeps every request it was sent, so benchmarks can replay the same requests raw."""
from __future__ import annotations

from typing import Any

from recbench.backends.base import Backend
from recbench.api.types import Request, Response


class Recording(Backend):
    """Delegates to a backend and keeps every request it was sent (to replay them raw)."""

    def __init__(self, inner: Backend):
        self.inner, self.kind, self.batch_size = inner, inner.kind, inner.batch_size
        self.requests: list[Request] = []

    def identity(self) -> dict[str, Any]:
        """The wrapped backend's identity."""
        return self.inner.identity()

    def generate(self, requests: list[Request]) -> list[Response]:
        """Record, then delegate."""
        self.requests.extend(requests)
        return self.inner.generate(requests)
