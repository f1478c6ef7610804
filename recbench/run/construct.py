"""Building a run's parts from its config: OmegaConf resolvers, the task, the method, the (lazy) backend.

The app, plan mode and compare all construct through here; nothing here runs or reads a run dir.
"""
from __future__ import annotations

import os
from importlib import resources
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from recbench.backends.base import Backend
from recbench.api.errors import ConfigError, DataError, suggest
from recbench.api.task import Task

CONFIG_MODULE = "recbench.conf"


def bundled_data(name: str = "") -> str:
    """Path of the sample data shipped inside the package (recbench/data/<name>)."""
    return str(resources.files("recbench.data").joinpath(name))


def _variant(s: Any) -> str:
    """The run-dir name of an override string: '/' made safe, long path values shortened (stem + hash)."""
    from recbench.store.rundir import variant_name

    return variant_name(str(s))


def register_resolvers(schemas: bool = True) -> None:
    """OmegaConf resolvers used by conf/ (${rb.variant:...}, ${rb.data:...}, ${rb.model_tag:...}) and (schemas) the
    structured-config schema: everything composing recbench's config needs first."""
    if schemas:
        register_schemas()
    from recbench.store.rundir import safe_name

    OmegaConf.register_new_resolver("rb.variant", _variant, replace=True)
    OmegaConf.register_new_resolver("rb.data", bundled_data, replace=True)
    # a task or method name as one folder of the run dir (never '..' or a path: a run dir stays under the runs dir)
    OmegaConf.register_new_resolver("rb.name", safe_name, replace=True)
    # model-free reference methods (model_free: true) file their runs under model "none"
    OmegaConf.register_new_resolver("rb.model_tag", lambda model, free: "none" if free else safe_name(model),
                                    replace=True)


def register_schemas() -> None:
    """The structured-config schemas in Hydra's ConfigStore (idempotent): what a compose needs, a config read back
    from the compose cache does not (cli/single_run.py)."""
    from recbench.api.config import register_configs
    from recbench.backends.schemas import all_schemas

    register_configs(all_schemas())


def build_task(cfg: DictConfig) -> Task:
    """Instantiate the task class named by task._target_ with the task config, after checking the task's and the
    method's keys against the rules their classes declare (`settings_rules`: one ConfigError naming the key)."""
    from hydra.utils import get_class

    from recbench.api.config import check_settings

    cls = get_class(cfg.task._target_)
    check_settings(cfg.task, getattr(cls, "settings_rules", {}), "task")
    method = cfg.get("method")
    if method is not None:
        mcls = (getattr(cls, "methods", None) or {}).get(method.get("kind") or method.get("name"))
        if mcls is not None:  # an unknown method is refused by Task.make_method, with the valid choices
            check_settings(method, getattr(mcls, "settings_rules", {}), "method")
    return cls(cfg.task)


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


def config_identity(model_cfg: DictConfig) -> Optional[dict[str, Any]]:
    """A model's backend identity from its config alone (the class's `static_identity`), without loading anything;
    None where only loading it would tell (e.g. an hf model never loaded on this machine)."""
    from hydra.utils import get_class

    node = model_cfg.get("backend")
    cls = get_class(node._target_) if node is not None and node.get("_target_") else None
    static = getattr(cls, "static_identity", None)
    if static is None:
        return None
    return static(**{k: v for k, v in OmegaConf.to_container(node, resolve=True).items() if k != "_target_"})


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
            self._identity = config_identity(self.cfg) or self().identity()
        return self._identity

    def __call__(self) -> Backend:
        """The backend, built now if it was not yet; its identity must equal the one keys were made with."""
        if self._backend is None:
            import time

            from recbench.run.progress import announce_start

            t0 = time.monotonic()
            self._backend = build_backend(self.cfg)
            announce_start(self.cfg, time.monotonic() - t0, getattr(self._backend, "load_info", None))  # the line that says which model started, in how long
            if self._identity is not None and self._backend.identity() != self._identity:
                raise RuntimeError(f"{type(self._backend).__name__}.static_identity differs from identity(): "
                                   f"{self._identity} vs {self._backend.identity()}")
        return self._backend

    def close(self) -> None:
        """Close the backend if it was built."""
        if self._backend is not None:
            self._backend.close()

    def preflight(self) -> None:
        """Refuse at once, before any data is loaded or bar drawn, a model that cannot start here: a package its
        preset needs (model.requires.packages) that is not installed, an unset API-key variable
        (model.backend.api_key_env), a config the backend class refuses (`check_config`), or servers that do not
        serve the model (`check_endpoints`: asks them, for a list of several). Nothing is loaded or written."""
        import importlib.util

        missing = [str(p) for p in ((self.cfg.get("requires") or {}).get("packages") or [])
                   if importlib.util.find_spec(str(p)) is None]
        if missing:
            raise ConfigError(requirements_message(self.cfg, missing))
        node = self.cfg.get("backend") or {}
        env = node.get("api_key_env")
        if env and not os.environ.get(str(env)):
            raise ConfigError(f"model '{self.cfg.get('name')}': environment variable {env} (model.backend.api_key_env) "
                              f"is not set; export the API key for {node.get('base_url')} there, or pick a local "
                              "model (e.g. model=smollm2)")
        if node.get("_target_"):  # what the backend would refuse at its construction (a URL, credentials twice),
            from hydra.utils import get_class  # then what its servers say of the config (several serving one model)

            cls = get_class(str(node._target_))
            kwargs = {k: v for k, v in OmegaConf.to_container(node, resolve=True).items() if k != "_target_"}
            for check in filter(None, (getattr(cls, "check_config", None), getattr(cls, "check_endpoints", None))):
                try:
                    check(**kwargs)
                except ValueError as e:
                    raise ConfigError(f"model '{self.cfg.get('name')}' (model.backend, {node._target_}): {e}") from None


