"""Building a run's parts from its config: OmegaConf resolvers, the task, the method, the (lazy) backend.

The app, plan mode and compare all construct through here; nothing here runs or reads a run dir.
"""
from __future__ import annotations

import os
from importlib import resources
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from recbench.backends.base import Backend
from recbench.registry import ConfigError, suggest
from recbench.task import Task

CONFIG_MODULE = "recbench.conf"


def bundled_data(name: str = "") -> str:
    """Path of the sample data shipped inside the package (recbench/data/<name>)."""
    return str(resources.files("recbench.data").joinpath(name))


def _variant(s: Any) -> str:
    """The run-dir name of an override string: '/' made safe, long path values shortened (stem + hash)."""
    from recbench.rundir import variant_name

    return variant_name(str(s))


def register_resolvers() -> None:
    """OmegaConf resolvers used by conf/ (${rb.variant:...}, ${rb.data:...}, ${rb.model_tag:...}) and the
    structured-config schema: everything composing recbench's config needs first."""
    from recbench.config_schema import register_configs

    register_configs()
    OmegaConf.register_new_resolver("rb.variant", _variant, replace=True)
    OmegaConf.register_new_resolver("rb.data", bundled_data, replace=True)
    # model-free reference methods (model_free: true) file their runs under model "none"
    OmegaConf.register_new_resolver("rb.model_tag", lambda model, free: "none" if free else model, replace=True)


def build_task(cfg: DictConfig) -> Task:
    """Instantiate the task class named by task._target_ with the task config."""
    from hydra.utils import get_class

    return get_class(cfg.task._target_)(cfg.task)


def build_backend(model_cfg: DictConfig) -> Backend:
    """Instantiate model.backend (a `_target_` node)."""
    from hydra.utils import instantiate

    if model_cfg.get("backend") is None:
        raise ConfigError(f"model '{model_cfg.name}' has no backend, but the method needs a model. "
                          "Pick a model with model=<name> (e.g. model=smollm2)")
    from hydra.errors import InstantiationException

    try:
        return instantiate(model_cfg.backend, _convert_="all")
    except InstantiationException as e:  # one line naming the backend and the cause (a key, a file, a package)
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        cause = e.__cause__ or e
        text = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        raise ConfigError(f"model '{model_cfg.get('name')}' (model.backend, {model_cfg.backend.get('_target_')}): "
                          f"{text}") from None


class LazyBackend:
    """A backend that is built on first use; its identity (the cache-key fingerprint) comes without loading the
    model when the backend class offers `static_identity(**config)`."""

    def __init__(self, model_cfg: DictConfig):
        self.cfg = model_cfg
        self._backend: Optional[Backend] = None
        self._identity: Optional[dict[str, Any]] = None

    @property
    def built(self) -> bool:
        """True once the backend was constructed."""
        return self._backend is not None

    def identity(self) -> dict[str, Any]:
        """The backend's identity, from the config alone where the class can, else by building it."""
        if self._identity is None:
            from hydra.utils import get_class

            node = self.cfg.get("backend")
            cls = get_class(node._target_) if node is not None and node.get("_target_") else None
            static = getattr(cls, "static_identity", None)
            if static is not None:  # may return None: the fingerprint is not known without loading
                kwargs = {k: v for k, v in OmegaConf.to_container(node, resolve=True).items() if k != "_target_"}
                self._identity = static(**kwargs)
            if self._identity is None:
                self._identity = self().identity()
        return self._identity

    def __call__(self) -> Backend:
        """The backend, built now if it was not yet; its identity must equal the one keys were made with."""
        if self._backend is None:
            import time

            from recbench.progress import announce_start

            t0 = time.monotonic()
            self._backend = build_backend(self.cfg)
            announce_start(self.cfg, time.monotonic() - t0)  # the line that says which model started, in how long
            if self._identity is not None and self._backend.identity() != self._identity:
                raise RuntimeError(f"{type(self._backend).__name__}.static_identity differs from identity(): "
                                   f"{self._identity} vs {self._backend.identity()}")
        return self._backend

    def close(self) -> None:
        """Close the backend if it was built."""
        if self._backend is not None:
            self._backend.close()


def select_examples(examples: list, limit: Any, strategy: str, seed: int, by: tuple[str, ...]) -> list:
    """The examples a run evaluates: all, or `limit` of them chosen by strategy (first | stratified | random)."""
    if limit is None:
        return examples
    n = int(limit)
    if n < 1:
        raise ConfigError(f"limit={limit}: must be a whole number >= 1 (or null for all examples)")
    if strategy == "first" or n >= len(examples):
        return examples[:n]
    import random

    rng = random.Random(seed)
    if strategy == "random":
        keep = set(rng.sample(range(len(examples)), n))
        return [e for i, e in enumerate(examples) if i in keep]
    if strategy != "stratified":
        raise ConfigError(f"Unknown limit_strategy '{strategy}'.{suggest(strategy, ['first', 'stratified', 'random'])} "
                          "Valid choices for limit_strategy: first, random, stratified")
    key = by[0] if by else None
    strata: dict[str, list[int]] = {}
    for i, e in enumerate(examples):
        strata.setdefault(str(e.meta.get(key)) if key else "", []).append(i)
    # round-robin over strata in their first-seen order, each stratum in its own order: n/k from each
    chosen: list[int] = []
    queues = [list(v) for v in strata.values()]
    while len(chosen) < n:
        for q in queues:
            if q and len(chosen) < n:
                chosen.append(q.pop(0))
    keep = set(chosen)
    return [e for i, e in enumerate(examples) if i in keep]
