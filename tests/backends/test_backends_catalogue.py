"""The model catalogue and the SLURM launcher preset compose; every entry is usable and overridable from the CLI."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest
from hydra.utils import get_class
from omegaconf import OmegaConf

from backends_stub import compose_cfg

pytestmark = pytest.mark.fast

MODEL_DIR = Path(__file__).resolve().parents[2] / "conf" / "model"
KINDS = {"recbench.backends.vllm.VLLMBackend", "recbench.backends.openai.OpenAIBackend",
         "recbench.backends.hf.HFBackend"}
MODELS = sorted(p.stem for p in MODEL_DIR.glob("*.yaml") if p.stem not in ("none", "predictions"))


@lru_cache(maxsize=None)
def model(name: str):
    """conf/model/<name>.yaml as `model=<name>` composes it (composed once per name for this file; read-only)."""
    m = compose_cfg(f"model={name}").model
    OmegaConf.set_readonly(m, True)
    return m


@pytest.mark.parametrize("name", MODELS)
def test_every_model_config_composes(name):
    m = model(name)
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


#: PerRecBench Table 1 (Tan et al. 2025; github TamSiuhin/PerRecBench README): exactly these 19, with these ids
PERREC_TABLE1 = {
    "llama8b": "meta-llama/Llama-3.1-8B-Instruct", "llama70b": "meta-llama/Llama-3.1-70B-Instruct",
    "llama405b": "meta-llama/Llama-3.1-405B-Instruct", "gemma9b": "google/gemma-2-9b-it",
    "gemma27b": "google/gemma-2-27b-it", "qwen7b": "Qwen/Qwen2.5-7B-Instruct", "qwen14b": "Qwen/Qwen2.5-14B-Instruct",
    "qwen32b": "Qwen/Qwen2.5-32B-Instruct", "qwen72b": "Qwen/Qwen2.5-72B-Instruct",
    "qwen-coder32b": "Qwen/Qwen2.5-Coder-32B-Instruct", "ministral8b": "mistralai/Ministral-8B-Instruct-2410",
    "mistral-nemo": "mistralai/Mistral-Nemo-Instruct-2407", "mixtral8x22b": "mistralai/Mixtral-8x22B-Instruct-v0.1",
    "mistral-large": "mistralai/Mistral-Large-Instruct-2411", "deepseek-v3": "deepseek-chat",
    "claude35-haiku": "claude-3-5-haiku-20241022", "claude35-sonnet": "claude-3-5-sonnet-20241022",
    "gpt4o-mini": "gpt-4o-mini-2024-07-18", "gpt4o": "gpt-4o-2024-11-20",
}
#: RecBench+ (github jiani-huang/RecAssistBench eval_results/ and llm_results/ file names)
RECBENCH_PLUS = {"gpt4o", "gpt4o-mini", "gemini15-pro", "claude35-sonnet", "llama70b", "deepseek-v3", "deepseek-r1"}
LLMREC = {"gpt35-turbo", "chatglm6b", "llama2-7b", "alpaca7b", "vicuna13b"}


def test_catalogue_is_the_papers_rosters():
    papers = {n: set(model(n).get("papers") or []) for n in MODELS}
    assert {n for n, p in papers.items() if "perrec" in p} == set(PERREC_TABLE1)
    assert {n for n, p in papers.items() if "recbench_plus" in p} == RECBENCH_PLUS
    assert {n for n, p in papers.items() if "llmrec" in p} == LLMREC
    for n, model_id in PERREC_TABLE1.items():
        m = model(n)
        assert m.backend.model == model_id, n
        assert m.description and m.paper_name  # one-line description for `list models`; the paper's row label
    m = model("llama70b")
    assert m.backend.tensor_parallel_size == 4 and m.backend.dtype == "bfloat16"


def test_open_models_have_a_vllm_preset_sized_for_them():
    sizes = {"llama8b": 1, "qwen7b": 1, "qwen14b": 1, "ministral8b": 1, "mistral-nemo": 1, "gemma9b": 1,
             "gemma27b": 2, "qwen32b": 2, "qwen-coder32b": 2, "llama70b": 4, "qwen72b": 4, "mixtral8x22b": 8,
             "mistral-large": 8, "llama405b": 16}
    for n, gpus in sizes.items():
        m = model(n)
        b = m.backend
        assert b._target_.endswith("VLLMBackend") and b.dtype == "bfloat16", n
        assert b.tensor_parallel_size * b.pipeline_parallel_size == gpus == m.gpus, n
    b = model("llama405b").backend
    assert (b.tensor_parallel_size, b.pipeline_parallel_size, b.distributed_executor_backend) == (8, 2, "ray")


def test_gemma_entries_fold_the_system_prompt():
    for n in MODELS:
        b = model(n).backend
        assert list(b.get("quirks") or []) == (["fold_system"] if "gemma-2" in str(b.get("model")) else []), n


class _FakeLLM:
    """Records the keyword arguments vllm.LLM would be built with (no engine is started)."""

    built: list[dict] = []

    def __init__(self, **kwargs):
        _FakeLLM.built.append(kwargs)


def test_parallel_config_reaches_the_engine_arguments(monkeypatch):
    import sys
    import types

    from recbench.run.construct import build_backend
    from recbench.backends import vllm as vllm_backend

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=_FakeLLM))
    monkeypatch.setattr(vllm_backend, "_ENGINES", {})
    _FakeLLM.built.clear()
    cfg = compose_cfg("model=llama405b", "model.backend.max_model_len=8192")
    backend = build_backend(cfg.model)
    assert isinstance(backend, vllm_backend.VLLMBackend)
    kw = _FakeLLM.built[-1]
    assert kw["model"] == "meta-llama/Llama-3.1-405B-Instruct" and kw["dtype"] == "bfloat16"
    assert (kw["tensor_parallel_size"], kw["pipeline_parallel_size"], kw["distributed_executor_backend"]) == (8, 2, "ray")
    assert kw["max_model_len"] == 8192 and kw["generation_config"] == "vllm"
    # 70B on one node with 8 GPUs: CLI overrides reach the engine; null executor is left to vLLM (not passed)
    cfg = compose_cfg("model=llama70b", "model.backend.tensor_parallel_size=8")
    build_backend(cfg.model)
    kw = _FakeLLM.built[-1]
    assert kw["tensor_parallel_size"] == 8 and kw["pipeline_parallel_size"] == 1
    assert "distributed_executor_backend" not in kw
    with pytest.raises(Exception, match="distributed_executor_backend: .slurm. is not one of"):
        build_backend(compose_cfg("model=llama70b", "model.backend.distributed_executor_backend=slurm").model)


def test_fields_override_from_the_command_line():
    m = compose_cfg("model=llama70b", "model.backend.tensor_parallel_size=8", "model.backend.max_model_len=32768").model
    assert m.backend.tensor_parallel_size == 8 and m.backend.max_model_len == 32768


def test_slurm_launcher_preset_composes():
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install 'recbench[slurm]'")
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from recbench.run.construct import CONFIG_MODULE, register_resolvers

    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["hydra/launcher=slurm", "model=llama70b",
                                                       "hydra.launcher.gpus_per_node=4"], return_hydra_config=True)
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert launcher.gpus_per_node == 4 and launcher.max_num_timeout == 3 and launcher.tasks_per_node == 1
