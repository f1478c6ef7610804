"""PerRecBench fine-tuning with peft: export SFT data from held-out groups, train LoRA adapters, merge adapters.

    python -m recbench.tasks.perrec.sft export data_dir=built/ml out=sft/ml format=mixed
    python -m recbench.tasks.perrec.sft train  data=sft/ml/pointwise.jsonl out=adapters/point model=smollm2
    python -m recbench.tasks.perrec.sft merge  adapters=[adapters/point,adapters/pair,adapters/list] out=adapters/merged
    python -m recbench task=perrec_built method=pointwise model.backend.adapter=adapters/merged

Settings come from conf/sft/perrec_lora.yaml (paper defaults: rank 16, 2 epochs, batch 32, lr 1e-5), overridden
by key=value arguments. Prompts are rendered by the evaluation methods themselves, so SFT and evaluation formats
match exactly.
"""
from __future__ import annotations

import json
import math
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
from omegaconf import DictConfig, OmegaConf

from recbench.tasks.perrec.methods import PAIR_CHOICES, presentation_order
from recbench.training.lora import load_base, lora_config
from recbench.api.types import Example

FORMATS = ("pointwise", "pairwise", "listwise")


def default_config() -> DictConfig:
    """conf/sft/perrec_lora.yaml."""
    return OmegaConf.load(str(resources.files("recbench.conf").joinpath("sft", "perrec_lora.yaml")))


# ---- export -----------------------------------------------------------------------------------------------------
def _task(data_dir: str, fmt: str = "recbench", retrieval_k: int = 4, history_max: int = 200):
    from recbench.tasks.perrec.task import PerRecTask

    cfg = OmegaConf.create({"name": "perrec", "data_dir": data_dir, "format": fmt, "difficulties": ["easy", "medium", "hard"],
                            "retrieval_k": retrieval_k, "history_max": history_max, "profile": False,
                            "profile_max_tokens": 96, "profile_history": 30, "legacy_tau": False,
                            "heldout_file": "heldout.jsonl", "profile_file": None})
    return PerRecTask(cfg)


def sft_records(examples: Sequence[Example], fmt: str, task, seed: int = 0) -> list[dict[str, Any]]:
    """Chat SFT records ({messages, format, group_id}) in one format, prompts rendered by the evaluation methods."""
    m = task.make_method(OmegaConf.create({"name": fmt, "max_tokens": 8}), OmegaConf.create({"temperature": 0.0, "top_p": 1.0, "seed": seed}))
    out = []
    for ex in examples:
        if fmt == "pointwise":
            pairs = [(m.prompt(ex, u, None), f"{u['rating']:g}") for u in ex.data["users"]]
        elif fmt == "pairwise":
            us = presentation_order(ex, seed)
            pairs = []
            for i in range(len(us)):
                for j in range(i + 1, len(us)):
                    for a, b in ((us[i], us[j]), (us[j], us[i])):  # both orders, as evaluated
                        gold = PAIR_CHOICES[0] if a["relative_rating"] > b["relative_rating"] else PAIR_CHOICES[1]
                        pairs.append((m.prompt(ex.data["query_title"], a, b, None, None), gold))
        elif fmt == "listwise":
            us = presentation_order(ex, seed)
            prompt, labels = m.prompt(ex, us, {})
            lab = {u["user_id"]: la for u, la in zip(us, labels)}
            gold = [lab[u["user_id"]] for u in sorted(us, key=lambda u: -u["relative_rating"])]
            pairs = [(prompt, json.dumps({"ranking": gold}))]
        else:
            raise ValueError(f"unknown SFT format '{fmt}'; valid: {', '.join(FORMATS)}, mixed")
        out += [{"messages": m._messages(p) + [{"role": "assistant", "content": a}], "format": fmt, "group_id": ex.id}
                for p, a in pairs]
    return out


