"""Every backend's config schema, on one `Registry` (recbench/api/registry.py): a backend adds its own files only.

A backend of kind `<kind>` ships `recbench/backends/<kind>_conf.py`, whose `SCHEMA` is a dataclass subclass of
`BackendConf` (recbench/api/backend_conf.py). The registry declares each such module by its file name on first use and
imports it only when its kind is asked for (no engine, torch or client library is imported to type a config). A kind
registered twice is an error naming both; a `SCHEMA` that is not a dataclass subclass of `BackendConf` is refused.
conf/model/*.yaml name a schema as `- /schema/backend@backend: <kind>` (Hydra's ConfigStore group `schema/backend`,
filled by `recbench/run/construct.py` through `api/config.py` `register_configs`).
"""
from __future__ import annotations

import dataclasses
import pkgutil

import recbench.backends as backends_pkg
from recbench.api.backend_conf import BackendConf
from recbench.api.registry import Registry

#: the file name that makes a module a backend's schema: `<kind>_conf.py`, holding `SCHEMA`
SUFFIX = "_conf"


def is_schema(entry: object) -> bool:
    """A dataclass subclass of BackendConf, itself declared a dataclass (a plain subclass would drop its own keys
    from the schema): what `model.backend` may be typed by."""
    return (isinstance(entry, type) and issubclass(entry, BackendConf) and dataclasses.is_dataclass(entry)
            and "__dataclass_fields__" in vars(entry))


def new_registry() -> Registry[type]:
    """A registry of backend schemas that declares every `<kind>_conf` module of recbench/backends on first use."""
    reg: Registry[type] = Registry("backend schema", is_schema, "a dataclass subclass of "
                                   "recbench.api.backend_conf.BackendConf", discover=lambda: _declare_modules(reg))
    return reg


def _declare_modules(reg: Registry[type]) -> None:
    """Declare each `<kind>_conf` module of the package's folders as kind -> 'module:SCHEMA' (nothing imported)."""
    for info in pkgutil.iter_modules(backends_pkg.__path__):
        if info.name.endswith(SUFFIX) and len(info.name) > len(SUFFIX):
            reg.declare(info.name[: -len(SUFFIX)], f"{backends_pkg.__name__}.{info.name}:SCHEMA")


SCHEMAS: Registry[type] = new_registry()


def schema_of(kind: str) -> type:
    """The schema of backend `kind` (RegistryError listing the kinds when there is none)."""
    return SCHEMAS.get(kind)


def all_schemas() -> dict[str, type]:
    """Every backend kind's schema by kind (imports each `<kind>_conf` module: light, dataclasses only)."""
    return dict(SCHEMAS.items())
