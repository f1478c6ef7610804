"""The one registry implementation (recbench/api/registry.py): a name taken twice is an error naming both entries,
a wrong type is refused at registration, lazy entries import on first lookup only, unknown names list the valid ones."""
from __future__ import annotations

import sys

import pytest

from recbench.api.registry import Registry, RegistryError

pytestmark = pytest.mark.fast


class Base:
    pass


class One(Base):
    pass


class Two(Base):
    pass


def _classes() -> Registry[type]:
    return Registry("widget", lambda e: isinstance(e, type) and issubclass(e, Base), "a subclass of Base")


def test_a_name_taken_by_another_entry_is_an_error_naming_both():
    r = _classes()
    r.register("a", One)
    r.register("a", One)  # the same entry again (a module imported twice): no-op
    with pytest.raises(RegistryError) as e:
        r.register("a", Two)
    assert "widget 'a' is registered twice" in str(e.value)
    assert f"{__name__}.One" in str(e.value) and f"{__name__}.Two" in str(e.value)
    assert r.get("a") is One


def test_a_wrong_type_is_refused_when_registered_not_when_used():
    r = _classes()
    with pytest.raises(RegistryError, match="widget 'x': .* is not a subclass of Base"):
        r.register("x", int)
    assert "x" not in r


def test_a_lazy_entry_is_imported_on_first_lookup_only(tmp_path, monkeypatch):
    (tmp_path / "lazy_widget_mod.py").write_text(
        f"from {__name__} import Base\nclass Late(Base):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    r = _classes()
    r.declare("late", "lazy_widget_mod:Late")
    assert r.names() == ["late"] and "lazy_widget_mod" not in sys.modules
    assert r.get("late").__name__ == "Late" and "lazy_widget_mod" in sys.modules
    with pytest.raises(RegistryError, match="registered twice"):
        r.declare("late", "other_mod:Late")
    with pytest.raises(RegistryError, match="registered twice"):
        r.register("late", One)


def test_a_lazy_entry_of_the_wrong_type_is_refused_on_lookup(tmp_path, monkeypatch):
    (tmp_path / "lazy_wrong_mod.py").write_text("class NotAWidget:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    r = _classes()
    r.declare("w", "lazy_wrong_mod:NotAWidget")
    with pytest.raises(RegistryError, match="is not a subclass of Base"):
        r.get("w")


def test_unknown_names_list_the_valid_ones_and_discovery_runs_once():
    calls = []
    r = Registry("widget", lambda e: True, "anything", discover=lambda: calls.append(r.register("found", One)))
    with pytest.raises(RegistryError, match="unknown widget 'nope'. Valid: found"):
        r.get("nope")
    assert r.names() == ["found"] and len(calls) == 1
    r.unregister("found")
    assert r.names() == [] and len(calls) == 1
