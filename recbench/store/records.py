"""The per-example records of a run dir: `CallRecord`, `SampleRecord` (samples.jsonl), `ErrorRecord` (errors.jsonl),
and `SchemaError`, the one error of a run-dir file that cannot be read."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Optional

from recbench.api.variant import Variant, VariantAnswer
from recbench.store.redact import redact_url


class SchemaError(ValueError):
    """A run dir that cannot be read: names the file and what to do."""


def _known(cls: type, d: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def _float(v: Any) -> float:
    return math.nan if v is None else float(v)


# ---- per-example records -----------------------------------------------------------------------------
@dataclass
class CallRecord:
    """One model call of an example: answer text, finish reason, tokens, cache use, prompt hash."""

    key: str
    purpose: str = "answer"
    response: str = ""
    finish_reason: str = "stop"
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: Optional[float] = None
    prompt: Optional[str] = None  # hash of the messages in prompts.jsonl
    error: Optional[str] = None
    messages: Optional[list[dict[str, str]]] = None  # filled by readers that ask for prompts
    endpoint: Optional[str] = None  # the server that answered (several servers for one model), URL secrets masked

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "CallRecord":
        """From a samples.jsonl call entry."""
        return CallRecord(**_known(CallRecord, d))

    def to_dict(self) -> dict[str, Any]:
        """The samples.jsonl form (optional fields only when set; messages never: they live in prompts.jsonl)."""
        out: dict[str, Any] = {"key": self.key, "purpose": self.purpose, "response": self.response,
                               "finish_reason": self.finish_reason, "cached": self.cached,
                               "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens}
        if self.latency_s is not None:
            out["latency_s"] = round(self.latency_s, 4)
        if self.prompt is not None:
            out["prompt"] = self.prompt
        if self.error is not None:
            out["error"] = self.error
        if self.endpoint is not None:
            out["endpoint"] = redact_url(self.endpoint)
        return out


@dataclass
class SampleRecord:
    """One finished example: prediction, parse status, per-example metrics (None = undefined), model calls."""

    id: str
    meta: dict[str, Any] = field(default_factory=dict)
    prediction: Any = None
    parse_status: str = "ok"  # ok | repaired | failed
    details: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Optional[float]] = field(default_factory=dict)
    calls: list[CallRecord] = field(default_factory=list)
    truth: Any = None  # what the answer is scored against (Task.truth); None in run dirs written before it existed
    items: Optional[list[str]] = None  # the first k catalogue items the answer recommended (list metrics); None: none
    #: what each variant an audit asked answered (api/variant.py; empty: no audit varied the example)
    variants: list[VariantAnswer] = field(default_factory=list)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "SampleRecord":
        """From one samples.jsonl line."""
        if "id" not in d:
            raise SchemaError("a samples.jsonl record has no 'id'")
        for key, kind in (("meta", dict), ("details", dict), ("metrics", dict), ("calls", list)):
            if d.get(key) is not None and not isinstance(d[key], kind):
                raise SchemaError(f"'{key}' is a {type(d[key]).__name__}, not a {kind.__name__}")
        details = d.get("details") or {}
        variants = [VariantAnswer.from_dict(v) for v in d.get("variants") or []] or legacy_variants(details)
        return SampleRecord(id=str(d["id"]), meta=d.get("meta") or {}, prediction=d.get("prediction"),
                            parse_status=d.get("parse_status", "ok"), details=details,
                            metrics=d.get("metrics") or {},
                            calls=[CallRecord.from_dict(c) for c in d.get("calls") or []], truth=d.get("truth"),
                            items=d.get("items"), variants=variants)

    def to_dict(self) -> dict[str, Any]:
        """The samples.jsonl form (`truth` only when the task gives one)."""
        out = {"id": self.id, "meta": self.meta, "prediction": self.prediction, "parse_status": self.parse_status,
               "details": self.details, "metrics": self.metrics, "calls": [c.to_dict() for c in self.calls]}
        if self.truth is not None:
            out["truth"] = self.truth
        if self.items is not None:
            out["items"] = self.items
        if self.variants:
            out["variants"] = [v.to_dict() for v in self.variants]
        return out

    def value(self, metric: str) -> float:
        """A per-example metric as a float (NaN when undefined or absent)."""
        return _float(self.metrics.get(metric))

    @property
    def notes(self) -> list[str]:
        """Why the answer was repaired or failed (Outcome.notes), read from any run dir's details."""
        return notes_of(self.details)


