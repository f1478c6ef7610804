"""OpenAI-compatible backend (vLLM serve, llama.cpp server, hosted APIs): a window of requests in flight, retries.

The HTTP client is a plain keep-alive pool (`recbench.backends.transport`: aiohttp, else httpx); the `openai`
SDK is not used, because its per-request CPU cost was several times the latency of a local server
(benchmarks/bench_openai_client.py measures both).
"""
from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import logging
import os
import random
import threading
import time
from collections import Counter, deque
from typing import Any, Callable, Optional, Sequence
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from recbench.backends.quirks import apply_quirks, check_quirks
from recbench.backends.base import Backend, BackendUnavailable, empty_answer
from recbench.backends.retry import RetryPolicy, parse_retry_after, retryable_status
from recbench.backends.transport import ConnectFailure, HttpReply, ReadTimeout, Transport, TransportError
from recbench.backends.transport import available as transport_available
from recbench.backends.transport import make_transport
from recbench.store.redact import redact_url
from recbench.api.types import Request, Response

log = logging.getLogger(__name__)

#: how constraints travel: "vllm" (the `structured_outputs` request field: choice, json, regex), "openai"
#: (standard `response_format` json_schema; choice/regex are not enforced, counted), "none" (never sent)
CONSTRAINT_MODES = ("vllm", "openai", "none")

#: hosts of hosted APIs (a host matches itself and its subdomains). Their model names are globally unique, so
#: the cache identity keeps only scheme+host+path; any other server's identity includes its full base URL.
HOSTED_API_HOSTS = (
    "api.openai.com", "openai.azure.com", "api.anthropic.com", "generativelanguage.googleapis.com",
    "aiplatform.googleapis.com", "api.deepseek.com", "api.together.xyz", "api.together.ai", "api.mistral.ai",
    "api.groq.com", "openrouter.ai", "api.lingyiwanwu.com", "api.01.ai", "api.fireworks.ai", "api.perplexity.ai",
    "api.x.ai", "api.cohere.com", "api.cohere.ai", "dashscope.aliyuncs.com", "dashscope-intl.aliyuncs.com",
    "api.moonshot.cn", "api.moonshot.ai", "open.bigmodel.cn", "api.deepinfra.com", "models.inference.ai.azure.com",
    "models.github.ai", "router.huggingface.co", "api-inference.huggingface.co", "api.cerebras.ai",
    "api.sambanova.ai", "api.hyperbolic.xyz", "api.novita.ai", "api.siliconflow.cn", "ark.cn-beijing.volces.com",
)


def is_hosted(base_url: str) -> bool:
    """True when base_url points at a well-known hosted API (HOSTED_API_HOSTS), not a self-run server."""
    host = (urlsplit(base_url).hostname or "").lower()
    return any(host == h or host.endswith("." + h) for h in HOSTED_API_HOSTS)


def server_identity(base_url: str) -> str:
    """The server part of the cache identity: scheme://host/path for hosted APIs, scheme://host:port/path otherwise.

    Never the user-info or query of the URL (they may hold credentials).
    """
    u = urlsplit(base_url.strip())
    scheme, host, path = u.scheme.lower(), (u.hostname or "").lower(), u.path.rstrip("/")
    if is_hosted(base_url):
        return f"{scheme}://{host}{path}"
    port = u.port or {"http": 80, "https": 443}.get(scheme, 0)
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}:{port}{path}"


class _Failure(Exception):
    """One failed attempt: retryable or not, with the HTTP status and Retry-After when there was one."""

    def __init__(self, message: str, *, retryable: bool, status: Optional[int] = None,
                 retry_after: Optional[float] = None, connection: bool = False):
        super().__init__(message)
        self.retryable, self.status, self.retry_after = retryable, status, retry_after
        self.connection = connection  # no HTTP answer at all (refused, reset, dropped): judged by the down rule


