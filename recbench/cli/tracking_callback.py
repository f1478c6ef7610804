"""Hydra callback: a sweep's parent tracker run (+tracking=mlflow|wandb), started before its jobs and ended, with
the sweep report, after them. Without `tracking` in the config it does nothing and imports no tracker."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf


def _node(config: DictConfig) -> Any:
    node = OmegaConf.select(config, "tracking", default=None)
    return OmegaConf.to_container(node, resolve=True) if node is not None else None


class TrackingCallback(Callback):
    """on_multirun_start: the parent run (its id in <sweep dir>/.tracking.json for the jobs); on_multirun_end: the
    sweep report logged and the parent ended (FAILED when a job failed). Listed before the report callback, so it
    ends after the report is written (Hydra ends callbacks last to first)."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Start the sweep's parent run."""
        node = _node(config) if self.enabled else None
        if node:
            from recbench.publish.tracked_run import start_sweep

            overrides = [str(o) for o in OmegaConf.select(config, "hydra.overrides.task", default=[]) or []]
            start_sweep(node, Path(str(config.hydra.sweep.dir)), overrides)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """End the sweep's parent run with the sweep report."""
        node = _node(config) if self.enabled else None
        if node:
            from recbench.cli.sweep import failed_job_codes
            from recbench.publish.tracked_run import end_sweep

            sweep_dir = Path(str(config.hydra.sweep.dir))
            end_sweep(node, sweep_dir, bool(failed_job_codes(sweep_dir)))
