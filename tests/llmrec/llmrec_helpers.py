"""Helpers for the LLMRec tests: compose the real Hydra config as `python -m recbench ...` would."""
from __future__ import annotations

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from recbench.cli.overrides import method_paths
from recbench.run.construct import CONFIG_MODULE, register_resolvers


def compose_cfg(*overrides: str):
    """The composed run config for these overrides."""
    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return compose(config_name="config", overrides=method_paths(["run.progress=false", *overrides]))
