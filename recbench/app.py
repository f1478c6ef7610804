"""The Hydra application: config -> task, method, backend, cache, run store -> loop -> metrics.json + table."""
from __future__ import annotations

import logging
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from recbench.backends.base import Backend
from recbench.cache import ResponseCache
from recbench.loop import EvalLoop, aggregate
from recbench.registry import ConfigError, suggest
from recbench.runstore import RunStore
from recbench.task import Task

log = logging.getLogger("recbench")
CONFIG_MODULE = "recbench.conf"


def bundled_data(name: str = "") -> str:
    """Path of the sample data shipped inside the package (recbench/data/<name>)."""
    return str(resources.files("recbench.data").joinpath(name))


def register_resolvers() -> None:
    """OmegaConf resolvers used by conf/: ${rb.variant:...} and ${rb.data:...}."""
    OmegaConf.register_new_resolver("rb.variant", lambda s: str(s).replace("/", "_") or "default", replace=True)
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
    return instantiate(model_cfg.backend, _convert_="all")


def run_from_config(cfg: DictConfig, run_dir: str | Path, backend: Optional[Backend] = None) -> dict[str, Any]:
    """Evaluate one (task, model, method) into run_dir, resuming what is there; returns metrics.json's content."""
    t0 = time.time()
    task = build_task(cfg)
    method = task.make_method(cfg.method, cfg.sampling)
    uses_model = method.needs_backend
    if uses_model and backend is None:
        backend = build_backend(cfg.model)
    store = RunStore(run_dir)
    store.write_text("config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    store.write_versions({"backend_identity": backend.identity() if (backend and uses_model) else None,
                          "backend_params": backend.effective_params() if (backend and uses_model) else None})
    cache = ResponseCache(cfg.cache.path, enabled=cfg.cache.enabled)
    examples = task.load()
    if cfg.limit is not None:
        examples = examples[: int(cfg.limit)]
    loop = EvalLoop(task, method, backend if uses_model else None, cache, store,
                    chunk_size=cfg.run.chunk_size, store_prompts=cfg.run.store_prompts, progress=cfg.run.progress)
    complete = False
    try:
        loop.run(examples)
        complete = loop.stats.backend_errors == 0
    finally:
        wanted = {e.id for e in examples}
        records = [r for r in store.records() if r["id"] in wanted]
        metrics = {
            "task": task.identity(),
            "model": cfg.model.name if uses_model else "none",
            "method": method.name,
            "complete": complete and len(records) == len(examples),
            "run_dir": str(store.dir),
            **aggregate(task, records, n_boot=cfg.run.bootstrap_resamples, level=cfg.run.ci_level, seed=cfg.seed),
            "this_invocation": {**vars(loop.stats), "cache_hits": cache.hits, "cache_misses": cache.misses,
                                "total_wall_time_s": time.time() - t0},
        }
        metrics["counts"]["backend_errors"] = loop.stats.backend_errors
        # cost of all the run's tokens (cached answers included) from the optional price table in the model config
        from recbench.cost import run_cost

        price = cfg.model.get("price") if uses_model else None
        metrics["cost"] = run_cost(price, metrics["counts"]["prompt_tokens"], metrics["counts"]["completion_tokens"])
        if metrics["cost"] is not None:  # what this invocation paid (cache hits cost nothing)
            metrics["cost"]["this_invocation"] = run_cost(price, loop.stats.prompt_tokens,
                                                          loop.stats.completion_tokens)["total"]
        store.write_metrics(metrics)
        store.close()
        cache.close()
    return metrics


def print_summary(metrics: dict[str, Any]) -> None:
    """A result table on the terminal: headline and other metrics with CI, counts, parse failures, cache use."""
    from rich.console import Console
    from rich.table import Table

    c = metrics["counts"]
    inv = metrics["this_invocation"]
    title = f"{metrics['task']['name']} | model={metrics['model']} | method={metrics['method']}"
    t = Table(title=title)
    for col in ("slice", "metric", "mean", "95% CI", "n"):
        t.add_column(col)

    def rows(slice_name: str, block: dict[str, Any]) -> None:
        for name, s in block.items():
            mean = "—" if s["mean"] is None or s["mean"] != s["mean"] else f"{s['mean']:.4f}"
            ci = "—" if s["ci_low"] is None or s["ci_low"] != s["ci_low"] else f"[{s['ci_low']:.3f}, {s['ci_high']:.3f}]"
            t.add_row(slice_name, name, mean, ci, str(s["n"]))

    rows("all", metrics["metrics"])
    for key, vals in metrics["breakdown"].items():
        for v, b in vals.items():
            rows(f"{key}={v}", b["metrics"])
    con = Console(width=max(110, Console().width))
    con.print(t)
    con.print(
        f"examples {c['examples']} | parsed {c['parsed']} | parse failures {c['parse_failed']} "
        f"({(c['parse_failure_rate'] or 0):.1%}) | repaired {c['parse_repaired']} | backend errors {c['backend_errors']}\n"
        f"this run: backend calls {inv['backend_calls']} | cache hits {inv['cache_hits']} | "
        f"skipped (already finished) {inv['examples_skipped']} | wall {inv['total_wall_time_s']:.1f}s\n"
        f"run dir: {metrics['run_dir']}"
    )


