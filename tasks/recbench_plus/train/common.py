"""What both training stages share: config loading, trainer arguments, and the run record next to the adapter."""
from __future__ import annotations

import hashlib
import json
import time
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

from omegaconf import DictConfig, OmegaConf

from recbench.api.types import Example


def stage_config(stage: str, argv: Sequence[str] = ()) -> DictConfig:
    """conf/<stage>/recbench_plus.yaml (or config=<name> under conf/<stage>/) with key=value overrides."""
    over = OmegaConf.from_dotlist([a for a in argv if not a.startswith("config=")])
    name = next((a.split("=", 1)[1] for a in argv if a.startswith("config=")), "recbench_plus")
    path = resources.files("recbench.conf").joinpath(stage, f"{name}.yaml")
    if not path.is_file():
        raise FileNotFoundError(f"config={name}: no conf/{stage}/{name}.yaml")
    base = OmegaConf.load(str(path))
    unknown = set(over) - set(base) - {"task"}
    if unknown:
        raise KeyError(f"unknown {stage} key(s) {sorted(unknown)}; valid: {', '.join(sorted(base))} (conf/{stage}/{name}.yaml)")
    return OmegaConf.merge(base, over)


def trainer_kwargs(cfg: DictConfig, out: Path) -> dict[str, Any]:
    """transformers TrainingArguments shared by SFT and GRPO: every step logged, nothing checkpointed."""
    return dict(output_dir=str(out / "trainer"), max_steps=int(cfg.steps), learning_rate=float(cfg.lr),
                lr_scheduler_type=str(cfg.lr_scheduler), warmup_steps=int(cfg.warmup_steps),
                gradient_accumulation_steps=int(cfg.grad_accum), max_grad_norm=float(cfg.max_grad_norm),
                logging_steps=1, save_strategy="no", report_to=[], seed=int(cfg.seed), data_seed=int(cfg.seed),
                use_cpu=bool(cfg.use_cpu), bf16=bool(cfg.bf16), disable_tqdm=False, dataloader_num_workers=0,
                # trl turns this on by default; off, a LoRA on the top layers back-propagates through those layers only
                gradient_checkpointing=bool(cfg.gradient_checkpointing))


def ids_digest(examples: Sequence[Example]) -> str:
    """sha256 of the sorted example ids (identifies the exact training set)."""
    return hashlib.sha256("\n".join(sorted(e.id for e in examples)).encode()).hexdigest()[:16]


def write_record(out: Path, stage: str, cfg: DictConfig, task: Any, examples: Sequence[Example], t0: float,
                 extra: dict[str, Any]) -> dict[str, Any]:
    """recbench_train.json beside the adapter: stage, config, split counts, training ids digest, time."""
    info = {"stage": stage, "config": OmegaConf.to_container(cfg, resolve=True),
            "split": getattr(task, "split_info", None), "train_queries": len(examples),
            "train_ids_sha256": ids_digest(examples), "seconds": round(time.time() - t0, 1), **extra}
    (out / "recbench_train.json").write_text(json.dumps(info, indent=2, default=str))
    try:
        (out / "trainer").rmdir()  # the trainers' output_dir stays empty (nothing is checkpointed)
    except OSError:
        pass
    return info
