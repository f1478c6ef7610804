"""Constrained choice for the hf backend: each request's choices scored by their total log-likelihood after the
prompt, in batches of (prompt, choice) rows, or all of one request's choices in one packed sequence."""
from __future__ import annotations

import time
from typing import Any

from recbench.api.types import Request, Response


def choose(lm: Any, prompts: list[str], reqs: list[Request]) -> list[Response]:
    """Pick, per request, the choice with the highest total log-likelihood after the prompt (a request with more
    choices than batch_size is scored in one packed sequence, choose_packed). `lm` is the HFBackend: its tokenizer,
    model, device and batch_size."""
    import torch

    many = [i for i, r in enumerate(reqs) if len(r.constraint.choices) > lm.batch_size]  # type: ignore[union-attr]
    if many:  # more choices than a batch holds (e.g. 100 candidates): one packed sequence per such request
        out_many = {i: choose_packed(lm, prompts[i], reqs[i]) for i in many}
        rest = [i for i in range(len(reqs)) if i not in out_many]
        out_rest = dict(zip(rest, choose(lm, [prompts[i] for i in rest], [reqs[i] for i in rest]) if rest else []))
        return [out_many[i] if i in out_many else out_rest[i] for i in range(len(reqs))]
    t0 = time.time()
    pairs = [(p, c) for p, r in zip(prompts, reqs) for c in r.constraint.choices]  # type: ignore[union-attr]
    enc_p = [lm.tokenizer(p, add_special_tokens=False)["input_ids"] for p, _ in pairs]
    enc_c = [lm.tokenizer(c, add_special_tokens=False)["input_ids"] for _, c in pairs]
    seqs = [a + b for a, b in zip(enc_p, enc_c)]
    width = max(map(len, seqs))
    pad = lm.tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (width - len(s)) + s for s in seqs], device=lm.device)
    mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs], device=lm.device)
    keep = max(map(len, enc_c)) + 1  # logits only for the positions that predict choice tokens (memory)
    with torch.inference_mode():
        logits = lm.model(input_ids=ids, attention_mask=mask, logits_to_keep=keep).logits.float()
    logp = torch.log_softmax(logits[:, :-1], dim=-1)  # row position j predicts token width - keep + j + 1
    scores = []
    for row, c in enumerate(enc_c):
        tgt = ids[row, width - len(c) :]
        lp = logp[row, keep - 1 - len(c) : keep - 1].gather(-1, tgt[:, None]).sum().item()
        scores.append(lp)
    dt = time.time() - t0
    out, k = [], 0
    for p, r in zip(enc_p_lens(enc_p, reqs), reqs):
        choices = r.constraint.choices  # type: ignore[union-attr]
        sc = scores[k : k + len(choices)]
        k += len(choices)
        best = max(range(len(choices)), key=lambda j: sc[j])
        out.append(
            Response(text=choices[best], finish_reason="stop", prompt_tokens=p, completion_tokens=0,
                     latency_s=dt / len(reqs), logprobs=[{"choice": c, "logprob": s} for c, s in zip(choices, sc)])
        )
    return out

def choose_packed(lm: Any, prompt: str, req: Request) -> Response:
    """Score every choice in ONE forward pass: prompt + all choices in a row, each choice attending to the prompt
    and to its own earlier tokens only (a 4D mask, positions restarting after the prompt). The same scores as
    one prompt copy per choice, at the cost of the prompt once plus the choice tokens."""
    import torch

    t0 = time.time()
    choices = req.constraint.choices  # type: ignore[union-attr]
    pids = lm.tokenizer(prompt, add_special_tokens=False)["input_ids"]
    enc_c = [lm.tokenizer(c, add_special_tokens=False)["input_ids"] for c in choices]
    n_p = len(pids)
    total = n_p + sum(map(len, enc_c))
    ids, pos, starts = list(pids), list(range(n_p)), []
    allowed = torch.zeros(total, total, dtype=torch.bool)
    allowed[:n_p, :n_p] = torch.ones(n_p, n_p, dtype=torch.bool).tril()
    for c in enc_c:
        s = len(ids)
        starts.append(s)
        ids += c
        pos += range(n_p, n_p + len(c))
        allowed[s : s + len(c), :n_p] = True
        allowed[s : s + len(c), s : s + len(c)] = torch.ones(len(c), len(c), dtype=torch.bool).tril()
    mask = torch.zeros(total, total, dtype=lm.model.dtype).masked_fill(~allowed, torch.finfo(lm.model.dtype).min)
    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([ids], device=lm.device),
                            attention_mask=mask[None, None].to(lm.device),
                            position_ids=torch.tensor([pos], device=lm.device),
                            logits_to_keep=total - n_p + 1).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)  # row r predicts the token after position n_p - 1 + r
    scores = []
    for s, c in zip(starts, enc_c):
        lp = logp[0, c[0]].item() if c else 0.0  # a choice's first token follows the prompt's last token
        lp += sum(logp[s + j - n_p, c[j]].item() for j in range(1, len(c)))
        scores.append(lp)
    best = max(range(len(choices)), key=lambda j: scores[j])
    return Response(text=choices[best], finish_reason="stop", prompt_tokens=n_p, completion_tokens=0,
                    latency_s=time.time() - t0,
                    logprobs=[{"choice": c, "logprob": sc} for c, sc in zip(choices, scores)])


def enc_p_lens(enc_p: list[list[int]], reqs: list[Request]) -> list[int]:
    """Prompt token count per request (one entry per request, from its first choice row)."""
    lens, k = [], 0
    for r in reqs:
        lens.append(len(enc_p[k]))
        k += len(r.constraint.choices)  # type: ignore[union-attr]
    return lens
