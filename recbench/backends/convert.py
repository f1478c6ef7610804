"""One-time GGUF -> Hugging Face folder conversion, cached on disk: for vLLM (0.32 on CPU cannot load the SmolLM2 GGUF)
and for the hf backend (a folder loads in about a second, the GGUF de-quantizes for 20-50 s)."""
from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, ContextManager, Optional

from recbench.store import derived_cache
from recbench.api.types import file_sha256

log = logging.getLogger(__name__)

MARKER = "recbench-convert.json"


def cache_root() -> Path:
    """Folder that holds converted models: $RECBENCH_MODEL_CACHE, else ~/.cache/recbench/models."""
    env = os.environ.get("RECBENCH_MODEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "recbench" / "models"


def _gguf_digest(path: Path) -> str:
    return file_sha256(path)  # recbench.api.types: the one file hash (memoised per path, size and mtime)


def hf_folder_for_gguf(gguf_dir: str, gguf_file: str, dtype: str = "bfloat16", out_root: Optional[Path] = None) -> Path:
    """Return a cached HF folder (config, safetensors, tokenizer, chat template) for a GGUF file, converting once."""
    src = Path(gguf_dir) / gguf_file
    if not src.is_file():
        raise FileNotFoundError(f"GGUF file not found: {src}")
    digest = _gguf_digest(src)
    root = out_root or cache_root()
    dest = root / f"{Path(gguf_file).stem}-{dtype}-{digest[:12]}"
    if (dest / MARKER).is_file():
        return dest
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{dest.name}.lock", "w") as lock:  # one converter at a time (parallel test workers)
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / MARKER).is_file():
            return dest
        _convert(src, dest, dtype, digest)
    return dest


def _convert(src: Path, dest: Path, dtype: str, digest: str) -> None:
    t0 = time.time()
    tmp = dest.with_name(dest.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    write_hf_folder(src, tmp, dtype)
    (tmp / MARKER).write_text(json.dumps({"source": str(src), "sha256": digest, "dtype": dtype,
                                          "seconds": round(time.time() - t0, 1)}, indent=1))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    log.info("converted %s -> %s in %.1fs", src, dest, time.time() - t0)


def derived_hf_folder(gguf_dir: str, gguf_file: str, dtype: str = "float32",
                      converting: Callable[[], ContextManager[Any]] = contextlib.nullcontext) -> Optional[Path]:
    """The GGUF's HF folder in the derived-data cache (recbench.store.derived_cache), converted once per file (sha256),
    dtype, transformers version and source of this module, inside `converting()` (e.g. a status line); None when
    that cache is off (cache.derived_dir=null) or cannot be written."""
    import transformers

    src = Path(gguf_dir) / gguf_file
    if not src.is_file():
        raise FileNotFoundError(f"GGUF file not found: {src}")

    def build(out: Path) -> None:
        with converting():
            write_hf_folder(src, out, dtype)

    return derived_cache.folder_entry(f"hf-{src.stem}-{dtype}", (dtype, transformers.__version__), [src],
                                      (__file__,), build)


def write_hf_folder(src: Path, out: Path, dtype: str) -> None:
    """De-quantize a GGUF into `out` as a plain HF folder: config, safetensors in `dtype`, tokenizer, chat template."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # per-tensor conversion and shard-writing bars
    tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
    loaded = AutoModelForCausalLM.from_pretrained(
        src.parent, gguf_file=src.name, dtype=torch.float32,
        quantization_config=GgufConfig(gguf_file=src.name, dequantize=True),
    )
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the folder holds plain dense weights
    fresh = type(loaded)(config)  # a clean model of the same class, without quantizer hooks
    state = {k: v.detach().to(torch.float32) for k, v in loaded.state_dict().items()}
    missing, unexpected = fresh.load_state_dict(state, strict=False)
    missing = [m for m in missing if not m.endswith("lm_head.weight")]  # tied embeddings
    if missing or unexpected:
        raise RuntimeError(f"GGUF conversion mismatch: missing={missing[:5]} unexpected={unexpected[:5]}")
    fresh.tie_weights()
    fresh.to(getattr(torch, dtype))
    fresh.generation_config = loaded.generation_config
    if not getattr(tok, "chat_template", None):
        raise RuntimeError(f"{src} carries no chat template; recbench and vLLM send chat requests only")
    fresh.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
