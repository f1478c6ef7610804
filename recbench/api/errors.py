"""Name lookups that fail with the valid choices and a did-you-mean suggestion."""
from __future__ import annotations

import difflib
from typing import Mapping, TypeVar

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value that names something that does not exist."""


class DataError(ValueError):
    """A data file that cannot be read as the task expects: the message names the file, the line or record, and
    the fix."""


def suggest(name: str, choices: list[str]) -> str:
    """A ' Did you mean X?' hint, or ''."""
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.5)
    return f" Did you mean '{close[0]}'?" if close else ""


def lookup(table: Mapping[str, T], name: str, *, what: str, hint: str = "") -> T:
    """table[name], or a ConfigError listing the valid names."""
    if name in table:
        return table[name]
    choices = sorted(table)
    raise ConfigError(
        f"Unknown {what}: '{name}'.{suggest(name, choices)} Valid choices: {', '.join(choices)}"
        + (f" (set it with {hint}<choice>)" if hint else "")
    )


class CannotRun(RuntimeError):
    """A user-facing failure before or during a run (one clean line, no traceback)."""
