"""Backend-test helpers: the shared OpenAI stub server (recbench.testing.openai_stub) and Hydra compose."""
from __future__ import annotations

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from recbench.cli.overrides import method_paths
from recbench.run.construct import CONFIG_MODULE, register_resolvers
from recbench.testing.openai_stub import (  # noqa: F401 - re-exported for the tests
    ALL_FAULTS, FAULTS, FLAKY_FAULTS, StubServer, default_answer, free_port, get_stats, listwise_answer, rate_schedule,
    refused_url, request_key, start_stub_process)


def need_vllm():
    """Skip (naming the command that installs it) when vLLM is not importable in this interpreter."""
    import pytest

    return pytest.importorskip("vllm", reason="vLLM not installed in this venv: run `bash scripts/test_vllm.sh` "
                                               "(creates .venv-vllm and runs tests/backends there)")


def compose_cfg(*overrides: str):
    """The composed run config for these overrides, as `python -m recbench ...` builds it."""
    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return compose(config_name="config", overrides=method_paths(["run.progress=false", *overrides]))
