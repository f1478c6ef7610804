"""transformers backend: batched chat generation with left padding, explicit sampling, CPU by default.

The weights' location, fingerprint and loading are in `hf_weights`, choice scoring in `hf_choice`, the decoding-step
reports the progress line shows in `decoding`, the thread count in `threads`.
"""
from __future__ import annotations

import hashlib
import logging
import os
import sys
import time
from collections import defaultdict
from typing import Any, Optional, Sequence

from recbench.backends.hf_conf import HFBackendConf
from recbench.api.types import Request, Response
from recbench.backends.base import Backend, constructor_args, empty_answer
from recbench.backends.batch_pace import BatchPace
from recbench.backends.decoding import batch_started, step_hook
from recbench.backends.hf_choice import choose
from recbench.backends.hf_weights import (  # noqa: F401 - resolve_model_dir, quiet_gguf: imported from here elsewhere
    load_cached_gguf,
    load_direct,
    quiet_gguf,
    read_fingerprint,
    remember_fingerprint,
    resolve_model_dir,
    status_line,
    weights_fingerprint,
)
from recbench.backends.quirks import apply_quirks, check_quirks
from recbench.backends.threads import ThreadChoice

log = logging.getLogger(__name__)

# (model, gguf_file, dtype, device, adapter) -> (tokenizer, model): weights load once per process.
_LOADED: dict[tuple, tuple[Any, Any]] = {}


