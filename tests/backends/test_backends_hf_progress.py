"""The hf backend's decoding-step bar moves once per generated token of a batch (real SmolLM2)."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_token_bar_counts_every_decoding_step(smollm2):
    import torch  # torch and transformers only where the test runs (collecting the fast tier imports this file)
    from transformers import StoppingCriteriaList

    from recbench.backends.hf import token_bar

    tok, model = smollm2.tokenizer, smollm2.model
    prompts = [tok.apply_chat_template([{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True)
               for t in ("Name three colours.", "Count from one to ten.")]
    enc = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.inference_mode(), token_bar(len(prompts), 7) as bar:
        seqs = model.generate(**enc, max_new_tokens=7, do_sample=False, pad_token_id=tok.pad_token_id,
                              stopping_criteria=StoppingCriteriaList([bar]))
    generated = seqs.shape[1] - enc["input_ids"].shape[1]
    assert bar.steps == generated and 1 <= generated <= 7
    assert bar.bar.disable or bar.bar.n == generated  # on a terminal the bar shows the same count
