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


class _WordTokenizer:
    """A stand-in tokenizer: one token per word of the rendered chat."""

    chat_template = "words"
    loads = 0

    def __init__(self) -> None:
        type(self).loads += 1

    def apply_chat_template(self, msgs, tokenize=True, add_generation_prompt=True):
        return " ".join(m["content"] for m in msgs).split() + ["<gen>"]


def test_token_counts_are_kept_so_a_second_plan_loads_no_tokenizer(monkeypatch, tmp_path):
    """issue 44: a plan's counts go to the derived-data cache, keyed by the tokenizer's files and the prompt; the next
    plan reads them and never loads the tokenizer; a changed tokenizer file is another key (counted again)."""
    from recbench.api.types import Request
    from recbench.run import plan_tokens
    from recbench.store import derived_cache

    monkeypatch.setattr(derived_cache, "_DIR", {"dir": tmp_path / "derived"})
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"weights")
    monkeypatch.setattr(plan_tokens, "_packaged_tokenizer", lambda b: _WordTokenizer())
    cfg = OmegaConf.create({"name": "m", "backend": {"model": str(tmp_path), "gguf_file": "m.gguf"}})
    reqs = [Request(messages=(("user", "rank these three items"),)), Request(messages=(("user", "one two"),))]
    first = TokenCounter(cfg)
    assert [first.count(r) for r in reqs] == [5, 3] and _WordTokenizer.loads == 1
    first.save()
    second = TokenCounter(cfg)
    assert [second.count(r) for r in reqs] == [5, 3]
    assert _WordTokenizer.loads == 1 and second.source == "model tokenizer (m.gguf)"  # read, not loaded
    gguf.write_bytes(b"other weights")  # another size: another key
    assert TokenCounter(cfg).count(reqs[0]) == 5 and _WordTokenizer.loads == 2
