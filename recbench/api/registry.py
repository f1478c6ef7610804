"""One registry implementation for everything that registers by name (audits, backends, ...).

A `Registry` holds entries of one declared type under unique names. A name registered twice is an error (the same
object again is a no-op, so re-importing a module is harmless); an entry of the wrong type is refused when it is
registered, not when it is used; entries may be declared lazily as `"module:attribute"` and are imported on first
lookup, so declaring what exists costs nothing until it is asked for.
"""
from __future__ import annotations

import importlib
from typing import Callable, Generic, Iterator, Optional, TypeVar, Union

T = TypeVar("T")


class RegistryError(ValueError):
    """A registration the registry refuses: a name taken by another entry, an entry of the wrong type, an unknown
    name on lookup."""


class Registry(Generic[T]):
    """Entries of one kind by name: collisions are errors, lazy entries import on first lookup, types are checked
    at registration."""

    def __init__(self, kind: str, check: Callable[[object], bool], expected: str,
                 discover: Optional[Callable[[], None]] = None) -> None:
        """`kind` names the entries in messages ('audit', 'backend schema'); `check` tells an acceptable entry
        (`expected` says what one is); `discover`, when given, runs once before the first listing (e.g. importing
        a package's modules so that they register)."""
        self.kind, self._check, self._expected, self._discover = kind, check, expected, discover
        self._entries: dict[str, T] = {}
        self._lazy: dict[str, str] = {}
        self._discovered = discover is None

    def register(self, name: str, entry: T) -> T:
        """Add `entry` under `name` (returns it, so it can decorate); RegistryError on a taken name or a wrong type."""
        if not name:
            raise RegistryError(f"a {self.kind} needs a name")
        if not self._check(entry):
            raise RegistryError(f"{self.kind} '{name}': {entry!r} is not {self._expected}")
        old = self._entries.get(name)
        if old is not None and old is not entry and not _same_definition(old, entry):
            raise RegistryError(f"{self.kind} '{name}' is registered twice ({_where(old)} and {_where(entry)}); "
                                f"give one of them another name")
        if name in self._lazy and not _declared_here(self._lazy[name], entry):
            raise RegistryError(f"{self.kind} '{name}' is declared at {self._lazy[name]} and registered again by "
                                f"{_where(entry)}; give one of them another name")
        self._entries[name] = entry
        return entry

    def declare(self, name: str, where: str) -> None:
        """Declare `name` without importing it: `where` is 'module:attribute', imported on first lookup."""
        if name in self._entries or self._lazy.get(name, where) != where:
            raise RegistryError(f"{self.kind} '{name}' is registered twice ({self._lazy.get(name) or 'in code'} and "
                                f"{where}); give one of them another name")
        self._lazy[name] = where

    def unregister(self, name: str) -> None:
        """Remove `name` (a test's own entry, after the test)."""
        self._entries.pop(name, None)
        self._lazy.pop(name, None)

    def get(self, name: str) -> T:
        """The entry registered or declared as `name`; RegistryError listing the valid names when there is none."""
        if name not in self._entries and name not in self._lazy:
            self._run_discovery()
        if name in self._entries:
            return self._entries[name]
        if name in self._lazy:
            module, _, attr = self._lazy[name].partition(":")
            entry = getattr(importlib.import_module(module), attr)
            return self.register(name, entry)
        raise RegistryError(f"unknown {self.kind} '{name}'. Valid: {', '.join(self.names()) or '(none)'}")

    def __contains__(self, name: object) -> bool:
        self._run_discovery()
        return name in self._entries or name in self._lazy

    def names(self) -> list[str]:
        """Every registered or declared name, sorted (lazy ones are not imported)."""
        self._run_discovery()
        return sorted({*self._entries, *self._lazy})

    def items(self) -> Iterator[tuple[str, T]]:
        """Every (name, entry), in name order, importing the lazy ones."""
        for name in self.names():
            yield name, self.get(name)

    def _run_discovery(self) -> None:
        if not self._discovered:
            self._discovered = True
            assert self._discover is not None
            self._discover()


def _where(entry: object) -> str:
    tp = entry if isinstance(entry, type) else type(entry)
    return f"{tp.__module__}.{tp.__qualname__}"


def _same_definition(old: object, new: object) -> bool:
    """The same class (or an instance of it) defined by the same module: a module imported again, not a collision."""
    return _where(old) == _where(new)


def _declared_here(where: str, entry: Union[type, object]) -> bool:
    return where.partition(":")[0] == (entry if isinstance(entry, type) else type(entry)).__module__
