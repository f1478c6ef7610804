"""Scripted answers to the toy task's prompts, and a config-built backend that gives them (model=toy_scripted)."""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

from recbench.api.types import Request, Response
from recbench.backends.base import Backend

ITEM_LINE = re.compile(r"^(Item [A-Z]): (.*?) \((\w+)\)$", re.M)


def shown(req: Request) -> list[tuple[str, str]]:
    """(label, title) of the items in the toy prompt of a request, in display order."""
    user = next(c for r, c in req.messages if r == "user")
    return [(lab, title) for lab, title, _ in ITEM_LINE.findall(user)]


def as_json(labels: list[str]) -> str:
    """The answer the toy method asks for."""
    return '{"ranking": [' + ", ".join(f'"{x}"' for x in labels) + "]}"


def reverse(req: Request) -> str:
    """A deterministic, parseable answer: the shown items in reverse display order."""
    return as_json([lab for lab, _ in shown(req)][::-1])


def first_shown(req: Request) -> str:
    """Position-bound: the shown items in display order (the first shown always ranked first)."""
    return as_json([lab for lab, _ in shown(req)])


@lru_cache(maxsize=1)
def _scores() -> dict[tuple[str, str], float]:
    from tests.toy.task import examples

    return {(r["id"], it["title"]): it["score"] for r in examples() for it in r["items"]}


def oracle(req: Request) -> str:
    """Order-invariant and exact: the shown items by the rating the listener gave (read by the request's example)."""
    s = _scores()
    return as_json([lab for lab, t in sorted(shown(req), key=lambda x: -s[(req.example_id, x[1])])])


ANSWERS: dict[str, Callable[[Request], str]] = {"reverse": reverse, "first_shown": first_shown, "oracle": oracle}


class ToyBackend(Backend):
    """model=toy_scripted: answers toy prompts with one of ANSWERS (model.backend.answer); counts how often it was
    built; `static_identity` lets the loop key the cache without building it."""

    kind = "toy"
    built = 0

    def __init__(self, name: str = "toy", answer: str = "reverse", batch_size: int = 8):
        type(self).built += 1
        self.name, self.answer, self.batch_size = name, answer, batch_size
        self._answer = ANSWERS[answer]
        self.calls = 0

    @classmethod
    def static_identity(cls, name: str = "toy", answer: str = "reverse", **_) -> dict:
        """The identity from the config alone."""
        return {"kind": cls.kind, "name": name, "answer": answer}

    def identity(self) -> dict:
        """Kind, name and the answer script."""
        return self.static_identity(self.name, self.answer)

    def generate(self, requests: list[Request]) -> list[Response]:
        """One scripted answer per request."""
        self.calls += len(requests)
        return [Response(text=self._answer(r), prompt_tokens=10, completion_tokens=3) for r in requests]
