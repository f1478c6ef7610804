"""One run composed once: a plain `python -m recbench key=value ...` (no sweep, no Hydra flag) composes its config
the way `hydra.main` would for a run, the override checks read that config, and the job gets it.

`hydra.main` composes a run's config twice (once to read `hydra.mode`, once to run) and the override checks a third
time; each compose costs 0.1-0.2 s of start-up. Here the one compose is Hydra's own (`Hydra.compose_config` on the
search path and task name `hydra.main` uses, with the `hydra.mode=RUN` override `hydra.main` adds), and the job runs
through Hydra's `run_job` as `Hydra.run` runs it: the run dir, `.hydra/`, logging, callbacks and `HydraConfig` are
Hydra's. Anything else (a sweep, `--cfg`, `--help`, `-c`, a `hydra.mode` override, a command that does not compose)
gets None here and goes through `hydra.main` as before, with every check and message unchanged.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

CONFIG_NAME = "config"


def plain_run(argv: list[str]) -> bool:
    """True for a command that is only overrides, none of them a sweep or a `hydra.mode` choice (is_multirun is
    checked by the caller: `-m`, `hydra.mode=MULTIRUN`, a comma or a sweep function)."""
    return all("=" in a and not a.startswith("-") and not a.lstrip("+~").startswith("hydra.mode") for a in argv)


def compose(argv: list[str], task_function: Callable[..., Any], config_module: str) -> Optional[tuple[Any, Any]]:
    """(Hydra, the run's config) for a plain run, with Hydra's global state set as `hydra.main` sets it; None when
    the command is not a plain run or does not compose (hydra.main then says why, as before)."""
    from hydra import version
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import (
        create_automatic_config_search_path,
        detect_calling_file_or_module_from_task_function,
        detect_task_name,
    )
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    if not plain_run(argv):
        return None
    version.setbase("1.3")
    calling_file, calling_module = detect_calling_file_or_module_from_task_function(task_function)
    GlobalHydra.instance().clear()
    try:
        search_path = create_automatic_config_search_path(calling_file, calling_module, f"pkg://{config_module}")
        hydra = Hydra.create_main_hydra2(task_name=detect_task_name(calling_file, calling_module),
                                         config_search_path=search_path)
        cfg = hydra.compose_config(config_name=CONFIG_NAME, overrides=[*argv, "hydra.mode=RUN"],
                                   with_log_configuration=True, run_mode=RunMode.RUN)
    except Exception:  # noqa: BLE001 - the override checks and hydra.main name the problem, as they always did
        GlobalHydra.instance().clear()
        return None
    return hydra, cfg


def launch(hydra: Any, cfg: Any, task_function: Callable[..., Any]) -> None:
    """`Hydra.run` with the composed config: callbacks, `run_job` (run dir, .hydra/, logging, HydraConfig), errors
    reported as `hydra.main` reports them."""
    from hydra._internal.utils import run_and_report
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.utils import run_job
    from hydra.types import HydraContext

    def run() -> None:
        from hydra._internal.callbacks import Callbacks

        callbacks = Callbacks(cfg)
        callbacks.on_run_start(config=cfg, config_name=CONFIG_NAME)
        ret = run_job(hydra_context=HydraContext(config_loader=hydra.config_loader, callbacks=callbacks),
                      task_function=task_function, config=cfg, job_dir_key="hydra.run.dir", job_subdir_key=None,
                      configure_logging=True)
        callbacks.on_run_end(config=cfg, config_name=CONFIG_NAME, job_return=ret)
        _ = ret.return_value  # a failed job raises here, as in Hydra.run

    try:
        run_and_report(run)
    finally:
        GlobalHydra.instance().clear()