class OpenAIBackend(Backend):
    """Chat completions against any OpenAI-compatible `base_url`, `concurrency` requests in flight on one event loop."""

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
        max_consecutive_failures: int = 5,
        down_after_s: float = 3.0,
        transport: str = "auto",
        quirks: Optional[Sequence[str]] = None,
    ):
        self.quirks = check_quirks(quirks)
        if int(max_consecutive_failures) < 1:
            raise ValueError(f"max_consecutive_failures must be >= 1, got {max_consecutive_failures!r} "
                             "(model.backend.max_consecutive_failures)")
        if not float(down_after_s) > 0:
            raise ValueError(f"down_after_s must be > 0 seconds, got {down_after_s!r} (model.backend.down_after_s)")
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
        u = self.check_config(base_url=self.base_url, api_key_env=api_key_env, constraints=constraints)
        auth = f"Bearer {key}"
        if u.username is not None:  # http://user:password@host/v1: HTTP basic auth, as curl and browsers do
            auth = "Basic " + base64.b64encode(f"{unquote(u.username)}:{unquote(u.password or '')}".encode()).decode()
        # kept on the instance only: never logged, recorded, cached or put in identity(); scrubbed from error texts
        self._secrets = [s for s in [key, unquote(u.password or ""), *(v for _, v in parse_qsl(u.query))]
                         if s and s != "EMPTY" and len(s) >= 4]
        self._headers = {"Authorization": auth, "Content-Type": "application/json", "Accept": "application/json"}
        host = u.netloc.rsplit("@", 1)[-1]  # the request URL: path + /chat/completions, the query kept after it
        self._url = urlunsplit((u.scheme, host, u.path.rstrip("/") + "/chat/completions", u.query, ""))
        self._public_url = redact_url(self.base_url)  # what messages and records show (user info, query masked)
        self.revision = revision
        self.concurrency = max(1, int(concurrency))
        self.timeout_s = float(timeout_s)
        self.policy = RetryPolicy(max_retries=max_retries, initial_s=backoff_initial_s, max_s=backoff_max_s,
                                  jitter=backoff_jitter, max_retry_after_s=max_retry_after_s)
        self.constraints = constraints
        self.extra_body = dict(extra_body or {})
        self.seed_param = seed_param
        self.max_consecutive_failures = int(max_consecutive_failures)
        self.down_after_s = float(down_after_s)
        self.transport = transport_available(transport)
        self.batch_size = batch_size or max(16, self.concurrency * 4)
        self.stats: Counter = Counter()  # attempts, retries, successes, gave_up, status_<code>, timeouts, ...
        self._rng = random.Random(0)
        self._warned: set[str] = set()
        self._loop = asyncio.new_event_loop()  # runs only inside stream()/generate()/close(), in the caller's thread
        self._call_lock = threading.Lock()
        self._client: Optional[Transport] = None
        self._cond: Optional[asyncio.Condition] = None
        self._alive = False  # a connection or an HTTP answer was seen since the last connection failure
        self._probing = False  # one attempt is testing a server that is not known to be up
        self._consecutive = 0  # connection failures since the last HTTP answer
        self._refused = 0  # 401/403 answers since the last other HTTP answer (max_consecutive_failures: stop)
        self._last_answer = time.monotonic()  # of the last HTTP answer (any status), or of the stream's start
        self._dead: Optional[BackendUnavailable] = None

    @staticmethod
    def check_config(base_url: Optional[str] = None, api_key_env: Optional[str] = None, constraints: str = "vllm",
                     **_: Any):
        """The config errors construction refuses (a base URL that is not http(s) with a host, user info together
        with api_key_env, an unknown constraints mode), without building anything: ValueError naming the key.
        Returns the split URL."""
        if constraints not in CONSTRAINT_MODES:
            raise ValueError(f"constraints must be one of {CONSTRAINT_MODES}, got {constraints!r}")
        url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        u = _split_url(url)
        if u.username is not None and api_key_env:
            raise ValueError(f"{redact_url(url)} carries user info and model.backend.api_key_env is set too: give the "
                             "credentials one way (the key in the environment variable)")
        return u

    # ---- identity and records ---------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        """Kind, served model id, optional revision, server (scheme+host+path; plus port for self-run servers)."""
        ident = {"kind": self.kind, "name": self.name, "model": self.model, "revision": self.revision,
                 "server": server_identity(self.base_url)}
        if self.quirks:  # the server sees rewritten messages: keep their answers apart in the cache
            ident["quirks"] = list(self.quirks)
        return ident

    def effective_params(self) -> dict[str, Any]:
        """Endpoint, concurrency, timeout, retry policy, constraint mode, extra body fields (never the key)."""
        return {"base_url": self._public_url, "api_key_env": self.api_key_env, "concurrency": self.concurrency,
                "timeout_s": self.timeout_s, "retry": dataclasses.asdict(self.policy),
                "constraints": self.constraints, "extra_body": self.extra_body, "batch_size": self.batch_size,
                "max_consecutive_failures": self.max_consecutive_failures, "down_after_s": self.down_after_s,
                "transport": self.transport}

    # ---- generation -------------------------------------------------------------------------
    def generate(self, requests: list[Request]) -> list[Response]:
        """Send all requests (at most `concurrency` in flight); same order out, errors as Responses."""
        if not requests:
            return []
        out: dict[int, Response] = {}
        todo = list(enumerate(requests))
        index = {id(r): [] for r in requests}
        for i, r in todo:
            index[id(r)].append(i)

        def next_requests(k: int) -> list[Request]:
            batch, todo[:] = todo[:k], todo[k:]
            return [r for _, r in batch]

        def on_response(req: Request, resp: Response) -> None:
            out[index[id(req)].pop(0)] = resp

        self.stream(next_requests, on_response)
        return [out[i] for i in range(len(requests))]

    def stream(self, next_requests: Callable[[int], list[Request]],
               on_response: Callable[[Request, Response], None]) -> None:
        """Keep `concurrency` requests in flight, pulling new ones as answers arrive (no batch barrier).

        `on_response` runs in the calling thread as each answer arrives; if it raises, everything in flight
        is cancelled and the exception propagates. Raises BackendUnavailable when the server is down: at least
        `max_consecutive_failures` connection failures in a row and no HTTP answer for `down_after_s` seconds
        (no request is sent after that; see `_send`).
        """
        if self._loop.is_closed():
            raise RuntimeError("openai backend: stream() after close()")
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError("openai backend: generate()/stream() called from inside on_response; "
                               "make the requests available to next_requests instead")
        with self._call_lock:
            if running is None:
                self._run(next_requests, on_response)
            else:  # the caller's thread already runs an event loop (e.g. Jupyter): run ours beside it, wait
                _run_in_thread(lambda: self._run(next_requests, on_response))

    def _run(self, next_requests: Callable[[int], list[Request]],
             on_response: Callable[[Request, Response], None]) -> None:
        """Run one stream on the backend's loop; if Ctrl-C / SIGTERM breaks out of the loop, cancel the stream and
        let it close its requests in flight before the exception goes on (no coroutine is left half-run)."""
        main = self._loop.create_task(self._stream(next_requests, on_response))
        try:
            self._loop.run_until_complete(main)
        except BaseException:
            if not main.done():
                main.cancel()
                try:
                    self._loop.run_until_complete(main)
                except BaseException:  # noqa: BLE001 - the first exception is the one that goes on
                    pass
            raise

    async def _stream(self, next_requests: Callable[[int], list[Request]],
                      on_response: Callable[[Request, Response], None]) -> None:
        if self._client is None:
            self._cond = asyncio.Condition()
            self._client = make_transport(self.transport, self.concurrency, self.timeout_s, self._on_connect)
        self._dead = None
        self._consecutive = self._refused = 0
        self._last_answer = time.monotonic()  # a new stream gives the server a fresh down_after_s
        tasks: dict[asyncio.Future, Request] = {}
        finished: deque[asyncio.Future] = deque()  # in completion order; O(1) per request at any window size
        wake = asyncio.Event()

        def _done(t: asyncio.Future) -> None:
            finished.append(t)
            wake.set()

        pull = True  # False after a short pull: nothing new can appear before the next answer
        try:
            while True:
                room = self.concurrency - len(tasks)
                if pull and room > 0:
                    batch = next_requests(room)
                    if not batch and not tasks:
                        return  # an empty pull with nothing in flight: done
                    for req in batch:
                        t = asyncio.ensure_future(self._one(req))
                        t.add_done_callback(_done)
                        tasks[t] = req
                    pull = len(batch) >= room
                    continue
                await wake.wait()
                wake.clear()
                while finished:
                    t = finished.popleft()
                    req = tasks.pop(t)
                    on_response(req, t.result())  # t.result() raises BackendUnavailable
                pull = True
        finally:
            for t in tasks:
                t.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    def _payload(self, req: Request) -> dict[str, Any]:
        sp = req.sampling
        kw: dict[str, Any] = {
            "model": self.model if not req.adapter else req.adapter,  # vLLM serves LoRA adapters by name
            "messages": apply_quirks(req.message_dicts(), self.quirks),
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
        return {**kw, **body}  # extra fields go at the top level of the JSON body (the SDK's extra_body)

    async def _one(self, req: Request) -> Response:
        """One request with its retries. A retryable failure uses one of its `max_retries` (a connection failure
        waits at most down_after_s / 4), except a connection failure while the server looks down
        (`max_consecutive_failures` in a row): then the request probes again every down_after_s / 4 without using
        its budget until the server answers or `_send` declares it down, so a dead server stops the run (exit 2)
        instead of abandoning examples one by one."""
        body = json.dumps(self._payload(req), ensure_ascii=False).encode()
        last: Optional[_Failure] = None
        attempts = used = 0
        t_start = time.monotonic()
        while True:
            attempts += 1
            t0 = time.monotonic()
            try:
                resp = _parse(await self._send(body))
                resp.latency_s = time.monotonic() - t0
                self.stats["successes"] += 1
                return resp
            except _Failure as f:
                last = f
                if f.status is not None:
                    self.stats[f"status_{f.status}"] += 1
                if f.status == 200:
                    self.stats["malformed"] += 1
            if not last.retryable:
                break
            if last.connection and self._consecutive >= self.max_consecutive_failures:
                self.stats["probes"] += 1  # the server looks down: probe again soon, the retry budget untouched
                await asyncio.sleep(self.down_after_s / 4)
                continue
            if used >= self.policy.max_retries:
                break
            self.stats["retries"] += 1
            delay = self.policy.delay(used, last.retry_after, self._rng)
            if last.connection:  # no HTTP answer: retry soon, so that a dead server is recognised in time
                delay = min(delay, self.down_after_s / 4)
            await asyncio.sleep(delay)
            used += 1
        assert last is not None
        self.stats["gave_up"] += 1
        what = f"HTTP {last.status}" if last.status is not None else "no HTTP status"
        msg = (f"openai backend: POST {self._public_url}/chat/completions (model {self.model}) failed after "
               f"{attempts} attempt(s) in {time.monotonic() - t_start:.1f}s; last error: {what}: {last}")
        return Response(error=self._scrub(msg), latency_s=time.monotonic() - t_start)

    async def _send(self, body: bytes) -> HttpReply:
        """One HTTP attempt; while the server is not known to be up, only one attempt at a time probes it."""
        assert self._client is not None and self._cond is not None
        if self._dead:
            raise self._dead
        probe = False
        if not self._alive:
            async with self._cond:
                while not self._alive and self._probing and not self._dead:
                    await self._cond.wait()
                if self._dead:
                    raise self._dead
                if not self._alive:
                    self._probing = probe = True
        try:
            self.stats["attempts"] += 1
            reply = await self._client.post(self._url, body, self._headers)
        except ConnectFailure as e:
            self._alive = False
            self._consecutive += 1
            self.stats["connection_errors"] += 1
            self.stats["max_consecutive"] = max(self.stats["max_consecutive"], self._consecutive)
            silent = time.monotonic() - self._last_answer
            if self._consecutive >= self.max_consecutive_failures and silent >= self.down_after_s:
                self._dead = BackendUnavailable(
                    f"openai backend: server down: no answer from {self._public_url} for {silent:.1f}s, "
                    f"{self._consecutive} connection attempts in a row failed (last: {self._scrub(str(e))}); "
                    "start the server there or fix model.backend.base_url")
                raise self._dead from None
            raise _Failure(self._scrub(f"connection error: {e}"), retryable=True, connection=True) from None
        except ReadTimeout as e:
            self.stats["timeouts"] += 1
            raise _Failure(f"timed out after {self.timeout_s:g}s ({e})", retryable=True) from None
        except TransportError as e:
            raise _Failure(self._scrub(str(e)), retryable=False) from None
        else:
            now = time.monotonic()
            if self._consecutive:
                self.stats["max_silence_s"] = max(self.stats["max_silence_s"], round(now - self._last_answer, 3))
            self._consecutive = 0
            self._last_answer = now
            await self._on_connect()
        finally:
            if probe:
                async with self._cond:
                    self._probing = False
                    self._cond.notify_all()
        if reply.status in REFUSED_STATUSES:  # one refusal may be that request's; a run of them is the config
            self._refused += 1
            if self._dead is None and self._refused >= self.max_consecutive_failures:
                where = (f"check model.backend.model ('{self.model}': the served model's name) and the path of "
                         "model.backend.base_url" if reply.status == 404 else
                         f"check the key in ${self.api_key_env} (model.backend.api_key_env)" if self.api_key_env else
                         "the server wants an API key: export it and name the variable in model.backend.api_key_env")
                self._dead = BackendUnavailable(
                    f"openai backend: {self._public_url} refused {self._refused} requests in a row (HTTP "
                    f"{reply.status}: {self._scrub(_error_text(reply))}); {where}")
            if self._dead is not None:  # the first reason given stays the one reported
                raise self._dead
        else:
            self._refused = 0
        if reply.status != 200:
            raise _Failure(self._scrub(_error_text(reply)), retryable=retryable_status(reply.status),
                           status=reply.status, retry_after=parse_retry_after(reply.headers))
        return reply

    async def _on_connect(self) -> None:
        """A connection was made or an answer came back: let every waiting attempt go."""
        if not self._alive and self._cond is not None:
            async with self._cond:
                self._alive = True
                self._cond.notify_all()

    def _scrub(self, text: str) -> str:
        """Remove the API key, URL password and query values from any text that might be recorded (some servers
        echo them in errors; transport errors quote the request URL)."""
        text = text.replace(self._url, self._public_url + "/chat/completions")
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def close(self) -> None:
        """Close the HTTP connections and the event loop."""
        if self._loop.is_closed():
            return
        with self._call_lock:
            try:
                if self._client is not None:
                    if _loop_running_here():
                        _run_in_thread(lambda: self._loop.run_until_complete(self._client.aclose()))
                    else:
                        self._loop.run_until_complete(self._client.aclose())
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
            self._client = None
            self._loop.close()

    def __del__(self) -> None:
        try:
            if not self._loop.is_closed() and not self._loop.is_running() and not _loop_running_here():
                self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown; nothing left to release
            pass


#: answers that refuse the credentials (401/403: a wrong or missing key) or the model or path (404: a name the server
#: does not serve): a run of max_consecutive_failures of them stops the run like a dead server
REFUSED_STATUSES = frozenset({401, 403, 404})


def _split_url(url: str):
    """urlsplit(url), or a ValueError naming the key when it is not an http(s) URL with a host."""
    try:
        u = urlsplit(url)
        u.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as e:
        raise ValueError(f"model.backend.base_url {redact_url(url)!r} is not a valid URL ({e})") from None
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"model.backend.base_url {redact_url(url)!r} is not an http(s) URL with a host, "
                         "e.g. http://127.0.0.1:8000/v1")
    return u


