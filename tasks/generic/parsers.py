"""Answer parsers of config-only benchmarks, by name: choice, number, json_field, list, regex, text."""
from __future__ import annotations

import re
from typing import Any, Callable

from recbench.api.config import YamlParserConf, with_defaults
from recbench.api.parsing import Parsed, failed, parse_choice, parse_json, parse_list, parse_number
from recbench.api.errors import ConfigError, lookup
from recbench.api.types import Constraint

ParserFn = Callable[[str], Parsed]


def _choice(cfg: dict[str, Any]) -> ParserFn:
    choices = [str(c) for c in cfg.get("choices") or []]
    if len(choices) < 2:
        raise ConfigError("task.parser.choices: kind 'choice' needs a list of at least two choices, e.g. [yes, no]")
    return lambda text: parse_choice(text, choices)


def _number(cfg: dict[str, Any]) -> ParserFn:
    lo, hi = cfg.get("lo"), cfg.get("hi")
    return lambda text: parse_number(text, None if lo is None else float(lo), None if hi is None else float(hi))


def _json_field(cfg: dict[str, Any]) -> ParserFn:
    fld = cfg.get("field")
    if not fld:
        raise ConfigError("task.parser.field: kind 'json_field' needs the JSON key to read, e.g. field: answer")

    def parse(text: str) -> Parsed:
        p = parse_json(text, expect=dict)
        if not p.ok:
            return p
        if fld not in p.value:
            return failed(f"JSON has no field '{fld}' (keys: {sorted(p.value)})")
        return Parsed(p.value[fld], p.status, p.note)

    return parse


def _list(cfg: dict[str, Any]) -> ParserFn:
    sep = cfg.get("sep")
    return lambda text: parse_list(text, sep)


def _regex(cfg: dict[str, Any]) -> ParserFn:
    pattern = cfg.get("pattern")
    if not pattern:
        raise ConfigError("task.parser.pattern: kind 'regex' needs a pattern, e.g. pattern: 'Answer: (\\w+)'")
    try:
        rx = re.compile(str(pattern), re.I if cfg["ignore_case"] else 0)
    except re.error as e:
        raise ConfigError(f"task.parser.pattern: invalid regular expression {pattern!r}: {e}") from e
    group = int(cfg["group"] if cfg["group"] is not None else 1 if rx.groups else 0)

    def parse(text: str) -> Parsed:
        m = rx.search(text)
        if not m:
            return failed(f"pattern {pattern!r} not found")
        return Parsed(m.group(group).strip(), "ok" if m.group(0).strip() == text.strip() else "repaired")

    return parse


def _text(cfg: dict[str, Any]) -> ParserFn:
    def parse(text: str) -> Parsed:
        t = text.strip()
        return Parsed(t, "ok") if t else failed("empty answer")

    return parse


PARSERS: dict[str, Callable[[dict[str, Any]], ParserFn]] = {
    "choice": _choice, "number": _number, "json_field": _json_field, "list": _list, "regex": _regex, "text": _text,
}


def build(cfg: Any) -> ParserFn:
    """The parser named by task.parser.kind, configured by the rest of task.parser (keys left out: YamlParserConf)."""
    d = with_defaults(cfg, YamlParserConf)
    kind = d.get("kind")
    if not kind:
        raise ConfigError(f"task.parser.kind is required. Valid choices: {', '.join(sorted(PARSERS))}")
    return lookup(PARSERS, str(kind), what="task.parser.kind", hint="task.parser.kind=")(d)


def constraint(cfg: Any) -> Constraint | None:
    """A decoding constraint matching the parser (choice set or regex), for backends that enforce them."""
    kind = cfg.get("kind")
    if kind == "choice":
        return Constraint(kind="choice", choices=tuple(str(c) for c in cfg.get("choices")))
    if kind == "regex":
        return Constraint(kind="regex", pattern=str(cfg.get("pattern")))
    return None