def legacy_variants(details: dict[str, Any]) -> list[VariantAnswer]:
    """The variants of a record written before SampleRecord.variants existed, read from its details (and removed
    from them): `audit.orders` (display orders, with what was shown and ranked) and `template_audit.templates` (each
    template's answer, and with orders audited too, each order's metrics under it)."""
    orders = (details.pop("audit", None) or {}).get("orders") or []
    templates = (details.pop("template_audit", None) or {}).get("templates") or []
    out = []
    for t in templates or [{"template": 0}]:
        j = int(t.get("template") or 0)
        under = [{"metrics": m} for m in t.get("orders") or []] if templates else orders
        for k, o in enumerate(under or [{}]):
            first, shown = not k, orders[k] if not j and k < len(orders) else {}
            out.append(VariantAnswer(Variant(order=k if under else None, template=j),
                                     t.get("prediction") if first and templates else None,
                                     (t if first and templates else o).get("parse_status", "ok"),
                                     o.get("metrics") or (t.get("metrics") if first else None) or {},
                                     shown.get("shown"), shown.get("ranked"), t.get("file")))
    return out if orders or templates else []


#: detail keys under which run dirs record why an answer was repaired or failed: `notes` (Outcome.notes), and the
#: `note` / `parse_note` strings that run dirs written before Outcome.notes existed carry
NOTE_KEYS = ("notes", "note", "parse_note")


def notes_of(details: Any) -> list[str]:
    """The non-empty, distinct notes in a samples.jsonl record's details, whichever shape wrote them."""
    if not isinstance(details, dict):
        return []
    parts: list[str] = []
    for k in NOTE_KEYS:
        v = details.get(k)
        if isinstance(v, str) and v:
            parts.append(v)
        elif isinstance(v, list):
            parts += [str(x) for x in v if x]
    return list(dict.fromkeys(parts))


@dataclass
class ErrorRecord:
    """An example abandoned after a backend error (the next run retries it)."""

    id: str
    error: str
    calls: list[CallRecord] = field(default_factory=list)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "ErrorRecord":
        """From one errors.jsonl line."""
        return ErrorRecord(id=str(d["id"]), error=str(d.get("error", "")),
                           calls=[CallRecord.from_dict(c) for c in d.get("calls") or []])

    def to_dict(self) -> dict[str, Any]:
        """The errors.jsonl form."""
        return {"id": self.id, "error": self.error, "calls": [c.to_dict() for c in self.calls]}


@dataclass
class LoopStats:
    """Counters of one invocation of the loop (run/loop.py); metrics.json's `this_invocation` (store/facts.py
    `Invocation`) is these and what the run adds."""

    examples_total: int = 0
    examples_skipped: int = 0
    examples_finished: int = 0
    backend_errors: int = 0
    backend_calls: int = 0  # requests actually sent to the backend
    cache_hits: int = 0
    cache_misses: int = 0
    prompt_tokens: int = 0  # of requests sent to the backend in this invocation
    completion_tokens: int = 0
    wall_time_s: float = 0.0


#: the counters a further pass over the run's examples (an audit's extra requests, a judge dir) adds to this
#: invocation's, in the order metrics.json's judge block writes them
PASS_COUNTERS = ("backend_calls", "cache_hits", "cache_misses", "backend_errors", "prompt_tokens", "completion_tokens")
