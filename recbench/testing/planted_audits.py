"""Planted-effect doubles for the template and noise-floor audits: deterministic PerRecBench listwise backends whose
sensitivity to the prompt's wording or to the batch size is known exactly.

Both answer a listwise prompt with either the **informed** ranking (users by the mean of their shown related-item
ratings minus their average rating: bm25_history's rule applied to what the prompt shows, PTC about 0.5 on the
bundled sample) or a **blind** one (a permutation drawn from a hash of the prompt: PTC 0 in expectation). Which one is
decided by a hash of (seed, prompt[, batch size]), so a double is a pure function of its settings and the request.

- `PlantedTemplateEffect(skill)`: under the template whose marker phrase the prompt holds (`LISTWISE_MARKERS`,
  template k of tasks/perrec/templates/listwise*.j2) the answer is informed with probability skill[k]. Unequal
  skills plant a template effect (the mean PTC differs by template); equal skills are the null double, whose answers
  still change with the wording (another prompt, another hash) but not systematically.
- `BatchSensitive(flip)`: at its reference batch size every answer is informed; at any other batch size a share
  `flip` of the prompts (a hash decides) is answered blind. flip = 0 is the null double (batch-invariant).

`drive(method, backend, examples)` runs a method's generators on a backend in-process (no cache, no run store), for
power simulations over many seeds.
"""
from __future__ import annotations

import hashlib
import re
from types import SimpleNamespace
from typing import Any, Iterable, Mapping, Optional, Sequence

from recbench.api.types import Request, Response
from recbench.backends.base import Backend

#: a phrase only template k of PerRecBench listwise holds (tests/audits check each against the template files)
LISTWISE_MARKERS: Mapping[int, str] = {0: "users all rated the item", 1: "was rated by each of the",
                                       2: "Task: rank users by relative preference."}
_BLOCK = re.compile(r"^(User [A-Z]):\n- Average rating: ([0-9.]+);(.*?)(?=^User [A-Z]:|\Z)", re.M | re.S)
_RATED = re.compile(r'^\s*\* ".*": ([0-9.]+) stars$', re.M)


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts."""
    h = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2 ** 64


def _user_text(req: Request) -> str:
    return next(c for r, c in reversed(req.messages) if r == "user")


def informed_ranking(prompt: str) -> list[str]:
    """Labels by the mean (shown related-item rating - the user's average rating), highest first (label order on
    ties); a user without shown ratings scores 0."""
    scores = []
    for label, avg, body in _BLOCK.findall(prompt):
        rated = [float(x) - float(avg) for x in _RATED.findall(body)]
        scores.append((label, sum(rated) / len(rated) if rated else 0.0))
    return [lab for lab, _ in sorted(scores, key=lambda x: (-x[1], x[0]))]


def blind_ranking(prompt: str, seed: int) -> list[str]:
    """The labels in a permutation drawn from a hash of (seed, prompt)."""
    labels = [lab for lab, _, _ in _BLOCK.findall(prompt)]
    return sorted(labels, key=lambda lab: _unit("blind", seed, prompt, lab))


def as_json(labels: Sequence[str]) -> str:
    """The answer listwise asks for."""
    return '{"ranking": [' + ", ".join(f'"{x}"' for x in labels) + "]}"


def template_of(prompt: str, markers: Mapping[int, str] = LISTWISE_MARKERS) -> Optional[int]:
    """The template whose marker phrase the prompt holds (None when none does)."""
    return next((k for k, m in markers.items() if m in prompt), None)


class PlantedTemplateEffect(Backend):
    """Listwise answers informed with probability skill[k] under template k (a hash of seed and prompt decides)."""

    kind = "planted_template"

    def __init__(self, skill: Sequence[float], seed: int = 0, markers: Mapping[int, str] = LISTWISE_MARKERS,
                 name: str = "planted-template", batch_size: int = 16):  # noqa: D107
        self.skill, self.seed, self.markers = [float(s) for s in skill], int(seed), dict(markers)
        self.name, self.batch_size = name, batch_size
        self.calls = 0

    def identity(self) -> dict[str, Any]:
        """Kind, name, skills and seed (two doubles never share cache entries)."""
        return {"kind": self.kind, "name": self.name, "skill": self.skill, "seed": self.seed}

    def answer(self, prompt: str) -> str:
        """The answer to one listwise prompt."""
        k = template_of(prompt, self.markers)
        if k is None or k >= len(self.skill):
            raise ValueError(f"no skill for this prompt's template (markers: {self.markers})")
        informed = _unit("template", self.seed, prompt) < self.skill[k]
        return as_json(informed_ranking(prompt) if informed else blind_ranking(prompt, self.seed))

    def generate(self, requests: list[Request]) -> list[Response]:
        """One answer per request (an error Response for a prompt of no known template)."""
        self.calls += len(requests)
        out = []
        for r in requests:
            try:
                out.append(Response(text=self.answer(_user_text(r)), prompt_tokens=10, completion_tokens=8))
            except ValueError as e:
                out.append(Response(error=str(e)))
        return out


class BatchSensitive(Backend):
    """Listwise answers that are informed at the reference batch size; at another batch size a share `flip` of the
    prompts (a hash of seed and prompt decides) is answered blind."""

    kind = "planted_batch"

    def __init__(self, flip: float, seed: int = 0, reference_batch_size: int = 16, name: str = "planted-batch",
                 batch_size: int = 16):  # noqa: D107
        self.flip, self.seed, self.reference = float(flip), int(seed), int(reference_batch_size)
        self.name, self.batch_size = name, batch_size
        self.calls = 0
        self.batches: list[int] = []

    def identity(self) -> dict[str, Any]:
        """Kind, name, flip share and seed: as for a real model, the batch size is not part of it."""
        return {"kind": self.kind, "name": self.name, "flip": self.flip, "seed": self.seed}

    def answer(self, prompt: str) -> str:
        """The answer to one listwise prompt at the current batch size."""
        blind = self.batch_size != self.reference and _unit("batch", self.seed, prompt) < self.flip
        return as_json(blind_ranking(prompt, self.seed) if blind else informed_ranking(prompt))

    def generate(self, requests: list[Request]) -> list[Response]:
        """One answer per request."""
        self.calls += len(requests)
        self.batches.append(len(requests))
        return [Response(text=self.answer(_user_text(r)), prompt_tokens=10, completion_tokens=8) for r in requests]


def drive(method: Any, backend: Backend, examples: Iterable[Any]) -> list[SimpleNamespace]:
    """Run the method's generator for each example on the backend in-process (no cache, no run store); records with
    id, meta, prediction, parse_status, details, metrics and calls (the response texts), as the loop would write."""
    out = []
    for ex in examples:
        gen = method.run(ex)
        calls: list[SimpleNamespace] = []
        try:
            reqs = next(gen)
            while True:
                resps = backend.generate(list(reqs))
                calls += [SimpleNamespace(response=r.text) for r in resps]
                reqs = gen.send(resps)
        except StopIteration as stop:
            o = stop.value
        out.append(SimpleNamespace(id=ex.id, meta=ex.meta, prediction=o.prediction, parse_status=o.parse_status,
                                   details=o.record_details(), metrics=method.task.score(ex, o), calls=calls,
                                   variants=o.variants))
    return out
