"""Stage 1, SFT warm-up: LoRA on the training queries with trl's SFTTrainer; targets are the ground-truth lists."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from recbench.tasks.recbench_plus.train.common import trainer_kwargs, write_record
from recbench.tasks.recbench_plus.train.curve import SFT_COLUMNS, CurveLogger
from recbench.tasks.recbench_plus.train.records import load_part, sft_records
from recbench.training.lora import load_base, lora_config, mark_dequantized


def run_sft(cfg: DictConfig) -> dict[str, Any]:
    """Train a LoRA adapter on (evaluation prompt, ground-truth list) pairs; save it and curve.csv to cfg.out."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    t0 = time.time()
    out = Path(str(cfg.out))
    out.mkdir(parents=True, exist_ok=True)
    task, examples = load_part(cfg, "train")
    recs = sft_records(task, examples, cfg.get("method"))
    tok, lm = load_base(cfg.model)
    mark_dequantized(lm)
    args = SFTConfig(**trainer_kwargs(cfg, out), per_device_train_batch_size=int(cfg.batch_size),
                     num_train_epochs=1, max_length=int(cfg.max_length), completion_only_loss=True,
                     dataset_num_proc=None)
    curve = CurveLogger(out / "curve.csv", SFT_COLUMNS, postfix=("loss", "mean_token_accuracy"))
    trainer = SFTTrainer(model=lm, args=args, train_dataset=Dataset.from_list(recs), processing_class=tok,
                         peft_config=lora_config(cfg.lora), callbacks=[curve])
    curve.attach(trainer)
    trainer.train()
    trainer.model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    losses = [float(r["loss"]) for r in curve.rows if r.get("loss") != ""]
    return write_record(out, "sft", cfg, task, examples, t0, {"losses": losses})
