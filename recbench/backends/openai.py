"""OpenAI-compatible backend (vLLM serve, llama.cpp server, hosted APIs): async, bounded concurrency, timeouts, retries."""
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import random
import threading
import time
from collections import Counter
from typing import Any, Optional
from urllib.parse import urlsplit

from recbench.backends.base import Backend
from recbench.backends.retry import RetryPolicy, parse_retry_after, retryable_status
from recbench.types import Request, Response

log = logging.getLogger(__name__)

#: how constraints travel: "vllm" (the `structured_outputs` request field: choice, json, regex), "openai"
#: (standard `response_format` json_schema; choice/regex are not enforced, counted), "none" (never sent)
CONSTRAINT_MODES = ("vllm", "openai", "none")


class _Failure(Exception):
    """One failed attempt: retryable or not, with the HTTP status and Retry-After when there was one."""

    def __init__(self, message: str, *, retryable: bool, status: Optional[int] = None,
                 retry_after: Optional[float] = None):
        super().__init__(message)
        self.retryable, self.status, self.retry_after = retryable, status, retry_after


class OpenAIBackend(Backend):
    """Chat completions against any OpenAI-compatible `base_url`, many requests in flight on one event loop."""

    kind = "openai"

    def __init__(
        self,
        model: str,
        base_url: Optional[str] = None,
        api_key_env: Optional[str] = None,
        name: Optional[str] = None,
        revision: Optional[str] = None,
        concurrency: int = 8,
        timeout_s: float = 120.0,
        max_retries: int = 4,
        backoff_initial_s: float = 0.5,
        backoff_max_s: float = 20.0,
        backoff_jitter: float = 0.5,
        max_retry_after_s: float = 60.0,
        constraints: str = "vllm",
        extra_body: Optional[dict[str, Any]] = None,
        batch_size: Optional[int] = None,
        seed_param: bool = True,
    ):
        if constraints not in CONSTRAINT_MODES:
            raise ValueError(f"constraints must be one of {CONSTRAINT_MODES}, got {constraints!r}")
        self.model = model
        self.name = name or model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self.api_key_env = api_key_env
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise RuntimeError(f"openai backend: environment variable {api_key_env} (model.backend.api_key_env) "
                                   f"is not set; export the API key for {self.base_url} there")
        else:
            key = "EMPTY"  # local servers (vLLM, llama.cpp) accept any key; never read from config files
        self._secret = key  # kept on the instance only: never logged, recorded, cached or put in identity()
        self.revision = revision
        self.concurrency = max(1, int(concurrency))
        self.timeout_s = float(timeout_s)
        self.policy = RetryPolicy(max_retries=max_retries, initial_s=backoff_initial_s, max_s=backoff_max_s,
                                  jitter=backoff_jitter, max_retry_after_s=max_retry_after_s)
        self.constraints = constraints
        self.extra_body = dict(extra_body or {})
        self.seed_param = seed_param
        self.batch_size = batch_size or max(16, self.concurrency * 4)
        self.stats: Counter = Counter()  # attempts, retries, successes, gave_up, status_<code>, timeouts, ...
        self._rng = random.Random(0)
        self._warned: set[str] = set()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="recbench-openai", daemon=True)
        self._thread.start()
        self._client = asyncio.run_coroutine_threadsafe(self._make_client(), self._loop).result()
        self._sem = asyncio.run_coroutine_threadsafe(self._make_sem(), self._loop).result()

    async def _make_client(self) -> Any:
        from openai import AsyncOpenAI

        # the client's own retries are off: this backend retries (bounded, jittered, Retry-After aware, counted)
        return AsyncOpenAI(api_key=self._secret, base_url=self.base_url, max_retries=0, timeout=self.timeout_s)

    async def _make_sem(self) -> asyncio.Semaphore:
        return asyncio.Semaphore(self.concurrency)

    # ---- identity and records ---------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        """Kind, served model id, optional revision, server host (scheme+host, no port or key)."""
        u = urlsplit(self.base_url)
        return {"kind": self.kind, "name": self.name, "model": self.model, "revision": self.revision,
                "server": f"{u.scheme}://{u.hostname}{u.path}"}

    def effective_params(self) -> dict[str, Any]:
        """Endpoint, concurrency, timeout, retry policy, constraint mode, extra body fields (never the key)."""
        return {"base_url": self.base_url, "api_key_env": self.api_key_env, "concurrency": self.concurrency,
                "timeout_s": self.timeout_s, "retry": dataclasses.asdict(self.policy),
                "constraints": self.constraints, "extra_body": self.extra_body, "batch_size": self.batch_size}

    # ---- generation -------------------------------------------------------------------------
    def generate(self, requests: list[Request]) -> list[Response]:
        """Send all requests concurrently (at most `concurrency` in flight); same order out, errors as Responses."""
        if not requests:
            return []
        fut = asyncio.run_coroutine_threadsafe(self._gather(requests), self._loop)
        return fut.result()

    async def _gather(self, requests: list[Request]) -> list[Response]:
        return list(await asyncio.gather(*(self._one(r) for r in requests)))

    def _payload(self, req: Request) -> dict[str, Any]:
        sp = req.sampling
        kw: dict[str, Any] = {
            "model": self.model if not req.adapter else req.adapter,  # vLLM serves LoRA adapters by name
            "messages": req.message_dicts(),
            "temperature": sp.temperature,
            "top_p": sp.top_p,
            "max_tokens": sp.max_tokens,
            "n": 1,
        }
        if self.seed_param:
            kw["seed"] = sp.seed
        if sp.stop:
            kw["stop"] = list(sp.stop)
        if req.logprobs is not None:
            kw["logprobs"] = True
            kw["top_logprobs"] = req.logprobs
        body = dict(self.extra_body)
        c = req.constraint
        if c is not None and self.constraints != "none":
            if self.constraints == "vllm":
                so: dict[str, Any] = {}
                if c.kind == "choice":
                    so["choice"] = list(c.choices)
                elif c.kind == "json":
                    so["json"] = json.loads(c.schema or "{}")
                elif c.kind == "regex":
                    so["regex"] = c.pattern
                body["structured_outputs"] = so
            elif c.kind == "json":
                kw["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": "answer", "schema": json.loads(c.schema or "{}")}}
            else:
                self.stats[f"unenforced_{c.kind}"] += 1
                if c.kind not in self._warned:
                    self._warned.add(c.kind)
                    log.warning("openai backend (constraints=openai): %s constraints are not enforced by the server; "
                                "answers rely on the prompt and the parser", c.kind)
        if body:
            kw["extra_body"] = body
        return kw

    async def _one(self, req: Request) -> Response:
        payload = self._payload(req)
        last: Optional[_Failure] = None
        attempts = 0
        t_start = time.monotonic()
        for attempt in range(self.policy.max_retries + 1):
            attempts += 1
            async with self._sem:
                self.stats["attempts"] += 1
                t0 = time.monotonic()
                try:
                    resp = await self._attempt(payload)
                    resp.latency_s = time.monotonic() - t0
                    self.stats["successes"] += 1
                    return resp
                except _Failure as f:
                    last = f
            if last.status is not None:
                self.stats[f"status_{last.status}"] += 1
            if not last.retryable or attempt == self.policy.max_retries:
                break
            self.stats["retries"] += 1
            await asyncio.sleep(self.policy.delay(attempt, last.retry_after, self._rng))
        assert last is not None
        self.stats["gave_up"] += 1
        what = f"HTTP {last.status}" if last.status is not None else "no HTTP status"
        msg = (f"openai backend: POST {self.base_url}/chat/completions (model {self.model}) failed after "
               f"{attempts} attempt(s) in {time.monotonic() - t_start:.1f}s; last error: {what}: {last}")
        return Response(error=self._scrub(msg), latency_s=time.monotonic() - t_start)

    async def _attempt(self, payload: dict[str, Any]) -> Response:
        import openai

        try:
            # asyncio.wait_for is a second guard: slow-drip bodies can outlive httpx's per-read timeout
            out = await asyncio.wait_for(self._client.chat.completions.create(**payload, timeout=self.timeout_s),
                                         timeout=self.timeout_s + 1.0)
        except (asyncio.TimeoutError, openai.APITimeoutError) as e:
            self.stats["timeouts"] += 1
            raise _Failure(f"timed out after {self.timeout_s:g}s ({type(e).__name__})", retryable=True) from None
        except openai.APIStatusError as e:
            status = e.status_code
            raise _Failure(self._scrub(f"{type(e).__name__}: {_short(e.message)}"), retryable=retryable_status(status),
                           status=status, retry_after=parse_retry_after(e.response.headers)) from None
        except openai.APIConnectionError as e:
            self.stats["connection_errors"] += 1
            cause = e.__cause__ or e.__context__
            raise _Failure(self._scrub(f"connection error: {type(cause).__name__ if cause else ''} {cause or e}"),
                           retryable=True) from None
        except (ValueError, openai.APIResponseValidationError) as e:  # truncated / malformed JSON body
            self.stats["malformed"] += 1
            raise _Failure(self._scrub(f"malformed response body: {type(e).__name__}: {_short(str(e))}"),
                           retryable=True, status=200) from None
        except openai.OpenAIError as e:
            raise _Failure(self._scrub(f"{type(e).__name__}: {_short(str(e))}"), retryable=False) from None
        if not getattr(out, "choices", None) or out.choices[0].message is None:
            self.stats["malformed"] += 1
            raise _Failure("response without choices", retryable=True, status=200)
        ch = out.choices[0]
        usage = getattr(out, "usage", None)
        return Response(
            text=ch.message.content or "",
            finish_reason=ch.finish_reason or "stop",
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            logprobs=_logprobs(ch),
        )

    def _scrub(self, text: str) -> str:
        """Remove the API key from any text that might be recorded (some servers echo it in errors)."""
        if self._secret and self._secret != "EMPTY" and len(self._secret) >= 4:
            text = text.replace(self._secret, "***")
        return text

    def close(self) -> None:
        """Close the HTTP client and stop the event-loop thread."""
        if not self._loop.is_closed() and self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self._client.close(), self._loop).result(timeout=10)
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
            self._loop.close()


def _short(s: str, n: int = 300) -> str:
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[:n] + "..."


def _logprobs(choice: Any) -> Optional[list[dict[str, Any]]]:
    """[{token, logprob, top: {token: logprob}}] per generated token, the same shape the vllm backend returns."""
    lp = getattr(choice, "logprobs", None)
    content = getattr(lp, "content", None) if lp is not None else None
    if not content:
        return None
    return [{"token": t.token, "logprob": t.logprob, "top": {x.token: x.logprob for x in (t.top_logprobs or [])}}
            for t in content]
