"""Planted-effect doubles for the memorization probe: deterministic backends whose memory is known exactly.

`PlantedMemory` answers the probe's prompts (tasks/memorization/templates) from a dictionary of records it
"remembers": an `Input: <id>::` lookup with the remembered title (else 'Unknown', or a confabulated title), a title
prefix with the remembered title that starts with it, a user's history with the remembered next item, and a choice
among `<id>::<title>` records by log-likelihood (remembered records score 0, the others a pseudo-random value drawn
from a hash of the prompt and the choice, so an unremembered item is chosen at chance). Built with
`planted(items, share, seed)` it remembers a seeded share of a catalogue (the 30% double); with share 1 it is the
leaky model that knows every real title (and, by construction, no fabricated one); with an empty memory it is the
null double that knows nothing.
"""
from __future__ import annotations

import hashlib
import random
import re
from typing import Any, Mapping, Optional, Sequence

from recbench.api.types import Request, Response
from recbench.backends.base import Backend

_LOOKUP = re.compile(r"^Input:\s*(.+?)::\s*$")
_PREFIX = re.compile(r"^Input:\s*(.+?)\s*$")
_USER = re.compile(r"^User\s+(\S+)\s+interacted with")
_YEAR = re.compile(r"\s*\(\d{4}\)\s*$")
_PAREN = re.compile(r"\s*\([^()]*\)$")
_ARTICLE_SUFFIX = re.compile(r"^(.*?),\s*(the|a|an)$", re.I)


def _unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts (the double's only source of 'randomness')."""
    h = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2 ** 64


def _base(title: str) -> str:
    """The main title as the probe splits it: year and trailing parenthesised part dropped, article in front."""
    t = _PAREN.sub("", _YEAR.sub("", title).strip()).strip() or title
    m = _ARTICLE_SUFFIX.match(t)
    return f"{m.group(2)} {m.group(1)}" if m else t


def planted(items: Mapping[str, str], share: float, seed: int) -> dict[str, str]:
    """The records (id -> title) a double remembers: a seeded `share` of `items` (rounded to the nearest item)."""
    keys = sorted(items)
    k = round(share * len(keys))
    chosen = random.Random(f"planted|{seed}").sample(keys, k)
    return {key: items[key] for key in chosen}


class PlantedMemory(Backend):
    """A deterministic backend that remembers exactly `memory` (id -> title) and `next_items` (user -> title).

    `confabulate=False` answers 'Unknown' for what it does not remember; True answers a plausible title instead
    (one of `pool`, picked by a hash of the prompt; a prefix is completed with the second half of such a title):
    a model that completes anything, which the control set must not count as remembering."""

    kind = "planted"

    def __init__(self, memory: Mapping[str, str], next_items: Optional[Mapping[str, str]] = None,
                 confabulate: bool = False, pool: Sequence[str] = (), name: str = "planted", batch_size: int = 16):
        self.memory = dict(memory)
        self.next_items = dict(next_items or {})
        self.confabulate = confabulate
        self.pool = list(pool)
        self.name = name
        self.batch_size = batch_size
        self.records = {f"{k}::{t}" for k, t in self.memory.items()}
        self.calls = 0

    def identity(self) -> dict[str, Any]:
        """Kind, name and a digest of what it remembers (two doubles with different memories never share a cache)."""
        digest = hashlib.sha256(repr((sorted(self.memory.items()), sorted(self.next_items.items()),
                                      self.confabulate, self.pool)).encode()).hexdigest()[:16]
        return {"kind": self.kind, "name": self.name, "memory": digest}

    def generate(self, requests: list[Request]) -> list[Response]:
        """One answer per request (choices scored, lookups and prefixes answered from memory)."""
        self.calls += len(requests)
        return [self._answer(r) for r in requests]

    # ---- answers -------------------------------------------------------------------------------
    def _made_up(self, req: Request) -> Optional[str]:
        if not (self.confabulate and self.pool):
            return None
        return self.pool[int(_unit("confabulate", req.digest()) * len(self.pool))]

    def _answer(self, req: Request) -> Response:
        if req.constraint is not None and req.constraint.kind == "choice":
            scores = [0.0 if c in self.records else -10.0 - 10.0 * _unit(req.digest(), c)
                      for c in req.constraint.choices]
            best = max(range(len(scores)), key=lambda j: scores[j])
            return Response(text=req.constraint.choices[best], prompt_tokens=10, completion_tokens=0,
                            logprobs=[{"choice": c, "logprob": s} for c, s in zip(req.constraint.choices, scores)])
        text = req.messages[-1][1].strip()
        return Response(text=self._text(req, text), prompt_tokens=10, completion_tokens=5)

    def _text(self, req: Request, text: str) -> str:
        user = _USER.match(text)
        if user:
            return self.next_items.get(user.group(1)) or self._made_up(req) or "Unknown"
        m = _LOOKUP.match(text)
        if m:
            key = m.group(1).strip()
            if key in self.memory:
                return f"{key}::{self.memory[key]}"
            made = self._made_up(req)
            return f"{key}::{made}" if made else "Unknown"
        m = _PREFIX.match(text)
        if m:
            prefix = m.group(1).strip().lower()
            for title in self.memory.values():
                base = _base(title)
                if base.lower().startswith(prefix + " "):
                    return title
            made = self._made_up(req)
            if made:
                w = _base(made).split()
                return f"{m.group(1).strip()} {' '.join(w[len(w) // 2:])}"
        return "Unknown"
