"""Per-model chat quirks: message rewrites some chat templates need (e.g. Gemma-2 rejects a system message)."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

Messages = list[dict[str, Any]]


def fold_system(messages: Messages) -> Messages:
    """Fold system message(s) into the first user turn ("<system>\\n\\n<user>"), as the papers' own clients did for Gemma."""
    system = [m["content"] for m in messages if m["role"] == "system"]
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if not system:
        return [dict(m) for m in messages]
    prefix = "\n\n".join(system)
    for m in rest:
        if m["role"] == "user":
            m["content"] = f"{prefix}\n\n{m['content']}"
            return rest
    return [{"role": "user", "content": prefix}, *rest]  # no user turn: the system text becomes one


#: quirk name (as written in a model config's backend.quirks list) -> message rewrite
QUIRKS: dict[str, Callable[[Messages], Messages]] = {
    "fold_system": fold_system,
}


def check_quirks(names: Iterable[str] | None) -> tuple[str, ...]:
    """Validate quirk names from a backend config; an unknown name is a one-line error listing the known ones."""
    out = tuple(names or ())
    for n in out:
        if n not in QUIRKS:
            raise ValueError(f"model.backend.quirks: unknown quirk '{n}'. Known quirks: {', '.join(sorted(QUIRKS))}")
    return out


def apply_quirks(messages: Sequence[dict[str, Any]], names: Sequence[str]) -> Messages:
    """The messages after each named quirk, in order (a copy; the request itself is unchanged)."""
    out = [dict(m) for m in messages]
    for n in names:
        out = QUIRKS[n](out)
    return out
