"""`mode=plan`'s prompt-token counts: the model's own tokenizer and chat template when they are on this machine, else
~characters/4; counts kept in the derived-data cache, keyed by the tokenizer's files and the prompt's hash.

The tokenizer is loaded on the first prompt the cache does not hold (issue 44: plan mode under 5 s at load 9): a plan
that ran before reads its counts from one pickle and never loads the tokenizer (0.2 s to parse SmolLM2's
tokenizer.json, 0.12 s to hash its GGUF for the tokenizer folder's key, plus the encoding of every prompt).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig

from recbench.api.types import Request

log = logging.getLogger(__name__)
#: bump when the way a count is made changes (the chat template's rendering, what is counted)
COUNTS_VERSION = 1


def _cached_locally(ident: str) -> Optional[list[str]]:
    """The files of a model's tokenizer on this machine (a folder, or the Hugging Face cache), asking no hub; None
    when there are none."""
    if Path(ident).is_dir():
        return [str(p) for p in sorted(Path(ident).glob("tokenizer*"))] or [ident]
    from huggingface_hub import try_to_load_from_cache

    try:
        found = [try_to_load_from_cache(ident, f) for f in ("tokenizer_config.json", "tokenizer.json")]
    except Exception:  # noqa: BLE001 - a name that is no repo id has no cache entry
        return None
    found = [f for f in found if isinstance(f, str)]
    return found or None


def _packaged_tokenizer(b: Any) -> Any:
    """A packaged model's tokenizer: a GGUF's as plain files read without transformers (`gguf_tokenizer`), else (the
    derived-data cache off, a folder model) transformers' AutoTokenizer."""
    from recbench.backends.gguf_tokenizer import PlainTokenizer, gguf_tokenizer_folder
    from recbench.backends.hf_weights import resolve_model_dir

    folder = resolve_model_dir(str(b.get("model") or ""), b.get("package"))
    plain = gguf_tokenizer_folder(folder, str(b["gguf_file"])) if b.get("gguf_file") else None
    if plain is not None and (plain / "tokenizer.json").is_file():
        return PlainTokenizer(plain)
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    return AutoTokenizer.from_pretrained(folder, gguf_file=b.get("gguf_file"))


def _stamp(files: list[str]) -> list[Any]:
    """Each file's path, size and modification time (what keys the counts: a changed tokenizer is another key)."""
    out: list[Any] = []
    for f in files:
        try:
            st = os.stat(f)
            out.append([str(f), st.st_size, st.st_mtime_ns])
        except OSError:
            out.append([str(f), None, None])
    return out


def _counts_path(stamp: Any) -> Optional[Path]:
    """The derived-data cache's file of counts for this tokenizer (None when the cache is off)."""
    from recbench.store.derived_cache import cache_dir

    d = cache_dir()
    if d is None:
        return None
    key = hashlib.sha256(json.dumps([COUNTS_VERSION, stamp], sort_keys=True).encode()).hexdigest()[:32]
    return d / f"plan-token-counts-{key}.pkl"


class TokenCounter:
    """Prompt tokens with the model's own tokenizer and chat template when it can be loaded offline, else ~chars/4;
    `tok` loads the tokenizer on first use, `save()` keeps the counts made for the next plan."""

    def __init__(self, model_cfg: DictConfig):
        self._tok: Any = None
        self._load: Optional[str] = None  # 'packaged' or 'local': how the tokenizer is loaded, once, on first use
        self.source = "estimate: characters / 4 (no local tokenizer)"
        self.counts: dict[str, int] = {}
        self._new = 0
        self._path: Optional[Path] = None
        self._b = b = model_cfg.get("backend") or {}
        self._ident = ident = model_cfg.get("hf_id") or (
            b.get("model") if b.get("_target_", "").endswith("HFBackend") else None)
        if b.get("package") or b.get("gguf_file"):
            self._load = "packaged"
            self.source = f"model tokenizer ({b.get('gguf_file') or b.get('package')})"
            files = self._packaged_files(b)
        else:
            files = _cached_locally(str(ident)) if ident else None
            if not files:
                if ident:  # nothing on disk: no transformers import and no hub call (seconds saved, nothing sent)
                    self.source = f"estimate: characters / 4 (no local tokenizer for {ident})"
                return
            self._load = "local"
            self.source = f"model tokenizer ({ident}, local files)"
        self._path = _counts_path([self._load, str(ident), b.get("gguf_file"), _stamp(files)])
        self._read()

    @staticmethod
    def _packaged_files(b: Any) -> list[str]:
        from recbench.backends.hf_weights import resolve_model_dir

        try:
            folder = resolve_model_dir(str(b.get("model") or ""), b.get("package"))
        except Exception:  # noqa: BLE001 - the load reports it, on first use
            return []
        return [str(Path(folder) / str(b["gguf_file"]))] if b.get("gguf_file") else \
            [str(p) for p in sorted(Path(folder).glob("tokenizer*"))]

    def _read(self) -> None:
        if self._path is None:
            return
        try:
            with open(self._path, "rb") as f:
                got = pickle.load(f)
            self.counts = got if isinstance(got, dict) else {}
        except FileNotFoundError:
            pass
        except Exception as e:  # noqa: BLE001 - a torn or foreign file is recounted, never trusted
            log.warning("plan: token counts %s unreadable (%s): counted again", self._path, e)

    @property
    def tok(self) -> Any:
        """The tokenizer, loaded on first use; None (and `source` says why) when it did not load."""
        if self._load is None:
            return self._tok
        how, self._load = self._load, None
        try:
            if how == "packaged":
                self._tok = _packaged_tokenizer(self._b)
            else:
                from transformers import AutoTokenizer
                from transformers.utils import logging as hf_logging

                hf_logging.set_verbosity_error()
                self._tok = AutoTokenizer.from_pretrained(str(self._ident), local_files_only=True)
        except Exception as e:  # noqa: BLE001 - any failure falls back to the estimate, and says so
            log.debug("plan: no tokenizer (%s); estimating tokens from characters", e)
            self.source = f"estimate: characters / 4 (the local tokenizer did not load: {type(e).__name__})"
            self._path, self._tok = None, None
        return self._tok

    def count(self, req: Request) -> int:
        """Prompt tokens of one chat request."""
        msgs = req.message_dicts()
        if self._path is None and self._load is None and self._tok is None:
            return _estimate(msgs)
        key = hashlib.sha256(json.dumps(msgs, sort_keys=True).encode()).hexdigest()[:24]
        n = self.counts.get(key) if self._path is not None else None
        if n is not None:
            return n
        tok = self.tok
        if tok is None:
            return _estimate(msgs)
        try:
            if getattr(tok, "chat_template", None):
                ids = tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True)
                n = len(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
            else:
                n = len(tok("\n".join(m["content"] for m in msgs))["input_ids"])
        except Exception:  # noqa: BLE001
            return _estimate(msgs)
        if self._path is not None:
            self.counts[key] = n
            self._new += 1
        return n

    def save(self) -> None:
        """Write the counts made by this plan into the derived-data cache (atomically; a read-only cache is
        skipped)."""
        if self._path is None or not self._new:
            return
        from recbench.store.derived_cache import _write_atomic

        _write_atomic(self._path, self.counts)
        self._new = 0


def _estimate(msgs: list[dict[str, Any]]) -> int:
    return max(1, sum(len(m["content"]) for m in msgs) // 4 + 4 * len(msgs))