def _loop_running_here() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _run_in_thread(fn: Callable[[], Any]) -> Any:
    """Run fn in a helper thread and wait for it (for callers whose thread already runs an event loop)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box["error"] = e

    t = threading.Thread(target=target, name="recbench-openai")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _error_text(reply: HttpReply) -> str:
    """The server's error message from an error answer (JSON `error.message`, else the body's start)."""
    try:
        data = json.loads(reply.body)
        err = data.get("error", data) if isinstance(data, dict) else data
        msg = err.get("message", err) if isinstance(err, dict) else err
    except ValueError:
        msg = reply.body.decode("utf-8", "replace")
    return _short(str(msg))


def _parse(reply: HttpReply) -> Response:
    """A Response from a 200 answer's JSON body. A truncated or malformed body, a body without choices and an
    empty or null answer (base.empty_answer) are retryable failures: never a Response, so never cached."""
    try:
        data = json.loads(reply.body)
        choices = data["choices"]
        if not choices:
            raise IndexError("no choices in the response")
        ch = choices[0]
        text = ch["message"].get("content")
        finish = ch.get("finish_reason") or "stop"
        usage = data.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        raise _Failure(f"malformed response body: {type(e).__name__}: {_short(str(e))}", retryable=True,
                       status=200) from None
    problem = empty_answer(text, finish)
    if problem:
        raise _Failure(f"{problem} in a 200 answer", retryable=True, status=200)
    return Response(
        text=text or "",
        finish_reason=finish,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        logprobs=_logprobs(ch),
    )


def _short(s: str, n: int = 300) -> str:
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[:n] + "..."


def _logprobs(choice: dict) -> Optional[list[dict[str, Any]]]:
    """[{token, logprob, top: {token: logprob}}] per generated token, the same shape the vllm backend returns."""
    content = (choice.get("logprobs") or {}).get("content")
    if not content:
        return None
    return [{"token": t["token"], "logprob": t["logprob"],
             "top": {x["token"]: x["logprob"] for x in (t.get("top_logprobs") or [])}} for t in content]