def resolve_device(device: str) -> str:
    """The device to run on: `auto` is cuda when torch sees a GPU, else cpu (no torch import on a machine without an
    NVIDIA driver)."""
    if device != "auto":
        return device
    if not (os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidia0")):
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def device_class(device: str) -> str:
    """cpu, cuda, mps, ... of a torch device string ('cuda:1' -> 'cuda')."""
    return device.split(":", 1)[0].strip().lower()


class HFBackend(Backend):
    """A causal LM run with transformers.generate on batches of chat requests."""

    kind = "hf"

    def __init__(
        self,
        model: str = HFBackendConf.model,
        package: Optional[str] = None,
        gguf_file: Optional[str] = None,
        revision: Optional[str] = HFBackendConf.revision,
        dtype: str = "float32",
        device: str = "auto",
        batch_size: int = HFBackendConf.batch_size,  # type: ignore[assignment]
        adapter: Optional[str] = None,
        max_model_len: Optional[int] = None,
        threads: Any = HFBackendConf.threads,
        name: Optional[str] = HFBackendConf.name,
        quirks: Optional[Sequence[str]] = HFBackendConf.quirks,
        batch_seconds: Optional[float] = HFBackendConf.batch_seconds,
    ):
        t0 = self._started = time.time()
        self.name = name or model or package
        if "torch" not in sys.modules:  # seconds, and minutes on a busy machine: said, never silent
            status_line(f"recbench: starting {self.name}: importing torch ...")
        import torch

        torch_s = time.time() - t0  # a run's first torch import (about 1 s): part of the "ready in" line
        self.quirks = check_quirks(quirks)
        self._enforcer_data: Any = None  # lm-format-enforcer's view of the tokenizer, built on the first JSON guide
        self.model_dir = resolve_model_dir(model, package)
        self.gguf_file = gguf_file
        self.revision = revision
        self.dtype_name = dtype
        self.device = resolve_device(device)
        self.batch_size = batch_size
        self.adapter = adapter
        self.max_model_len = max_model_len
        # threads chosen now and, for auto, again between batches; batches sized to batch_seconds (batch_pace)
        self._threads = ThreadChoice(threads, torch.set_num_threads, say=status_line)
        n_threads, why = self._threads.n, self._threads.why
        self._pace = BatchPace(batch_size, batch_seconds)
        self.load_info: dict[str, Any] = {"how": "already loaded in this process", "seconds": 0.0}
        self.tokenizer, self.model = self._load()
        self.load_info["threads"] = f"{n_threads} thread{'s' if n_threads > 1 else ''} ({why})"
        if self.load_info.get("import_s") is not None and torch_s >= 0.05:
            self.load_info["torch_import_s"] = round(torch_s, 2)
        gen_eos = self.model.generation_config.eos_token_id
        self._eos_ids = {self.tokenizer.eos_token_id} | set(gen_eos if isinstance(gen_eos, list) else [gen_eos] if gen_eos is not None else [])
        self._identity: Optional[dict[str, Any]] = None

    def _load(self) -> tuple[Any, Any]:
        key = (self.model_dir, self.gguf_file, self.revision, self.dtype_name, self.device, self.adapter)
        if key in _LOADED:
            return _LOADED[key]
        t0 = time.time()
        if "transformers" not in sys.modules:
            status_line(f"recbench: starting {self.name}: importing transformers ...")
        from transformers import PreTrainedModel  # noqa: F401 - the bulk of transformers' import, timed apart
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # per-tensor conversion bars; recbench shows its own progress
        import_s = time.time() - t0
        status_line(f"recbench: starting {self.name}: reading its weights "
                    f"({time.time() - getattr(self, '_started', t0):.0f} s since it started) ...")
        # a GGUF is de-quantized once per file into the derived-data cache, then read as a plain folder
        cached = (load_cached_gguf(self.model_dir, self.gguf_file, self.dtype_name, self.name)
                  if self.gguf_file else None)
        tok, model, how, folder = cached if cached is not None else (
            *load_direct(self.model_dir, self.gguf_file, self.revision, self.dtype_name), "", None)
        if self.gguf_file and cached is None:
            from recbench.store.derived_cache import cache_dir

            how = "GGUF de-quantized; " + ("derived-data cache off" if cache_dir() is None
                                           else f"derived-data cache {cache_dir()} not writable")
        if self.adapter:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, self.adapter)
        model.to(self.device).eval()
        tok.padding_side = "left"
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
        if not getattr(tok, "chat_template", None):
            raise RuntimeError(f"model '{self.model_dir}' has no chat template; recbench sends chat requests only")
        total = time.time() - t0
        self.load_info = {"how": how, "seconds": round(total, 2), "import_s": round(import_s, 2), "folder": folder}
        log.debug("loaded %s (%s) from %s in %.1fs on %s", self.model_dir, self.gguf_file or "",
                  folder or self.model_dir, total, self.device)  # the run's "ready in" line says it on screen
        _LOADED[key] = (tok, model)
        return tok, model

    def identity(self) -> dict[str, Any]:
        """Kind, name, weights fingerprint, revision, adapter, chat-template hash, dtype; the device class when it
        is not cpu."""
        if self._identity is None:
            entry = {"weights": weights_fingerprint(self.model_dir, self.gguf_file),
                     "revision": self.revision or getattr(self.model.config, "_commit_hash", None),
                     "chat_template": hashlib.sha256(self.tokenizer.chat_template.encode()).hexdigest()[:16]}
            remember_fingerprint(self.model_dir, self.gguf_file, self.revision, entry)
            self._identity = self._compose_identity(self.name, entry, self.adapter, self.dtype_name, self.quirks,
                                                    self.device)
        return self._identity

    @classmethod
    def _compose_identity(cls, name: Any, entry: dict[str, Any], adapter: Optional[str], dtype: str,
                          quirks: Sequence[str], device: str) -> dict[str, Any]:
        ident = {"kind": cls.kind, "name": name, "weights": entry["weights"], "revision": entry["revision"],
                 "adapter": adapter, "chat_template": entry["chat_template"], "dtype": dtype}
        if device_class(device) != "cpu":  # GPU kernels decode other text: kept apart (CPU keys are unchanged)
            ident["device"] = device_class(device)
        if quirks:  # the model sees rewritten messages: keep their answers apart in the cache
            ident["quirks"] = list(quirks)
        return ident

    @classmethod
    def static_identity(cls, **config: Any) -> Optional[dict[str, Any]]:
        """The identity without loading the model, when an earlier load remembered its fingerprint (else None);
        keys the config leaves out take the constructor's defaults."""
        a = constructor_args(cls, config)
        model_dir = resolve_model_dir(a["model"], a["package"])
        entry = read_fingerprint(model_dir, a["gguf_file"], a["revision"])
        if entry is None:
            return None
        return cls._compose_identity(a["name"] or a["model"] or a["package"], entry, a["adapter"], a["dtype"],
                                     check_quirks(a["quirks"]), resolve_device(a["device"]))

    def effective_params(self) -> dict[str, Any]:
        """Device, dtype and batch size actually used."""
        return {"device": self.device, "dtype": self.dtype_name, "batch_size": self.batch_size,
                "batch_seconds": self._pace.budget, "torch_threads": __import__("torch").get_num_threads(),
                "thread_changes": list(self._threads.changes), "quirks": list(self.quirks)}

    # ---- generation -------------------------------------------------------------------------
    def stream(self, next_requests: Any, on_response: Any) -> None:
        """Batches of the size that fits the time budget (`batch_pace`), each batch's answers delivered as soon as
        it is decoded."""
        while True:
            batch = next_requests(self._pace.size)
            if not batch:
                return
            for req, resp in zip(batch, self.generate(batch)):
                on_response(req, resp)

    def _prompt(self, req: Request) -> str:
        messages = apply_quirks(req.message_dicts(), self.quirks)
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def generate(self, requests: list[Request]) -> list[Response]:
        """Answer requests in batches grouped by sampling parameters (choice constraints by likelihood, JSON-schema
        constraints by guided decoding)."""
        out: list[Optional[Response]] = [None] * len(requests)
        groups: dict[Any, list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            kind = r.constraint.kind if r.constraint is not None else None
            is_choice = kind == "choice"
            groups[(r.sampling, is_choice, r.constraint.schema if kind == "json" else None)].append(i)
        for (sampling, is_choice, schema), idxs in groups.items():
            # longest first so each batch holds similar lengths (less padding)
            prompts = {i: self._prompt(requests[i]) for i in idxs}
            idxs = sorted(idxs, key=lambda i: -len(prompts[i]))
            s = 0
            while s < len(idxs):
                self._threads.revisit()  # auto: the load may have changed since the last batch
                chunk = idxs[s : s + self._pace.size]
                s += len(chunk)
                try:
                    with self._pace.timed(len(chunk)):
                        if is_choice:
                            res = choose(self, [prompts[i] for i in chunk], [requests[i] for i in chunk])
                        else:
                            res = self._generate([prompts[i] for i in chunk], sampling, schema)
                except Exception as e:  # a failing batch becomes error responses, never a lost run
                    log.exception("hf generate failed")
                    res = [Response(error=f"{type(e).__name__}: {e}") for _ in chunk]
                for i, r in zip(chunk, res):
                    out[i] = r
        return out  # type: ignore[return-value]

    def _gen_kwargs(self, sp: Any) -> dict[str, Any]:
        """transformers.generate's arguments for these sampling parameters (every one explicit)."""
        import torch

        kw: dict[str, Any] = dict(
            max_new_tokens=sp.max_tokens,
            do_sample=not sp.greedy,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=sorted(self._eos_ids),
            num_beams=1,
            repetition_penalty=1.0,
            top_k=None if sp.greedy else 0,
        )
        if sp.greedy:
            kw.update(temperature=None, top_p=None)
        else:
            kw.update(temperature=sp.temperature, top_p=sp.top_p)
            torch.manual_seed(sp.seed)
        if sp.stop:
            kw.update(stop_strings=list(sp.stop), tokenizer=self.tokenizer)
        return kw

    def _json_guide(self, schema: str) -> Any:
        """transformers' prefix_allowed_tokens_fn that keeps an answer inside the JSON schema (recbench.backends.
        hf_guide; the tokenizer's token list built once per backend)."""
        from recbench.backends.hf_guide import json_guide, tokenizer_data

        if self._enforcer_data is None:
            self._enforcer_data = tokenizer_data(self.tokenizer, self._eos_ids)
        return json_guide(self._enforcer_data, schema)

    def _generate(self, prompts: list[str], sp: Any, schema: Optional[str] = None) -> list[Response]:
        """One batch through transformers.generate (guided by a JSON schema when given); every decoding step is
        reported (recbench.backends.decoding)."""
        import torch
        from transformers import StoppingCriteriaList

        t0 = time.time()
        batch = batch_started(len(prompts), sp.max_tokens)
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        steps = StoppingCriteriaList([step_hook(batch, self._eos_ids)])
        try:
            with torch.inference_mode():
                guide = {"prefix_allowed_tokens_fn": self._json_guide(schema)} if schema else {}
                seqs = self.model.generate(**enc, **self._gen_kwargs(sp), stopping_criteria=steps, **guide)
        except BaseException:
            batch.finish(batch.tokens)
            raise
        dt = time.time() - t0
        results = [self._response(seqs[row, enc["input_ids"].shape[1]:], int(enc["attention_mask"][row].sum()), sp,
                                  dt / len(prompts)) for row in range(len(prompts))]
        batch.finish(sum(r.completion_tokens for r in results))
        return results

    def _response(self, gen: Any, prompt_tokens: int, sp: Any, latency_s: float) -> Response:
        """One row's answer: text up to its first end-of-sequence token or stop string, and why it ended."""
        toks = gen.tolist()
        ends = [j for j, t in enumerate(toks) if t in self._eos_ids]
        hit_eos = bool(ends)
        n_gen = ends[0] + 1 if hit_eos else len(toks)
        text = self.tokenizer.decode(gen[:n_gen], skip_special_tokens=True)
        stopped = False
        for s in sp.stop:
            if s in text:
                text, stopped = text[: text.index(s)], True
        finish = "stop" if hit_eos or stopped or n_gen < sp.max_tokens else "length"
        problem = empty_answer(text, finish, in_process=True)
        if problem:  # an error, never cached: the example is abandoned and retried on the next run
            return Response(error=f"hf: {problem} after {n_gen} token(s)", latency_s=latency_s)
        return Response(text=text, finish_reason=finish, prompt_tokens=prompt_tokens, completion_tokens=n_gen,
                        latency_s=latency_s)
