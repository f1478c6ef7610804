"""vLLM offline-engine backend: one `LLM.chat` call per round, explicit SamplingParams, structured outputs, LoRA."""
from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any, Optional, Sequence

from recbench.backends.vllm_conf import VLLMBackendConf
from recbench.backends.base import Backend, empty_answer
from recbench.backends.hf_weights import quiet_gguf, resolve_model_dir, weights_fingerprint
from recbench.backends.quirks import apply_quirks, check_quirks
from recbench.api.types import Request, Response

log = logging.getLogger(__name__)

# engine kwargs (as a sorted JSON string) -> vllm.LLM: the engine is built once per process
_ENGINES: dict[str, Any] = {}

#: sampling fields recbench pins on every request besides Request.sampling, so nothing comes from the
#: model's generation_config (the engine is also started with generation_config="vllm")
PINNED_SAMPLING = {"n": 1, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0, "presence_penalty": 0.0,
                   "frequency_penalty": 0.0, "skip_special_tokens": True}


class VLLMBackend(Backend):
    """A model run by the vLLM offline engine; every request of a round goes to one `LLM.chat` call."""

    kind = "vllm"

    def __init__(
        self,
        model: str = VLLMBackendConf.model,
        package: Optional[str] = None,
        gguf_file: Optional[str] = None,
        convert_dtype: str = "bfloat16",
        name: Optional[str] = VLLMBackendConf.name,
        revision: Optional[str] = VLLMBackendConf.revision,
        tokenizer: Optional[str] = None,
        dtype: str = "auto",
        quantization: Optional[str] = None,
        max_model_len: Optional[int] = None,
        tensor_parallel_size: int = 1,
        pipeline_parallel_size: int = 1,
        distributed_executor_backend: Optional[str] = None,
        gpu_memory_utilization: float = 0.9,
        kv_cache_memory_bytes: Optional[int] = None,
        enable_prefix_caching: bool = True,
        enforce_eager: bool = False,
        enable_lora: bool = False,
        max_lora_rank: int = 16,
        max_loras: int = 4,
        lora_adapters: Optional[dict[str, str]] = None,
        trust_remote_code: bool = False,
        seed: int = 0,
        batch_size: int = VLLMBackendConf.batch_size,  # type: ignore[assignment]
        chat_template_kwargs: Optional[dict[str, Any]] = None,
        engine_kwargs: Optional[dict[str, Any]] = None,
        quirks: Optional[Sequence[str]] = VLLMBackendConf.quirks,
    ):
        self.quirks = check_quirks(quirks)
        self.source, self.model_path = model_source(model, package, gguf_file, convert_dtype)
        self.name = name or model or package
        self.revision = revision
        self.batch_size = batch_size
        self.lora_adapters = dict(lora_adapters or {})
        self._lora_ids: dict[str, int] = {}
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.engine_args: dict[str, Any] = engine_arguments({
            "model": self.model_path, "tokenizer": tokenizer, "revision": revision, "dtype": dtype,
            "quantization": quantization, "max_model_len": max_model_len,
            "tensor_parallel_size": tensor_parallel_size, "pipeline_parallel_size": pipeline_parallel_size,
            "distributed_executor_backend": distributed_executor_backend,
            "gpu_memory_utilization": gpu_memory_utilization, "kv_cache_memory_bytes": kv_cache_memory_bytes,
            "enable_prefix_caching": enable_prefix_caching, "enforce_eager": enforce_eager,
            "enable_lora": enable_lora, "trust_remote_code": trust_remote_code, "seed": seed,
            "generation_config": "vllm",  # never the model's implicit sampling defaults
            **({"max_lora_rank": max_lora_rank, "max_loras": max_loras} if enable_lora else {}),
            **(engine_kwargs or {}),
        })
        self.llm = self._engine()
        self._identity: Optional[dict[str, Any]] = None

    def _engine(self) -> Any:
        key = json.dumps(self.engine_args, sort_keys=True, default=str)
        if key not in _ENGINES:
            from vllm import LLM

            t0 = time.time()
            _ENGINES[key] = LLM(**self.engine_args)
            log.info("vLLM engine for %s ready in %.1fs", self.model_path, time.time() - t0)
        return _ENGINES[key]

    def close(self) -> None:
        """Keep the engine: it lives for the process (in-process vLLM engines share global parallel state, and
        tearing one down breaks the others), and a later backend with the same arguments reuses it."""

    # ---- identity and records ---------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        """Kind, name, weights fingerprint (GGUF hash or folder), revision, chat-template hash, dtype; the device
        class when it is not cpu."""
        if self._identity is None:
            tok = self.llm.get_tokenizer()
            template = getattr(tok, "chat_template", None) or ""
            src_dir, _, gguf = self.source.rpartition("/") if self.source.endswith(".gguf") else (self.source, "", None)
            self._identity = {
                "kind": self.kind,
                "name": self.name,
                "weights": weights_fingerprint(src_dir, gguf),
                "revision": self.revision,
                "chat_template": hashlib.sha256(template.encode()).hexdigest()[:16],
                "dtype": str(self.llm.llm_engine.model_config.dtype).replace("torch.", ""),
            }
            if device_class() != "cpu":  # GPU kernels decode other text: kept apart (CPU keys are unchanged)
                self._identity["device"] = device_class()
            if self.quirks:  # the model sees rewritten messages: keep their answers apart in the cache
                self._identity["quirks"] = list(self.quirks)
        return self._identity

    def effective_params(self) -> dict[str, Any]:
        """Engine settings actually in force (dtype, lengths, parallelism, caching) and the pinned sampling fields."""
        import vllm

        mc = self.llm.llm_engine.model_config
        return {
            "vllm_version": vllm.__version__,
            "model_path": self.model_path,
            "source": self.source,
            "dtype": str(mc.dtype).replace("torch.", ""),
            "max_model_len": mc.max_model_len,
            "engine_args": {k: v for k, v in self.engine_args.items() if k != "model"},
            "pinned_sampling": PINNED_SAMPLING,
            "batch_size": self.batch_size,
            "lora_adapters": self.lora_adapters,
            "quirks": list(self.quirks),
        }

    # ---- generation -------------------------------------------------------------------------
    def sampling_params(self, req: Request) -> Any:
        """vLLM SamplingParams for one request: every field explicit, constraint as structured outputs."""
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        sp = req.sampling
        so = None
        c = req.constraint
        if c is not None:
            if c.kind == "choice":
                so = StructuredOutputsParams(choice=list(c.choices))
            elif c.kind == "json":
                so = StructuredOutputsParams(json=json.loads(c.schema or "{}"))
            elif c.kind == "regex":
                so = StructuredOutputsParams(regex=c.pattern)
        return SamplingParams(
            temperature=sp.temperature,
            top_p=sp.top_p,
            max_tokens=sp.max_tokens,
            seed=sp.seed,
            stop=list(sp.stop) or None,
            logprobs=req.logprobs,
            structured_outputs=so,
            **PINNED_SAMPLING,
        )

    def lora_request(self, adapter: Optional[str]) -> Any:
        """LoRARequest for an adapter name (looked up in lora_adapters) or path; None for the base model."""
        if not adapter:
            return None
        if not self.engine_args.get("enable_lora"):
            raise ValueError(f"request asks for LoRA adapter '{adapter}' but the engine was built without "
                             "enable_lora (set model.backend.enable_lora=true)")
        from vllm.lora.request import LoRARequest

        path = self.lora_adapters.get(adapter, adapter)
        if adapter not in self._lora_ids:
            self._lora_ids[adapter] = len(self._lora_ids) + 1
        return LoRARequest(adapter, self._lora_ids[adapter], path)

    def generate(self, requests: list[Request]) -> list[Response]:
        """One `LLM.chat` call for the whole list; if it fails, bisect so only the bad request(s) fail."""
        if not requests:
            return []
        try:
            return self._chat(requests)
        except Exception as e:  # noqa: BLE001 - vLLM rejects the whole call for one bad prompt (e.g. too long)
            if len(requests) == 1:
                return [Response(error=f"vllm: {type(e).__name__}: {e}")]
            log.warning("vLLM call of %d requests failed (%s: %s); bisecting", len(requests), type(e).__name__, e)
        mid = len(requests) // 2
        return self.generate(requests[:mid]) + self.generate(requests[mid:])

    def _chat(self, requests: list[Request]) -> list[Response]:
        t0 = time.time()
        params = [self.sampling_params(r) for r in requests]
        loras = [self.lora_request(r.adapter) for r in requests]
        outs = self.llm.chat(
            [apply_quirks(r.message_dicts(), self.quirks) for r in requests],
            sampling_params=params,
            lora_request=loras if any(loras) else None,
            use_tqdm=False,
            add_generation_prompt=True,
            chat_template_kwargs=self.chat_template_kwargs or None,
        )
        dt = time.time() - t0
        res = []
        for o in outs:
            c = o.outputs[0] if o.outputs else None
            problem = "no completion in the engine's output" if c is None else empty_answer(c.text, c.finish_reason, in_process=True)
            if problem:  # an error, never cached: the example is abandoned and retried on the next run
                res.append(Response(error=f"vllm: {problem}", latency_s=dt / len(requests)))
                continue
            res.append(Response(
                text=c.text,
                finish_reason=c.finish_reason or "stop",
                prompt_tokens=len(o.prompt_token_ids or []),
                completion_tokens=len(c.token_ids),
                latency_s=dt / len(requests),
                logprobs=_logprobs(c, self.llm) if c.logprobs else None,
            ))
        return res


def model_source(model: str, package: Optional[str], gguf_file: Optional[str], convert_dtype: str) -> tuple[str, str]:
    """(source, path vLLM loads): a GGUF shipped in a pip package (SmolLM2) is converted once to a cached HF folder
    vLLM can load; a folder or hub id is loaded as it is."""
    src = resolve_model_dir(model, package)
    if not gguf_file:
        return src, src
    from recbench.backends.convert import hf_folder_for_gguf

    with quiet_gguf(f"{gguf_file} -> HF folder (cached after the first time)"):
        return f"{src}/{gguf_file}", str(hf_folder_for_gguf(src, gguf_file, convert_dtype))


def device_class() -> str:
    """The device class vLLM runs on (cuda, cpu, rocm, ...: its current platform)."""
    try:
        from vllm.platforms import current_platform

        return str(current_platform.device_type or "cpu")
    except Exception:  # noqa: BLE001 - an older vLLM without platforms: its engines ran on CUDA
        return "cuda"


def engine_arguments(args: dict[str, Any]) -> dict[str, Any]:
    """The `vllm.LLM(**kwargs)` arguments: unset (None) fields dropped; parallel sizes checked (>= 1)."""
    out = {k: v for k, v in args.items() if v is not None}
    for k in ("tensor_parallel_size", "pipeline_parallel_size"):
        if int(out.get(k, 1)) < 1:
            raise ValueError(f"model.backend.{k} must be >= 1, got {out[k]}")
    deb = out.get("distributed_executor_backend")
    if deb is not None and deb not in ("ray", "mp", "uni", "external_launcher"):
        raise ValueError(f"model.backend.distributed_executor_backend: '{deb}' is not one of ray, mp, uni, "
                         "external_launcher (or null to let vLLM choose)")
    return out


def _logprobs(completion: Any, llm: Any) -> list[dict[str, Any]]:
    """[{token, logprob, top: {token: logprob}}] per generated token (the openai backend's shape)."""
    out = []
    for tid, step in zip(completion.token_ids, completion.logprobs):
        chosen = step.get(tid)
        out.append({
            "token": chosen.decoded_token if chosen is not None else str(tid),
            "logprob": chosen.logprob if chosen is not None else None,
            "top": {lp.decoded_token: lp.logprob for t, lp in step.items() if lp.rank is not None and lp.rank >= 1},
        })
    return out
