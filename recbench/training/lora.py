"""LoRA building blocks shared by the fine-tuning recipes: base-model loading, peft configs, adapter loading."""
from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf


def load_base(model: Any) -> tuple[Any, Any]:
    """Tokenizer and float32 causal LM from a model config name (conf/model/<name>.yaml, hf backend) or an HF id/folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from recbench.backends.hf import resolve_model_dir

    kw: dict[str, Any] = {}
    path = str(model)
    conf = resources.files("recbench.conf").joinpath("model", f"{model}.yaml")
    if conf.is_file():
        b = OmegaConf.load(str(conf)).backend
        path = resolve_model_dir(b.get("model") or "", b.get("package"))
        if b.get("gguf_file"):
            kw["gguf_file"] = b.gguf_file
    tok = AutoTokenizer.from_pretrained(path, **kw)
    lm = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **kw)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok, lm


def mark_dequantized(lm: Any) -> Any:
    """Drop the GGUF quantizer marker of a model transformers de-quantized on load (its weights are plain floats),
    so that transformers' Trainer (trl) accepts it for LoRA training; other quantization is left alone."""
    q = getattr(lm, "hf_quantizer", None)
    if q is not None and str(getattr(q.quantization_config, "quant_method", "")).lower().endswith("gguf"):
        lm.hf_quantizer = None
        lm.is_quantized = False
    return lm


def lora_config(cfg: DictConfig) -> Any:
    """peft LoraConfig for a causal LM from a `lora:` block (r, alpha, dropout, target_modules)."""
    from peft import LoraConfig

    tm = cfg.target_modules
    return LoraConfig(r=int(cfg.r), lora_alpha=int(cfg.alpha), lora_dropout=float(cfg.dropout),
                      target_modules=tm if isinstance(tm, str) else list(tm), task_type="CAUSAL_LM", bias="none")


def adapter_tensors(path: str) -> dict[str, Any]:
    """The tensors of a saved adapter (adapter_model.safetensors)."""
    from safetensors.torch import load_file

    return load_file(str(Path(path) / "adapter_model.safetensors"))
