"""Answer parsers (json, choice, list, number); each returns a value and a recorded parse status."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from recbench.api.types import ParseStatus


@dataclass
class Parsed:
    """A parsed answer: value (None when failed), status, and why it failed or was repaired."""

    value: Any
    status: ParseStatus
    note: str = ""

    @property
    def ok(self) -> bool:
        """True unless parsing failed."""
        return self.status != "failed"


def failed(note: str) -> Parsed:
    """A failed parse with a reason."""
    return Parsed(None, "failed", note)


_FENCE = re.compile(r"```(?:json|python)?\s*(.*?)```", re.S)


def _balanced_spans(text: str, open_ch: str, close_ch: str):
    """Yield substrings that start at open_ch and end at its matching close_ch (string-aware)."""
    for start in (i for i, ch in enumerate(text) if ch == open_ch):
        depth, in_str, esc = 0, False, False
        for j in range(start, len(text)):
            ch = text[j]
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == open_ch:
                depth += 1
            elif ch == close_ch:
                depth -= 1
                if depth == 0:
                    yield text[start : j + 1]
                    break


def parse_json(text: str, expect: type | tuple[type, ...] = (dict, list)) -> Parsed:
    """The first JSON value of the expected type in the text ('ok' if the whole answer is that JSON)."""
    stripped = text.strip()
    try:
        v = json.loads(stripped)
        if isinstance(v, expect):
            return Parsed(v, "ok")
    except (json.JSONDecodeError, ValueError):
        pass
    candidates = [m.group(1) for m in _FENCE.finditer(text)]
    kinds = expect if isinstance(expect, tuple) else (expect,)
    for k in kinds:
        o, c = ("{", "}") if k is dict else ("[", "]")
        candidates += list(_balanced_spans(text, o, c))
    for cand in candidates:
        for attempt in (cand, cand.replace("'", '"')):
            try:
                v = json.loads(attempt)
            except (json.JSONDecodeError, ValueError):
                continue
            if isinstance(v, expect):
                return Parsed(v, "repaired", "extracted JSON from surrounding text")
    return failed("no JSON value of the expected type found")


def parse_number(text: str, lo: Optional[float] = None, hi: Optional[float] = None) -> Parsed:
    """The first number in the text; out-of-range values are clamped and marked 'repaired'."""
    m = re.search(r"-?\d+(?:\.\d+)?", text)
    if not m:
        return failed("no number found")
    v = float(m.group(0))
    status: ParseStatus = "ok" if text.strip() == m.group(0) else "repaired"
    note = "" if status == "ok" else "number extracted from text"
    if lo is not None and v < lo:
        return Parsed(lo, "repaired", f"{v} clamped to {lo}")
    if hi is not None and v > hi:
        return Parsed(hi, "repaired", f"{v} clamped to {hi}")
    return Parsed(v, status, note)


def parse_choice(text: str, choices: Sequence[str]) -> Parsed:
    """Which of the choices the answer names: exact match 'ok', a unique mention 'repaired', else failed."""
    t = text.strip()
    for c in choices:
        if t == c:
            return Parsed(c, "ok")
    norm = lambda s: re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()  # noqa: E731
    nt = norm(t)
    for c in choices:
        if nt == norm(c):
            return Parsed(c, "repaired", "matched ignoring case/punctuation")
    # the earliest mentioned choice wins if exactly one choice occurs first unambiguously
    positions = {c: f" {nt} ".find(f" {norm(c)} ") for c in choices}
    found = {c: p for c, p in positions.items() if p >= 0}
    if len(found) == 1:
        c = next(iter(found))
        return Parsed(c, "repaired", "choice mentioned in text")
    if len(found) > 1:
        return failed(f"several choices mentioned: {sorted(found)}")
    return failed("no choice mentioned")


def parse_list(text: str, sep: Optional[str] = None) -> Parsed:
    """A list of strings: a JSON/python list, or items split by `sep`, or numbered/bulleted lines."""
    js = parse_json(text, expect=list)
    if js.ok:
        return Parsed([str(x).strip() for x in js.value], js.status, js.note)
    if sep and sep in text:
        return Parsed([x.strip() for x in text.split(sep) if x.strip()], "ok")
    lines = [re.sub(r"^\s*(?:\d+[.)]|[-*•])\s*", "", ln).strip() for ln in text.splitlines()]
    items = [ln for ln in lines if ln]
    if len(items) >= 2:
        return Parsed(items, "repaired", "list read from lines")
    return failed("no list found")
