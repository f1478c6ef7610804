"""The model catalogue and the SLURM launcher preset compose; every entry is usable and overridable from the CLI."""
from __future__ import annotations

from pathlib import Path

import pytest
from hydra.utils import get_class

from backends_stub import compose_cfg

MODEL_DIR = Path(__file__).resolve().parents[2] / "conf" / "model"
KINDS = {"recbench.backends.vllm.VLLMBackend", "recbench.backends.openai.OpenAIBackend",
         "recbench.backends.hf.HFBackend"}
MODELS = sorted(p.stem for p in MODEL_DIR.glob("*.yaml") if p.stem not in ("none", "predictions"))


@pytest.mark.parametrize("name", MODELS)
def test_every_model_config_composes(name):
    m = compose_cfg(f"model={name}").model
    assert m.name == name and int(m.context_length) > 0
    b = m.backend
    assert b._target_ in KINDS
    get_class(b._target_)  # importable without the engine installed
    if b._target_.endswith("VLLMBackend"):
        assert int(b.tensor_parallel_size) * int(b.pipeline_parallel_size) == int(m.get("gpus") or 1) or m.gpus == 0
        assert int(b.max_model_len) <= int(m.context_length)
    if b._target_.endswith("OpenAIBackend"):
        assert b.base_url and b.constraints in ("vllm", "openai", "none")
        if "127.0.0.1" not in str(b.base_url):
            assert b.api_key_env and b.api_key_env.endswith("_API_KEY")  # keys only from the environment
    assert "api_key" not in b  # never a literal key in config
    if m.get("price"):
        assert float(m.price.prompt_per_1m) >= 0 and float(m.price.completion_per_1m) >= 0


def test_catalogue_covers_the_papers():
    papers = {n: list(compose_cfg(f"model={n}").model.get("papers") or []) for n in MODELS}
    assert sum("perrec" in p for p in papers.values()) == 19
    assert sum("recbench_plus" in p for p in papers.values()) >= 8
    assert sum("llmrec" in p for p in papers.values()) >= 4
    m = compose_cfg("model=llama70b").model
    assert m.backend.model == "meta-llama/Llama-3.1-70B-Instruct" and m.backend.tensor_parallel_size == 4


def test_fields_override_from_the_command_line():
    m = compose_cfg("model=llama70b", "model.backend.tensor_parallel_size=8", "model.backend.max_model_len=32768").model
    assert m.backend.tensor_parallel_size == 8 and m.backend.max_model_len == 32768


def test_slurm_launcher_preset_composes():
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install 'recbench[slurm]'")
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from recbench.app import CONFIG_MODULE, register_resolvers

    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["hydra/launcher=slurm", "model=llama70b",
                                                       "hydra.launcher.gpus_per_node=4"], return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert launcher.gpus_per_node == 4 and launcher.max_num_timeout == 3 and launcher.tasks_per_node == 1
