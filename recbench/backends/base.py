"""The one backend interface: a list of Requests in, a list of Responses out (same order), or a stream of them."""
from __future__ import annotations

import abc
import inspect
from typing import Any, Callable, Mapping, Optional

from recbench.api.types import Request, Response


def constructor_args(cls: type, config: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments `cls(**config)` runs with: config's values, the constructor's own defaults for the keys it
    leaves out (keys the constructor does not take are dropped), so code that reads a backend config without building
    the backend (static_identity) never restates a default."""
    params = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    return {n: config.get(n, p.default) for n, p in params.items()
            if n != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


class BackendUnavailable(RuntimeError):
    """The server is down (N connection failures in a row and no answer for a while): stop the run, do not retry."""


def empty_answer(text: Any, finish_reason: Optional[str], *, in_process: bool = False) -> Optional[str]:
    """Why an answer is not a model's answer (None when it is): null, not text, or blank text, unless the model
    stopped at its token limit (finish_reason=length, e.g. a reasoning model that spent max_tokens thinking).

    Every backend turns such an answer into an error Response: retried where the backend retries, never cached,
    and the example is abandoned (retried on the next run) instead of scored as the model's answer. An in-process
    engine (hf, vllm offline: `in_process=True`) decoded the text itself, so a blank string is what the model said
    (the same again on every retry): it is kept and scored as unparsed; only a missing or non-text answer is an
    error there."""
    if in_process and isinstance(text, str):
        return None
    if text is None:
        return f"null answer text (finish_reason={finish_reason})" if finish_reason != "length" else None
    if not isinstance(text, str):
        return f"answer text is a {type(text).__name__}, not a string"
    if not text.strip() and finish_reason != "length":
        return f"empty answer (finish_reason={finish_reason})"
    return None


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