def requirements_message(model_cfg: DictConfig, missing: list[str]) -> str:
    """What a preset needs that this environment lacks, then one line each: its needs, how to install them, and how
    to run the same model through an OpenAI-compatible server instead (model.requires)."""
    import sys

    req = model_cfg.get("requires") or {}
    name = model_cfg.get("name")
    b = model_cfg.get("backend") or {}
    hf_id = b.get("model") or model_cfg.get("hf_id")
    pp = int(b.get("pipeline_parallel_size") or 1)
    parallel = f"--tensor-parallel-size {b.get('tensor_parallel_size', 1)}"
    parallel += f" --pipeline-parallel-size {pp}" if pp > 1 else ""
    pad = "\n" + " " * 12  # under the text after 'or serve: ', so no line passes 120 columns
    serve = req.get("serve") or (
        f"vllm serve {hf_id} {parallel} --generation-config vllm{pad}on the GPU host, then instead of "
        f"model={name}: model=openai-server model.name={name}-server{pad}model.backend.model={hf_id} "
        "model.backend.base_url=http://<gpu-host>:8000/v1")
    needs = "; ".join([", ".join(map(str, req.get("packages") or [])), str(req.get("hardware") or "")]).strip("; ")
    return (f"model '{name}' needs the Python package(s) {', '.join(missing)}, missing from this environment.\n"
            f"  python:   {sys.executable}\n"
            f"  needs:    {needs}\n"
            f"  install:  {req.get('install') or 'pip install ' + ' '.join(missing)}\n"
            f"  or serve: {serve}")


def data_source(task: Task) -> str:
    """'task <name> (data_dir=<folder>)': how errors about a task's examples name where they came from."""
    try:
        ident = task.identity()
    except Exception:  # noqa: BLE001 - only for a message: a task whose identity cannot be told is named alone
        ident = {}
    where = next((f"{k}={ident[k]}" for k in ("data_dir", "data", "data_path") if ident.get(k)), "")
    return f"task {task.name}" + (f" ({where})" if where else "")


def check_examples(examples: list, source: str = "the task") -> None:
    """Refuse a task that loaded no example, or two examples with one id (each would be scored, or one would
    replace the other's record): DataError naming the id and both positions. Every task goes through this."""
    if not examples:
        raise DataError(f"{source} has no example to evaluate: its data files hold none, or the task's filter settings "
                        "select none. Fix: check the data folder and the task's filters")
    first: dict[str, int] = {}
    for i, e in enumerate(examples, 1):
        j = first.setdefault(str(e.id), i)
        if j != i:
            raise DataError(f"{source}: example id '{e.id}' is given twice (examples {j} and {i} of {len(examples)}); "
                            "a duplicate would be scored twice or replace the first. Fix: give every example its own "
                            "id in the data file")


def select_examples(examples: list, limit: Any, strategy: str, seed: int, by: tuple[str, ...],
                    source: str = "the task") -> list:
    """The examples a run evaluates: all, or `limit` of them chosen by strategy (first | stratified | random);
    refuses an empty or duplicated example list first (check_examples)."""
    check_examples(examples, source)
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


def shard_of(example_id: Any, shards: int) -> int:
    """The shard (0..shards-1) of an example id: the first 8 bytes of sha256(id) modulo shards, so every process,
    host and Python version puts an example in the same shard (Python's own hash() is salted per process)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(str(example_id).encode("utf-8")).digest()[:8], "big") % int(shards)


def take_shard(examples: list, shard: Optional[int], shards: int) -> list:
    """The examples of shard `shard` of `shards` (shard_of), in their order; all of them when shard is None. Applied
    to the selection after `limit`, so the shards of a run together hold exactly its unsharded selection."""
    if shard is None:
        return examples
    return [e for e in examples if shard_of(e.id, shards) == int(shard)]