def export(data_dir: str, out: str, formats: Sequence[str] = ("mixed",), split: str = "heldout", fmt: str = "recbench",
           retrieval_k: int = 4, seed: int = 0) -> dict[str, int]:
    """Write <out>/<format>.jsonl for each format ('mixed' = all three shuffled together) from the held-out groups."""
    task = _task(data_dir, fmt, retrieval_k)
    examples = task.heldout() if split == "heldout" else task.load()
    if not examples:
        raise ValueError(f"no {split} groups in {data_dir} (the builder writes heldout.jsonl; released: held_out-*.json)")
    Path(out).mkdir(parents=True, exist_ok=True)
    counts = {}
    for f in formats:
        if f == "mixed":
            recs = [r for g in FORMATS for r in sft_records(examples, g, task, seed)]
            recs = [recs[i] for i in np.random.default_rng(seed).permutation(len(recs))]
        else:
            recs = sft_records(examples, f, task, seed)
        with open(Path(out) / f"{f}.jsonl", "w", encoding="utf-8") as fh:
            for r in recs:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
        counts[f] = len(recs)
    return counts


# ---- train ------------------------------------------------------------------------------------------------------
def tokenize_record(tok, rec: dict[str, Any], max_len: int) -> Optional[dict[str, list[int]]]:
    """input_ids and labels (prompt tokens masked with -100) for one chat record; None if the answer does not fit."""
    msgs = rec["messages"]
    prompt = tok.apply_chat_template(msgs[:-1], tokenize=False, add_generation_prompt=True)
    p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    a_ids = tok(msgs[-1]["content"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    if len(a_ids) >= max_len:
        return None
    p_ids = p_ids[-(max_len - len(a_ids)):]  # keep the end of over-long prompts (the question)
    return {"input_ids": p_ids + a_ids, "labels": [-100] * len(p_ids) + a_ids}


def train(cfg: DictConfig) -> dict[str, Any]:
    """Train a LoRA adapter on SFT JSONL files (cfg.data: a path or list) and save it to cfg.out."""
    import torch
    from peft import get_peft_model

    torch.manual_seed(int(cfg.seed))
    files = [cfg.data] if isinstance(cfg.data, str) else list(cfg.data)
    recs = [json.loads(line) for f in files for line in open(f, encoding="utf-8") if line.strip()]
    tok, lm = load_base(cfg.model)
    model = get_peft_model(lm, lora_config(cfg.lora))
    data = [t for r in recs if (t := tokenize_record(tok, r, int(cfg.max_len))) is not None]
    if not data:
        raise ValueError(f"no SFT records fit max_len={cfg.max_len} in {files}")
    bs, micro = int(cfg.batch_size), max(1, min(int(cfg.micro_batch_size), int(cfg.batch_size)))
    steps_per_epoch = math.ceil(len(data) / bs)
    total = int(cfg.max_steps) if cfg.get("max_steps") else steps_per_epoch * int(cfg.epochs)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=float(cfg.lr),
                            weight_decay=float(cfg.weight_decay))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, int(cfg.warmup_steps))))
    rng = np.random.default_rng(int(cfg.seed))
    pad = tok.pad_token_id
    model.train()
    losses, step, t0 = [], 0, time.time()
    order: list[int] = []
    while step < total:
        if len(order) < bs:
            order += rng.permutation(len(data)).tolist()
        batch, order = order[:bs], order[bs:]
        opt.zero_grad()
        n_tok = sum(sum(1 for x in data[i]["labels"] if x != -100) for i in batch)
        step_loss = 0.0
        for s in range(0, len(batch), micro):
            mb = [data[i] for i in batch[s:s + micro]]
            w = max(len(d["input_ids"]) for d in mb)
            ids = torch.tensor([[pad] * (w - len(d["input_ids"])) + d["input_ids"] for d in mb])
            lab = torch.tensor([[-100] * (w - len(d["labels"])) + d["labels"] for d in mb])
            att = torch.tensor([[0] * (w - len(d["input_ids"])) + [1] * len(d["input_ids"]) for d in mb])
            logits = model(input_ids=ids, attention_mask=att).logits[:, :-1].float()
            loss_sum = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), lab[:, 1:].reshape(-1),
                                                         ignore_index=-100, reduction="sum")
            (loss_sum / n_tok).backward()  # token-mean over the whole (accumulated) batch
            step_loss += loss_sum.item() / n_tok
        torch.nn.utils.clip_grad_norm_(model.parameters(), float(cfg.max_grad_norm))
        opt.step()
        sched.step()
        losses.append(step_loss)
        step += 1
    out = Path(str(cfg.out))
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    info = {"records": len(recs), "used": len(data), "steps": step, "losses": losses, "seconds": time.time() - t0,
            "config": OmegaConf.to_container(cfg, resolve=True)}
    (out / "recbench_sft.json").write_text(json.dumps(info, indent=2))
    return info


