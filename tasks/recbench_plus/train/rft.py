"""Stage 2, RFT: GRPO (trl's GRPOTrainer) with rewards from recbench's RecBench+ metrics, from the base or an SFT adapter."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from recbench.api.errors import ConfigError
from recbench.tasks.recbench_plus.train.common import trainer_kwargs, write_record
from recbench.tasks.recbench_plus.train.curve import CurveLogger, rft_columns
from recbench.tasks.recbench_plus.train.records import load_part, rft_records
from recbench.tasks.recbench_plus.train.reward import RecBenchPlusReward
from recbench.training.lora import load_base, lora_config, mark_dequantized


def policy(cfg: DictConfig) -> tuple[Any, Any, Any]:
    """(tokenizer, model, peft_config): a fresh LoRA on the base (init=base), or the SFT adapter, trainable."""
    tok, lm = load_base(cfg.model)
    mark_dequantized(lm)
    init = str(cfg.get("init") or "base")
    if init == "base":
        return tok, lm, lora_config(cfg.lora)
    from peft import PeftModel

    if not (Path(init) / "adapter_config.json").is_file():
        raise FileNotFoundError(f"init={init}: no adapter_config.json there (give the sft stage's out= folder, or init=base)")
    # trl keeps a frozen copy of this adapter ("ref") as the KL reference: the SFT policy, not the bare base model
    return tok, PeftModel.from_pretrained(lm, init, is_trainable=True), None


def grpo_args(cfg: DictConfig, out: Path, weights: list[float]) -> Any:
    """GRPOConfig from conf/rft: group size, KL coefficient, steps, sampling, reward weights, vLLM generation."""
    from trl import GRPOConfig

    g = int(cfg.group_size)
    extra = OmegaConf.to_container(cfg.grpo_extra, resolve=True) if cfg.get("grpo_extra") is not None else {}
    return GRPOConfig(**trainer_kwargs(cfg, out), per_device_train_batch_size=g * int(cfg.prompts_per_step),
                      num_generations=g, beta=float(cfg.kl_coef), max_completion_length=int(cfg.max_completion_length),
                      temperature=float(cfg.temperature), top_p=float(cfg.top_p), reward_weights=weights,
                      scale_rewards=cfg.scale_rewards, loss_type=str(cfg.loss_type), num_iterations=int(cfg.num_iterations),
                      use_vllm=bool(cfg.use_vllm), vllm_mode=str(cfg.vllm_mode), log_completions=False, **extra)


def check_step_size(cfg: DictConfig, n_queries: int) -> None:
    """ConfigError when the training queries cannot fill one optimizer step (prompts_per_step x grad_accum prompts):
    GRPO would train 0 steps and still write an adapter."""
    need = int(cfg.prompts_per_step) * int(cfg.grad_accum)
    if n_queries < need:
        raise ConfigError(f"rft: {n_queries} training queries (max_queries={cfg.get('max_queries')}) cannot fill one "
                          f"optimizer step of prompts_per_step x grad_accum = {cfg.prompts_per_step} x {cfg.grad_accum} "
                          f"= {need} prompts, so GRPO would train 0 steps. Fix: max_queries>={need} (or null), or "
                          "lower prompts_per_step / grad_accum")


def run_rft(cfg: DictConfig) -> dict[str, Any]:
    """GRPO on the training queries; saves the adapter (on the base model) and curve.csv to cfg.out."""
    from datasets import Dataset
    from trl import GRPOTrainer

    t0 = time.time()
    out = Path(str(cfg.out))
    task, examples = load_part(cfg, "train")
    check_step_size(cfg, len(examples))  # before anything is loaded or written
    out.mkdir(parents=True, exist_ok=True)
    reward = RecBenchPlusReward(task, examples, OmegaConf.to_container(cfg.reward, resolve=True))
    tok, model, peft_config = policy(cfg)
    tok.padding_side = "left"
    curve = CurveLogger(out / "curve.csv", rft_columns(list(cfg.reward)))
    trainer = GRPOTrainer(model=model, reward_funcs=reward.funcs(), args=grpo_args(cfg, out, reward.weight_list()),
                          train_dataset=Dataset.from_list(rft_records(task, examples, cfg.get("method"))),
                          processing_class=tok, peft_config=peft_config, callbacks=[curve])
    curve.attach(trainer)
    trainer.train()
    trainer.model.save_pretrained(str(out), selected_adapters=["default"])
    tok.save_pretrained(str(out))
    rewards = [float(r["reward"]) for r in curve.rows if r.get("reward") != ""]
    return write_record(out, "rft", cfg, task, examples, t0, {"rewards": rewards, "init": str(cfg.get("init") or "base")})
