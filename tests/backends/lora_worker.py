"""Run in a subprocess by the LoRA test: a LoRA-enabled vLLM engine of its own (one engine per process)."""
from __future__ import annotations

import json
import sys


def main() -> None:
    """argv: model_dir adapter_dir; prints {"texts": [...]} for base/adapter requests mixed in one call."""
    from recbench.backends.vllm import VLLMBackend
    from recbench.api.types import Request, SamplingParams

    model_dir, adapter = sys.argv[1], sys.argv[2]
    vb = VLLMBackend(name="smollm2-lora", model=model_dir, dtype="float32", max_model_len=1024, enforce_eager=True,
                     kv_cache_memory_bytes=1 << 29, enable_lora=True, max_lora_rank=8, lora_adapters={"rand8": adapter})
    sp = SamplingParams(max_tokens=8)
    prompts = ["Name a fruit.", "Name a color."]
    reqs = [Request.chat([{"role": "user", "content": p}], sp, adapter=a) for p in prompts for a in (None, "rand8")]
    out = vb.generate(reqs)
    print("LORA_RESULT " + json.dumps({"texts": [r.text for r in out], "errors": [r.error for r in out]}), flush=True)


if __name__ == "__main__":
    main()
