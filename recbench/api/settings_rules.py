"""The rules tasks and methods declare for their own keys (`settings_rules`: `Rule` and its makers `whole`, `number`,
`flag`, `text`, `one_of`, `list_of`), their wording (`describe`), and `check_settings`, which checks a config node
against them before the run starts."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from recbench.api.errors import ConfigError


@dataclass(frozen=True)
class Rule:
    """The valid values of one task or method key: a kind with an optional range, or a set of choices.

    kind: "int" (a whole number), "number", "bool", "text", "choice" (one of `choices`), "list" (each element checked
    by `item`; `lo`/`hi` bound its length). lo/hi are inclusive bounds, `above` an exclusive lower bound;
    `null` allows None (documented as "null = ..." beside the key in its YAML); `per_key` also allows a mapping from
    those keys to valid values."""

    kind: str
    lo: Optional[float] = None
    hi: Optional[float] = None
    above: Optional[float] = None
    choices: tuple = ()
    null: bool = False
    item: Optional["Rule"] = None
    per_key: tuple = ()  # the value may also be a mapping from these keys to such values (e.g. {movie: x, book: y})


def whole(lo: Optional[int] = None, hi: Optional[int] = None, null: bool = False) -> Rule:
    """A whole number in [lo, hi]."""
    return Rule("int", lo=lo, hi=hi, null=null)


def number(lo: Optional[float] = None, hi: Optional[float] = None, above: Optional[float] = None,
           null: bool = False, per_key: tuple = ()) -> Rule:
    """A number in [lo, hi] (or above `above`)."""
    return Rule("number", lo=lo, hi=hi, above=above, null=null, per_key=per_key)


def flag() -> Rule:
    """true or false."""
    return Rule("bool")


def text(null: bool = False) -> Rule:
    """A string (a name, a path, a template)."""
    return Rule("text", null=null)


def one_of(*choices: Any, null: bool = False) -> Rule:
    """One of the given values."""
    return Rule("choice", choices=tuple(choices), null=null)


def list_of(item: Rule, min_len: int = 1, null: bool = False) -> Rule:
    """A list (at least min_len long) whose every element satisfies `item`."""
    return Rule("list", item=item, lo=min_len, null=null)


def _show(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_show(x)}" for k, x in v.items()) + "}"
    return str(v)


def _range(r: Rule) -> str:
    lo = f"({r.above:g}" if r.above is not None else f"[{r.lo:g}" if r.lo is not None else None
    if lo is not None and r.hi is not None:
        return f" in {lo}, {r.hi:g}]"
    if r.above is not None:
        return f" > {r.above:g}"
    if r.lo is not None:
        return f" >= {r.lo:g}"
    return f" <= {r.hi:g}" if r.hi is not None else ""


def describe(r: Rule) -> str:
    """What a rule accepts, in words ('a whole number >= 1, or null')."""
    if r.kind == "int":
        s = "a whole number" + _range(r)
    elif r.kind == "number":
        s = "a number" + _range(r)
    elif r.kind == "bool":
        s = "true or false"
    elif r.kind == "text":
        s = "a string"
    elif r.kind == "choice":
        s = "one of " + ", ".join(_show(c) for c in r.choices)
    else:
        assert r.item is not None
        s = f"a list of at least {r.lo:g} element(s), each {describe(r.item)}"
    if r.per_key:
        s += f", or a mapping {{{', '.join(f'{k}: ...' for k in r.per_key)}}} of such"
    return s + (", or null" if r.null else "")


def _ok(v: Any, r: Rule) -> bool:
    import math

    if v is None:
        return r.null
    if r.per_key and isinstance(v, dict):
        return set(v) <= set(r.per_key) and all(_ok(x, replace(r, per_key=(), null=False)) for x in v.values())
    if r.kind == "bool":
        return isinstance(v, bool)
    if r.kind == "text":
        return isinstance(v, str)
    if r.kind == "choice":
        return isinstance(v, (str, int, float)) and not isinstance(v, bool) and v in r.choices
    if r.kind == "list":
        return (isinstance(v, (list, tuple)) and (r.lo is None or len(v) >= r.lo)
                and all(_ok(x, r.item) for x in v))  # type: ignore[arg-type]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (r.kind == "int" and not isinstance(v, int)):
        return False
    return (math.isfinite(v) and (r.lo is None or v >= r.lo) and (r.hi is None or v <= r.hi)
            and (r.above is None or v > r.above))


def check_settings(node: Any, rules: dict[str, Rule], prefix: str) -> None:
    """Refuse the first key of a task/method config whose value breaks its rule (dotted rule names reach nested keys):
    one ConfigError naming the key, the value and what is valid. Keys the config does not set are not checked."""
    from recbench.api.errors import suggest

    plain = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
    for key, rule in rules.items():
        v: Any = plain
        for part in key.split("."):
            if not isinstance(v, dict) or part not in v:
                break
            v = v[part]
        else:
            if _ok(v, rule):
                continue
            hint = ""
            if rule.kind == "choice" and isinstance(v, str):
                hint = suggest(v, [str(c) for c in rule.choices])
            elif rule.kind == "list" and isinstance(v, (list, tuple)) and rule.item is not None:
                bad = next((x for x in v if not _ok(x, rule.item)), None)
                if bad is not None:
                    hint = f" '{_show(bad)}' is not.{suggest(str(bad), [str(c) for c in rule.item.choices])}"
            raise ConfigError(f"{prefix}.{key}={_show(v)}: must be {describe(rule)}.{hint}")
