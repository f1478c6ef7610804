"""The one backend interface: a list of Requests in, a list of Responses out (same order), or a stream of them."""
from __future__ import annotations

import abc
from typing import Any, Callable

from recbench.types import Request, Response


class BackendUnavailable(RuntimeError):
    """The backend cannot be reached at all (e.g. N consecutive connection failures): stop the run, do not retry."""


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

    def stream(self, next_requests: Callable[[int], list[Request]],
               on_response: Callable[[Request, Response], None]) -> None:
        """Serve requests until next_requests returns [] while nothing is in flight.

        Pulls up to k new requests with `next_requests(k)` whenever it has capacity and calls
        `on_response(request, response)` in the calling thread for each answer (errors too, with
        `response.error` set). This default, for batch engines, pulls `batch_size` requests, answers them
        with one `generate()` call and delivers them in order; API backends keep a window in flight instead.
        """
        while True:
            batch = next_requests(self.batch_size)
            if not batch:
                return
            for req, resp in zip(batch, self.generate(batch)):
                on_response(req, resp)

    def effective_params(self) -> dict[str, Any]:
        """Backend-level settings that were actually in force (recorded in the run dir)."""
        return {}

    def close(self) -> None:
        """Release engines, servers, threads."""
