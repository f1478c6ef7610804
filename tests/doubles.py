"""Test doubles: a scripted backend that answers from a function, to pin the loop's logic without a model."""
from __future__ import annotations

from typing import Callable

from recbench.backends.base import Backend
from recbench.api.types import Request, Response


class ScriptedBackend(Backend):
    """Answers each request with answer_fn(request); counts the requests it received."""

    kind = "scripted"

    def __init__(self, answer_fn: Callable[[Request], str], name: str = "scripted", batch_size: int = 8):
        self.answer_fn = answer_fn
        self.name = name
        self.batch_size = batch_size
        self.calls = 0
        self.batches: list[int] = []

    def identity(self) -> dict:
        return {"kind": self.kind, "name": self.name}

    def generate(self, requests: list[Request]) -> list[Response]:
        self.calls += len(requests)
        self.batches.append(len(requests))
        out = []
        for r in requests:
            try:
                out.append(Response(text=self.answer_fn(r), prompt_tokens=10, completion_tokens=3))
            except Exception as e:  # noqa: BLE001 - the double turns failures into error responses
                out.append(Response(error=str(e)))
        return out


class CountingBackend(Backend):
    """A config-built backend (model.backend._target_) that answers listwise prompts and counts how often it was
    constructed; `static_identity` lets the loop key the cache without building it."""

    kind = "counting"
    built = 0

    def __init__(self, name: str = "counting", batch_size: int = 8):
        from tests.helpers import listwise_answer

        type(self).built += 1
        self.name, self.batch_size, self._answer = name, batch_size, listwise_answer

    @classmethod
    def static_identity(cls, name: str = "counting", **_) -> dict:
        return {"kind": cls.kind, "name": name}

    def identity(self) -> dict:
        return self.static_identity(self.name)

    def generate(self, requests: list[Request]) -> list[Response]:
        return [Response(text=self._answer(r), prompt_tokens=10, completion_tokens=3) for r in requests]
