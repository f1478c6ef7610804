"""The CPU curve presets: GRPO prompts among the SFT queries with the same LoRA (top 8 layers), no checkpointing."""
from __future__ import annotations

from pathlib import Path

from recbench.tasks.recbench_plus.train.common import stage_config, trainer_kwargs

import pytest

pytestmark = pytest.mark.fast


def test_cpu_curve_presets_match_and_reach_the_trainer(tmp_path: Path):
    sft = stage_config("sft", ["config=recbench_plus_cpu_curve"])
    rft = stage_config("rft", ["config=recbench_plus_cpu_curve", "init=base"])
    assert rft.max_queries <= sft.max_queries == 8  # GRPO prompts are among the SFT queries
    assert rft.prompts_per_step == 1 and rft.steps % rft.max_queries == 0  # whole epochs: per-epoch means compare
    assert sft.lora.target_modules == rft.lora.target_modules
    assert trainer_kwargs(sft, tmp_path)["gradient_checkpointing"] is False
    assert trainer_kwargs(stage_config("sft", []), tmp_path)["gradient_checkpointing"] is True  # trl's default kept


def test_lora_regex_targets_only_the_top_layers():
    import torch
    from peft import get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from recbench.training.lora import lora_config

    cfg = stage_config("sft", ["config=recbench_plus_cpu_curve"])
    torch.manual_seed(0)
    lm = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=30,
                                      num_attention_heads=2, num_key_value_heads=1))
    model = get_peft_model(lm, lora_config(cfg.lora))
    layers = {int(n.split("layers.")[1].split(".")[0]) for n, p in model.named_parameters() if p.requires_grad}
    assert layers == set(range(22, 30))
    kinds = {n.split(".")[-4] for n, p in model.named_parameters() if p.requires_grad}
    assert kinds == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    model(torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]])).loss.backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_cpu_curve_rft_samples_without_dropout(tmp_path: Path):
    from recbench.tasks.recbench_plus.train.rft import grpo_args

    rft = stage_config("rft", ["config=recbench_plus_cpu_curve", "init=base"])
    assert grpo_args(rft, tmp_path, [1.0, 0.5, 0.2, 0.5]).disable_dropout is True
    assert grpo_args(stage_config("rft", []), tmp_path, [1.0]).disable_dropout is False  # trl's default elsewhere
