"""mode=plan is offline: a catalogue model whose tokenizer is not on this machine is estimated from characters with
no transformers import and no hub call, and the plan names where its spread came from."""
from __future__ import annotations

import sys

import pytest
from omegaconf import OmegaConf

from recbench.run.plan import TokenCounter

pytestmark = pytest.mark.fast


def test_a_model_with_no_local_tokenizer_imports_no_transformers(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # an empty hub cache
    monkeypatch.setitem(sys.modules, "transformers", None)  # any import of transformers now raises ImportError
    cfg = OmegaConf.create({"name": "llama70b", "hf_id": "meta-llama/Llama-3.1-70B-Instruct",
                            "backend": {"_target_": "recbench.backends.vllm.VLLMBackend",
                                        "model": "meta-llama/Llama-3.1-70B-Instruct"}})
    counter = TokenCounter(cfg)
    assert counter.tok is None
    assert counter.source == "estimate: characters / 4 (no local tokenizer for meta-llama/Llama-3.1-70B-Instruct)"


def test_a_tokenizer_that_fails_to_load_says_so_in_the_table(monkeypatch, tmp_path):
    (tmp_path / "tokenizer_config.json").write_text("{}")  # a local folder: the tokenizer is tried, and fails
    monkeypatch.setitem(sys.modules, "transformers", None)
    cfg = OmegaConf.create({"name": "local", "hf_id": str(tmp_path), "backend": {}})
    counter = TokenCounter(cfg)
    assert counter.tok is None
    assert counter.source == "estimate: characters / 4 (the local tokenizer did not load: ModuleNotFoundError)"
