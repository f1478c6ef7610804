"""Prompt templates: Jinja2 files rendered in a sandbox (a template cannot reach Python internals)."""
from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Any

from jinja2 import BaseLoader, FileSystemLoader, StrictUndefined, TemplateNotFound
from jinja2.sandbox import ImmutableSandboxedEnvironment


class NoTemplateFiles(BaseLoader):
    """The loader of template text given inline (e.g. a YAML task's prompt): it has no folder, so an include, import
    or extends is refused by name (a TemplateNotFound, i.e. a TemplateError) and never reads a file."""

    def get_source(self, environment: Any, template: str) -> Any:
        """Refuse every template name."""
        raise TemplateNotFound(template, f"'{template}': a template given as text cannot include, import or extend "
                                         "another template (it has no template folder); put that text in the template")


@functools.lru_cache(maxsize=64)
def sandbox(template_dir: str | None = None) -> ImmutableSandboxedEnvironment:
    """A sandboxed Jinja2 environment (undefined variables are errors), loading includes from template_dir (none
    without one: NoTemplateFiles)."""
    return ImmutableSandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=False,
                                         trim_blocks=True, lstrip_blocks=True,
                                         loader=FileSystemLoader(template_dir) if template_dir else NoTemplateFiles())


@functools.lru_cache(maxsize=256)
def _load(source: str):
    return sandbox().from_string(source)


def template_path(package: str, name: str) -> Path:
    """A template file: a filesystem path as given, else the package's templates/<name>."""
    p = Path(name)
    if p.is_absolute() or p.exists():
        return p.resolve()
    return Path(str(resources.files(package).joinpath("templates", name)))


@functools.lru_cache(maxsize=512)
def get_template(package: str, name: str):
    """The compiled template (package templates/<name>, or a path; includes resolve beside it), loaded once."""
    p = template_path(package, name)
    if not p.is_file():
        raise FileNotFoundError(f"prompt template not found: {p} (package {package}, name '{name}')")
    return sandbox(str(p.parent)).get_template(p.name)


def render(package: str, name: str, **variables: Any) -> str:
    """Render a template (package templates/<name>, or a path) with the given variables."""
    return get_template(package, name).render(**variables).strip()


def render_string(source: str, **variables: Any) -> str:
    """Render template source text in the sandbox."""
    return _load(source).render(**variables).strip()
