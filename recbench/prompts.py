"""Prompt templates: Jinja2 files rendered in a sandbox (a template cannot reach Python internals)."""
from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment


@functools.lru_cache(maxsize=1)
def sandbox() -> ImmutableSandboxedEnvironment:
    """The one sandboxed Jinja2 environment (undefined variables are errors)."""
    return ImmutableSandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=False,
                                         trim_blocks=True, lstrip_blocks=True)


@functools.lru_cache(maxsize=256)
def _load(source: str):
    return sandbox().from_string(source)


def template_text(package: str, name: str) -> str:
    """Text of a template file shipped in a package's templates/ folder, or of a filesystem path."""
    p = Path(name)
    if p.is_absolute() or p.exists():
        return p.read_text(encoding="utf-8")
    return resources.files(package).joinpath("templates", name).read_text(encoding="utf-8")


def render(package: str, name: str, **variables: Any) -> str:
    """Render a template (package templates/<name>, or a path) with the given variables."""
    return _load(template_text(package, name)).render(**variables).strip()


def render_string(source: str, **variables: Any) -> str:
    """Render template source text in the sandbox."""
    return _load(source).render(**variables).strip()
