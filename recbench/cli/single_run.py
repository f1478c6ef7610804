"""One run composed once: a plain `python -m recbench key=value ...` (no sweep, no Hydra flag) composes its config
the way `hydra.main` would for a run, the override checks read that config, and the job gets it.

`hydra.main` composes a run's config twice (once to read `hydra.mode`, once to run) and the override checks a third
time; each compose costs 0.1-0.2 s of start-up. Here the one compose is Hydra's own (`Hydra.compose_config` on the
search path and task name `hydra.main` uses, with the `hydra.mode=RUN` override `hydra.main` adds), kept on disk by
`store/compose_cache.py` (the same command again reads it back and skips the compose and the schema registration),
and the job runs through Hydra's `run_job` as `Hydra.run` runs it: the run dir, `.hydra/`, logging, callbacks and
`HydraConfig` are Hydra's. Anything else (a sweep, `--cfg`, `--help`, `-c`, a `hydra.mode` override, a command that
does not compose) gets None here and goes through `hydra.main` as before, with every check and message unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Optional

CONFIG_NAME = "config"


@dataclass
class Composed:
    """A plain run's config, the config groups its search path holds (what the override checks skip), and the Hydra
    that composed it (None: read back from the compose cache)."""

    cfg: Any
    groups: set
    hydra: Any = None


def plain_run(argv: list[str]) -> bool:
    """True for a command that is only overrides, none of them a sweep or a `hydra.mode` choice (is_multirun is
    checked by the caller: `-m`, `hydra.mode=MULTIRUN`, a comma or a sweep function)."""
    return all("=" in a and not a.startswith("-") and not a.lstrip("+~").startswith("hydra.mode") for a in argv)


def compose(argv: list[str], task_function: Callable[..., Any], config_module: str,
            register_schemas: Callable[[], None]) -> Optional[Composed]:
    """A plain run's config, with Hydra's global state set as `hydra.main` sets it; None when the command is not a
    plain run or does not compose (hydra.main then says why, as before). `register_schemas` runs before a compose
    (not for a config read back from the cache)."""
    from hydra import version
    from hydra._internal.utils import detect_calling_file_or_module_from_task_function, detect_task_name

    from recbench.store import compose_cache

    if not plain_run(argv):
        return None
    version.setbase("1.3")
    calling_file, calling_module = detect_calling_file_or_module_from_task_function(task_function)
    task_name = detect_task_name(calling_file, calling_module)
    overrides = [*argv, "hydra.mode=RUN"]
    trees = _trees(config_module, argv)
    key = compose_cache.key_for(overrides, task_name, trees) if trees is not None else None
    kept = compose_cache.load(key)
    if kept is not None and not kept[0].hydra.verbose:  # hydra.verbose: Hydra's debug lines come from its compose
        cfg, groups = kept
        _as_hydra_sets_up(cfg, task_name)
        return Composed(cfg, groups)
    register_schemas()
    found = _compose(overrides, calling_file, calling_module, task_name, config_module)
    if found is not None:
        compose_cache.save(key, (found.cfg, found.groups))
    return found


def _trees(config_module: str, argv: list[str]) -> Optional[list[tuple[Path, Optional[str]]]]:
    """The folders whose files composing reads: the config package, recbench's modules (the schemas), Hydra's
    plugins, the command's own config folders (hydra.searchpath=[file://DIR,pkg://PKG]); None when one of those
    cannot be told (the config is then composed, not kept)."""
    import importlib.util

    import recbench

    plugins = importlib.util.find_spec("hydra_plugins")  # the installed Hydra plugins' namespace; none installed: None
    trees = [(Path(str(resources.files(config_module))), None), (Path(recbench.__file__).parent, ".py"),
             *((Path(p), ".py") for p in (plugins.submodule_search_locations or [] if plugins else []))]
    for a in argv:
        key, _, value = a.partition("=")
        if key.lstrip("+~") != "hydra.searchpath":
            continue
        for entry in value.strip().strip("[]").split(","):
            entry = entry.strip().strip("'\"")
            if entry.startswith("file://"):
                trees.append((Path(entry[len("file://"):]).resolve(), None))
            elif entry.startswith("pkg://"):
                try:
                    trees.append((Path(str(resources.files(entry[len("pkg://"):].replace("/", ".")))), None))
                except (ImportError, TypeError, ValueError):
                    return None
            elif entry:
                return None
    return trees


def _compose(overrides: list[str], calling_file: Optional[str], calling_module: Optional[str], task_name: str,
             config_module: str) -> Optional[Composed]:
    """Hydra's compose of a run on hydra.main's search path (logging configured as Hydra.run configures it)."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_automatic_config_search_path
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    GlobalHydra.instance().clear()
    try:
        search_path = create_automatic_config_search_path(calling_file, calling_module, f"pkg://{config_module}")
        hydra = Hydra.create_main_hydra2(task_name=task_name, config_search_path=search_path)
        cfg = hydra.compose_config(config_name=CONFIG_NAME, overrides=overrides, with_log_configuration=True,
                                   run_mode=RunMode.RUN)
        return Composed(cfg, set(hydra.config_loader.list_groups("")), hydra)
    except Exception:  # noqa: BLE001 - the override checks and hydra.main name the problem, as they always did
        GlobalHydra.instance().clear()
        return None


def _as_hydra_sets_up(cfg: Any, task_name: str) -> None:
    """What creating the Hydra object and composing with logging do besides the config: Hydra's resolvers
    (${hydra:...}, ${now:...}), the job's name, Hydra's own logging."""
    from hydra.core.utils import JobRuntime, configure_log, setup_globals

    setup_globals()
    JobRuntime().set("name", task_name)
    configure_log(cfg.hydra.hydra_logging, cfg.hydra.verbose)


def launch(composed: Composed, task_function: Callable[..., Any]) -> None:
    """`Hydra.run` with the composed config: callbacks, `run_job` (run dir, .hydra/, logging, HydraConfig), errors
    reported as `hydra.main` reports them."""
    from hydra._internal.utils import run_and_report
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import run_job
    from hydra.types import HydraContext

    cfg = composed.cfg
    loader = composed.hydra.config_loader if composed.hydra is not None else None  # run_job reads only callbacks

    def run() -> None:
        from hydra._internal.callbacks import Callbacks

        callbacks = Callbacks(cfg)
        callbacks.on_run_start(config=cfg, config_name=CONFIG_NAME)
        ret = run_job(hydra_context=HydraContext(config_loader=loader, callbacks=callbacks),
                      task_function=task_function, config=cfg, job_dir_key="hydra.run.dir", job_subdir_key=None,
                      configure_logging=True)
        callbacks.on_run_end(config=cfg, config_name=CONFIG_NAME, job_return=ret)
        _ = ret.return_value  # a failed job raises here, as in Hydra.run

    try:
        run_and_report(run)
    finally:
        GlobalHydra.instance().clear()