# ---- merge ------------------------------------------------------------------------------------------------------
def merge_adapters(adapters: Sequence[str], out: str, weights: Optional[Sequence[float]] = None, mode: str = "delta") -> Path:
    """Merge LoRA adapters by linear weight averaging (default weights: equal, 1/3 each for three).

    mode='delta': the merged adapter's update is exactly sum_i w_i * delta_W_i (A stacked along the rank, B scaled by
    w_i * scaling_i), i.e. the linear average of the fine-tuned models' weights when the weights sum to 1;
    mode='params': average the A and B matrices themselves (same rank and alpha required)."""
    from safetensors.torch import load_file, save_file

    if not adapters:
        raise ValueError("no adapters to merge")
    weights = list(weights) if weights is not None else [1.0 / len(adapters)] * len(adapters)
    if len(weights) != len(adapters):
        raise ValueError(f"{len(weights)} weights for {len(adapters)} adapters")
    cfgs = [json.loads((Path(a) / "adapter_config.json").read_text()) for a in adapters]
    tensors = [load_file(str(Path(a) / "adapter_model.safetensors")) for a in adapters]
    keys = set(tensors[0])
    for a, t, c in zip(adapters, tensors, cfgs):
        if set(t) != keys:
            raise ValueError(f"adapter {a} adapts different modules than {adapters[0]}")
        if c.get("rank_pattern") or c.get("alpha_pattern") or c.get("use_rslora"):
            raise ValueError(f"adapter {a}: rank/alpha patterns and rsLoRA are not supported by the merge")
    scal = [c["lora_alpha"] / c["r"] for c in cfgs]
    merged: dict[str, Any] = {}
    new_cfg = dict(cfgs[0])
    if mode == "params":
        if len({(c["r"], c["lora_alpha"]) for c in cfgs}) != 1:
            raise ValueError("mode=params needs adapters with the same rank and alpha; use mode=delta")
        for k in keys:
            merged[k] = sum(w * t[k].float() for w, t in zip(weights, tensors)).contiguous()
    elif mode == "delta":
        import torch

        r_new = sum(c["r"] for c in cfgs)
        new_cfg.update(r=r_new, lora_alpha=r_new)  # new scaling 1: the weights and old scalings go into B
        for k in keys:
            if ".lora_A." in k:
                merged[k] = torch.cat([t[k].float() for t in tensors], dim=0).contiguous()
            elif ".lora_B." in k:
                merged[k] = torch.cat([w * s * t[k].float() for w, s, t in zip(weights, scal, tensors)], dim=1).contiguous()
            else:
                raise ValueError(f"unsupported adapter tensor {k} (only lora_A / lora_B)")
    else:
        raise ValueError(f"mode must be 'delta' or 'params', not '{mode}'")
    o = Path(out)
    o.mkdir(parents=True, exist_ok=True)
    save_file(merged, str(o / "adapter_model.safetensors"))
    (o / "adapter_config.json").write_text(json.dumps(new_cfg, indent=2))
    (o / "recbench_merge.json").write_text(json.dumps({"adapters": [str(a) for a in adapters], "weights": weights,
                                                       "mode": mode}, indent=2))
    return o


def main(argv: Optional[list[str]] = None) -> None:
    """CLI: export | train | merge, with key=value overrides of conf/sft/perrec_lora.yaml."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("export", "train", "merge"):
        print(__doc__)
        sys.exit(0 if argv and argv[0] in ("-h", "--help") else 2)
    cmd, cfg = argv[0], OmegaConf.merge(default_config(), OmegaConf.from_dotlist(argv[1:]))
    if cmd == "export":
        fmts = [cfg.format] if isinstance(cfg.format, str) else list(cfg.format)
        print(json.dumps(export(cfg.data_dir, cfg.out, fmts, cfg.split, cfg.data_format, int(cfg.retrieval_k), int(cfg.seed))))
    elif cmd == "train":
        info = train(cfg)
        print(json.dumps({k: info[k] for k in ("records", "used", "steps", "seconds")}),
              f"loss {info['losses'][0]:.3f} -> {info['losses'][-1]:.3f}")
    else:
        print(merge_adapters(list(cfg.adapters), cfg.out, list(cfg.merge_weights) if cfg.merge_weights else None, cfg.merge_mode))


if __name__ == "__main__":
    main()
