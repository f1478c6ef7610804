"""The one backend interface: a list of Requests in, a list of Responses out (same order)."""
from __future__ import annotations

import abc
from typing import Any

from recbench.types import Request, Response


class Backend(abc.ABC):
    """A model behind one interface; subclasses: hf, vllm, openai, predictions, and test doubles."""

    kind: str = "base"
    #: requests per generate() call the loop should send (the backend may split further)
    batch_size: int = 16

    @abc.abstractmethod
    def identity(self) -> dict[str, Any]:
        """Everything that identifies the model for cache keys: kind, name, file/revision hash, chat template hash."""

    @abc.abstractmethod
    def generate(self, requests: list[Request]) -> list[Response]:
        """Answer every request; a failure is a Response with `error` set, never an exception per item."""

    def effective_params(self) -> dict[str, Any]:
        """Backend-level settings that were actually in force (recorded in the run dir)."""
        return {}

    def close(self) -> None:
        """Release engines, servers, threads."""
