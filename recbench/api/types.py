"""The small typed primitives every part of recbench shares: requests, responses, examples, outcomes."""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generator, Literal, Optional, Protocol

from recbench.api.variant import VariantAnswer

ParseStatus = Literal["ok", "repaired", "failed"]


@dataclass(frozen=True)
class SamplingParams:
    """Every generation parameter, explicit: no backend may fall back to a model's implicit defaults."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 256
    seed: int = 0
    stop: tuple[str, ...] = ()

    @property
    def greedy(self) -> bool:
        """True when decoding is deterministic argmax."""
        return self.temperature <= 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for cache keys and run records."""
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d


@dataclass(frozen=True)
class Constraint:
    """Optional decoding constraint: a fixed choice set, a JSON schema, or a regex."""

    kind: Literal["choice", "json", "regex"]
    choices: tuple[str, ...] = ()
    schema: Optional[str] = None  # JSON schema serialized with sort_keys
    pattern: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for cache keys and run records."""
        return {"kind": self.kind, "choices": list(self.choices), "schema": self.schema, "pattern": self.pattern}

    @staticmethod
    def json_schema(schema: dict) -> "Constraint":
        """A JSON-schema constraint from a schema dict."""
        return Constraint(kind="json", schema=json.dumps(schema, sort_keys=True))


@dataclass(frozen=True)
class Request:
    """One chat completion to make: messages plus explicit sampling parameters."""

    messages: tuple[tuple[str, str], ...]  # ((role, content), ...) - hashable
    sampling: SamplingParams = field(default_factory=SamplingParams)
    constraint: Optional[Constraint] = None
    adapter: Optional[str] = None  # LoRA adapter name/path, part of the cache key
    logprobs: Optional[int] = None
    purpose: str = "answer"  # e.g. "profile", "answer": for accounting only, not part of the key
    # Which example asked, for replay backends that answer by example id (the `predictions` backend).
    # Not part of the request content: it enters the cache key only for backends whose identity sets
    # "keyed_by_example" (see recbench.store.response_cache.cache_key), so every real model keeps prompt-level caching.
    example_id: Optional[str] = None

    @staticmethod
    def chat(messages: list[dict[str, str]], sampling: SamplingParams, **kw: Any) -> "Request":
        """Build a Request from OpenAI-style message dicts."""
        return Request(messages=tuple((m["role"], m["content"]) for m in messages), sampling=sampling, **kw)

    def message_dicts(self) -> list[dict[str, str]]:
        """Messages as OpenAI-style dicts."""
        return [{"role": r, "content": c} for r, c in self.messages]

    def content_dict(self) -> dict[str, Any]:
        """Everything that determines the answer (besides the model): the cache-key payload."""
        return {
            "messages": self.message_dicts(),
            "sampling": self.sampling.to_dict(),
            "constraint": self.constraint.to_dict() if self.constraint else None,
            "adapter": self.adapter,
            "logprobs": self.logprobs,
        }

    def digest(self) -> str:
        """Stable hash of the request content (model identity not included)."""
        return sha256_json(self.content_dict())


@dataclass
class Response:
    """What a backend returns for one Request; `error` set means it failed (never cached)."""

    text: str = ""
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    logprobs: Optional[list] = None
    error: Optional[str] = None
    cached: bool = False
    endpoint: Optional[str] = None  # which server answered, masked (backends with several servers); never cached

    @property
    def ok(self) -> bool:
        """True when the backend produced an answer."""
        return self.error is None


@dataclass
class Example:
    """One evaluation unit: an id, task-specific payload and metadata used for breakdowns."""

    id: str
    data: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Display:
    """What a method run with an order variant (api/variant.py) showed and concluded: the item ids in display-slot
    order, and best-first (None when the answer failed)."""

    shown: list[str]
    ranked: Optional[list[str]] = None


@dataclass
class Outcome:
    """What a method concludes for one example: its prediction, how well the answer parsed, why it was repaired or
    failed (`notes`), the method's own payload (`details`, kept in samples.jsonl), and the payloads the audits read,
    declared and typed: `display` (a method run with an order variant), `order_pairs` (comparisons asked in both
    orders) and `variants` (what each variant an audit asked answered: SampleRecord.variants)."""

    prediction: Any
    parse_status: ParseStatus = "ok"
    details: dict[str, Any] = field(default_factory=dict)
    display: Optional[Display] = None
    order_pairs: Optional[list[list[bool]]] = None  # per comparison: [the first shown won in order AB, in order BA]
    notes: list[str] = field(default_factory=list)  # why the answer was repaired or failed; empty ones are dropped
    variants: list[VariantAnswer] = field(default_factory=list)

    def record_details(self) -> dict[str, Any]:
        """`details` as samples.jsonl keeps them: `notes` (when any), the method's payload, `shown`/`ranked`, then
        `order_pairs` (store.records.SampleRecord.notes reads them back, as well as an older run's `note`)."""
        notes = [n for n in self.notes if n]
        out: dict[str, Any] = {"notes": notes} if notes else {}
        out.update(self.details)
        if self.display is not None:
            out.update(shown=self.display.shown, ranked=self.display.ranked)
        if self.order_pairs is not None:
            out["order_pairs"] = self.order_pairs
        return out


# A method turns one example into a generator: it yields lists of Requests (one round for this
# example), receives the matching list of Responses, and finally returns an Outcome.
MethodGen = Generator[list[Request], list[Response], Outcome]


def sha256_json(obj: Any) -> str:
    """SHA-256 of the canonical JSON form of obj."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


_FILE_HASHES: dict[tuple[str, int, int], str] = {}


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, computed once per process for a given path, size and modification time."""
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _FILE_HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        _FILE_HASHES[key] = h.hexdigest()
    return _FILE_HASHES[key]


class Ahead(Protocol):
    """Work a method started ahead of the loop (Method.prefetch), e.g. a child process building prompts."""

    def close(self) -> None:
        """Stop the work (if it still runs) and let go of what it holds."""
