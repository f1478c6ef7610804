"""The tokenizer of a GGUF model as plain files, for `mode=plan`'s token counts without parsing the GGUF each time."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from recbench.backends import convert
from recbench.store import derived_cache


def gguf_tokenizer_folder(gguf_dir: str, gguf_file: str) -> Optional[Path]:
    """A folder holding the GGUF's tokenizer as plain files (tokenizer.json, its config, the chat template), for
    `mode=plan`'s token counts: the de-quantized model folder when a run or `doctor --load-model` already wrote it,
    else a tokenizer-only entry of the derived-data cache, built once (reading a GGUF's tokenizer parses the whole
    file: 56 s at load 14-16, issue 44; the folder reads in a fraction of a second). None when the cache is off.
    transformers' version keys the entries, read from its installed metadata (importing transformers for its
    __version__ was 1 s of plan mode's 3.6 at load 0.4)."""
    from importlib.metadata import version

    transformers_version = version("transformers")

    src = Path(gguf_dir) / gguf_file
    if not src.is_file():
        raise FileNotFoundError(f"GGUF file not found: {src}")
    d = derived_cache.cache_dir()
    if d is None:
        return None
    for dtype in ("float32", "bfloat16", "float16"):  # a converted model folder holds the tokenizer too
        model_dir = d / f"hf-{src.stem}-{dtype}-" \
            f"{derived_cache.entry_key(f'hf-{src.stem}-{dtype}', (dtype, transformers_version), [src], (convert.__file__,))}"
        if derived_cache.folder_complete(model_dir):
            return model_dir

    def build(out: Path) -> None:
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name).save_pretrained(out)

    return derived_cache.folder_entry(f"tok-{src.stem}", (transformers_version,), [src], (__file__,), build)


class PlainTokenizer:
    """The few calls plan mode makes of a tokenizer (`apply_chat_template(..., tokenize=True)`, `__call__`), on a
    folder's tokenizer.json (the `tokenizers` library) and chat_template.jinja (jinja2, sandboxed, as transformers
    renders it): token counts without importing transformers and torch (7 s of plan mode's 10-14 at load 3.6)."""

    def __init__(self, folder: Path):
        import json

        from jinja2.sandbox import ImmutableSandboxedEnvironment
        from tokenizers import Tokenizer

        self.tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        conf = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        self.special = {k: conf.get(k) for k in ("bos_token", "eos_token", "pad_token", "unk_token")}
        path = folder / "chat_template.jinja"
        self.chat_template = path.read_text(encoding="utf-8") if path.is_file() else conf.get("chat_template")
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

        def raise_exception(message: str) -> None:
            raise ValueError(message)

        env.globals["raise_exception"] = raise_exception
        self.template = env.from_string(self.chat_template) if self.chat_template else None

    def apply_chat_template(self, messages: list[dict], tokenize: bool = True,
                            add_generation_prompt: bool = True) -> list[int]:
        """The chat prompt's token ids (special tokens as the template writes them, none added)."""
        text = self.template.render(messages=messages, add_generation_prompt=add_generation_prompt, **self.special)
        return self.tok.encode(text, add_special_tokens=False).ids

    def __call__(self, text: str) -> dict[str, list[int]]:
        return {"input_ids": self.tok.encode(text).ids}