# ---- friendly validation of command-line overrides ---------------------------------------------
def check_overrides(argv: list[str]) -> None:
    """Fail early, listing valid choices, on an unknown config group value or key."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args = [a for a in argv if "=" in a and not a.startswith("-")]
    if not args:
        return
    parsed = OverridesParser.create().parse_overrides(args)
    # a user's own config folders (hydra.searchpath=[file://...]) add choices: look them up there too
    search = [a for a in args if a.split("=", 1)[0] == "hydra.searchpath"]
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        groups = set(loader.list_groups(""))
        chosen: list[str] = []
        for o in parsed:
            key = o.key_or_group
            if o.package or key.startswith("hydra") or o.is_add() or o.is_delete() or o.is_force_add():
                continue
            values = [str(v) for v in o.sweep_string_iterator()] if o.is_sweep_override() else [o.get_value_element_as_str()]
            if key in groups:
                options = loader.get_group_options(key, config_name="config", overrides=search)
                for v in values:
                    if v not in options:
                        raise ConfigError(f"Unknown {key} '{v}'.{suggest(v, options)} Valid choices for {key}: "
                                          f"{', '.join(sorted(options))}")
                chosen.append(f"{key}={values[0]}")
        cfg = compose(config_name="config", overrides=search + chosen)
        for o in parsed:
            key = o.key_or_group
            if key in groups or key.startswith("hydra") or o.is_add() or o.is_delete() or o.is_force_add():
                continue
            node: Any = cfg
            parts = key.split(".")
            for depth, part in enumerate(parts):
                if not isinstance(node, DictConfig) or part not in list(node.keys()):  # keys(): `???` counts too
                    where = ".".join(parts[:depth]) or "the top level"
                    valid = sorted(node.keys()) if isinstance(node, DictConfig) else []
                    raise ConfigError(
                        f"Unknown config key '{key}'.{suggest(part, [str(v) for v in valid])} Valid keys at {where}: "
                        f"{', '.join(map(str, valid))}. (To add a new key on purpose use +{key}=...)"
                    )
                node = node[part]
    GlobalHydra.instance().clear()


def add_default_method(argv: list[str]) -> list[str]:
    """Append `method=<task's default_method>` when one task is chosen and no method is given."""
    tasks = [a.split("=", 1)[1] for a in argv if a.startswith("task=")]
    if len(tasks) != 1 or "," in tasks[0] or any(a.startswith(("method=", "+method=")) for a in argv):
        return argv
    f = resources.files(CONFIG_MODULE).joinpath("task", f"{tasks[0]}.yaml")
    default = OmegaConf.load(str(f)).get("default_method") if f.is_file() else None
    return [*argv, f"method={default}"] if default else argv


def main() -> None:
    """`python -m recbench ...`: validate overrides, then hand over to Hydra."""
    import hydra
    from hydra.core.hydra_config import HydraConfig

    register_resolvers()
    sys.argv[1:] = add_default_method(sys.argv[1:])
    try:
        check_overrides(sys.argv[1:])
    except ConfigError as e:
        print(f"recbench: config error: {e}", file=sys.stderr)
        sys.exit(2)

    @hydra.main(config_path=f"pkg://{CONFIG_MODULE}", config_name="config", version_base="1.3")
    def _app(cfg: DictConfig) -> Optional[float]:
        try:
            if cfg.get("mode", "run") != "run":  # mode=plan: count requests/tokens/cost, call no model
                from recbench.plan import run_mode

                return run_mode(cfg, HydraConfig.get().runtime.output_dir)
            metrics = run_from_config(cfg, HydraConfig.get().runtime.output_dir)
        except ConfigError as e:
            print(f"recbench: config error: {e}", file=sys.stderr)
            sys.exit(2)
        print_summary(metrics)
        head = metrics["metrics"].get(metrics["headline_metric"], {}).get("mean")
        return head

    _app()
