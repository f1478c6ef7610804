"""The reward a policy earns on the RFT prompts: sample answers from the base model or an adapter with the RFT stage's
own sampling, score them with the RFT reward, and compare every pair of policies (permutation test, Holm over the
pairs; resampling unit: one sampled answer).

    python -m recbench.tasks.recbench_plus.train reward config=recbench_plus_cpu_curve \
        adapters=[base,adapters/sft,adapters/sft_rft] samples=16 report=reward.json
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from omegaconf import DictConfig, OmegaConf

from recbench.tasks.recbench_plus.train.records import load_part, rft_records
from recbench.tasks.recbench_plus.train.reward import RecBenchPlusReward
from recbench.training.lora import load_base


def sample_answers(tok: Any, lm: Any, messages: list[dict[str, str]], n: int, cfg: DictConfig, seed: int) -> list[str]:
    """n sampled completions of one chat prompt, drawn as trl's GRPOTrainer draws them: its own GenerationConfig
    (RFT temperature, top_p, max_completion_length; top_k 0 and repetition penalty 1 unless grpo_extra sets them),
    not the model's generation defaults (transformers' top_k=50 would make every policy look better)."""
    import torch
    from transformers import GenerationConfig

    extra = cfg.get("grpo_extra") or {}
    gen = GenerationConfig(do_sample=True, temperature=float(cfg.temperature), top_p=float(cfg.top_p),
                           top_k=int(extra.get("top_k", 0)), repetition_penalty=float(extra.get("repetition_penalty", 1.0)),
                           max_new_tokens=int(cfg.max_completion_length), num_return_sequences=n,
                           pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
                           eos_token_id=tok.eos_token_id)
    torch.manual_seed(seed)
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        out = lm.generate(**ids, generation_config=gen)
    start = ids["input_ids"].shape[1]
    return [tok.decode(o[start:], skip_special_tokens=True) for o in out]


def policy_rewards(cfg: DictConfig, adapters: Sequence[str], samples: int) -> dict[str, Any]:
    """Per policy (base or adapter folder): every sampled answer's reward and components on the RFT prompts."""
    task, examples = load_part(cfg, "train")
    reward = RecBenchPlusReward(task, examples, OmegaConf.to_container(cfg.reward, resolve=True))
    records = rft_records(task, examples, cfg.get("method"))
    tok, base = load_base(cfg.model)
    base.eval()
    out: dict[str, Any] = {}
    for name in adapters:
        lm = base
        if name != "base":
            from peft import PeftModel

            lm = PeftModel.from_pretrained(base, name)
            lm.eval()
        t0, rows = time.time(), []
        for k, rec in enumerate(records):
            for text in sample_answers(tok, lm, rec["prompt"], samples, cfg, int(cfg.seed) + k):
                rows.append({"example_id": rec["example_id"], "reward": reward.total(rec["example_id"], text),
                             **reward.components(rec["example_id"], text), "answer": text})
        out[name] = {"rows": rows, "seconds": round(time.time() - t0, 1)}
        if name != "base":
            base = lm.unload()  # the bare base model again for the next adapter
        print(f"{name}: mean reward {np.mean([r['reward'] for r in rows]):.3f} over {len(rows)} answers", flush=True)
    return out


def compare(rewards: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pair of policies (later against earlier): mean reward difference, its 95% bootstrap CI, a two-sided
    permutation test and the Holm-adjusted p over all pairs."""
    from scipy import stats

    from recbench.stats import adjust

    names = list(rewards)
    arr = {n: np.array([r["reward"] for r in rewards[n]["rows"]]) for n in names}
    diff = lambda a, b, axis=-1: np.mean(a, axis=axis) - np.mean(b, axis=axis)  # noqa: E731
    out = []
    for i, ref in enumerate(names):
        for name in names[i + 1:]:
            x, y = arr[name], arr[ref]
            p = stats.permutation_test((x, y), diff, permutation_type="independent", n_resamples=9999,
                                       vectorized=True, random_state=np.random.default_rng(0)).pvalue
            ci = stats.bootstrap((x, y), diff, n_resamples=9999, vectorized=True, method="percentile",
                                 random_state=np.random.default_rng(0)).confidence_interval
            out.append({"policy": name, "against": ref, "mean": float(x.mean()), "against_mean": float(y.mean()),
                        "difference": float(x.mean() - y.mean()), "ci95": [float(ci.low), float(ci.high)],
                        "permutation_p": float(p), "n": [len(x), len(y)]})
    for c, adj in zip(out, adjust([c["permutation_p"] for c in out], "holm")[0]):
        c["holm_p"] = float(adj)
    return out


def summary(rewards: dict[str, Any]) -> dict[str, Any]:
    """Mean reward and mean of each component per policy."""
    out = {}
    for name, r in rewards.items():
        rows = r["rows"]
        comps = {k: float(np.mean([x[k] for x in rows if x[k] is not None])) if any(x[k] is not None for x in rows)
                 else None for k in ("recall", "cmr", "format", "hallucination")}
        out[name] = {"answers": len(rows), "mean_reward": float(np.mean([x["reward"] for x in rows])), **comps,
                     "seconds": r["seconds"]}
    return out


def run_policy_reward(cfg: DictConfig, adapters: Sequence[str], samples: int, report: str | None) -> dict[str, Any]:
    """Sample, score, compare; write the JSON report when asked."""
    rewards = policy_rewards(cfg, adapters, samples)
    result = {"config": OmegaConf.to_container(cfg, resolve=True), "samples_per_prompt": samples,
              "resampling_unit": "one sampled answer", "summary": summary(rewards), "comparisons": compare(rewards),
              "answers": {k: v["rows"] for k, v in rewards.items()}}
    if report:
        Path(report).parent.mkdir(parents=True, exist_ok=True)
        Path(report).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result
