"""OpenAI-compatible backend (vLLM serve, llama.cpp server, hosted APIs): a window of requests in flight, retries,
one server or several of the same model (each request to the one with the fewest in flight; failing ones drained).

The HTTP client is a plain keep-alive pool (`recbench.backends.transport`: aiohttp, else httpx); the `openai`
SDK is not used, because its per-request CPU cost was several times the latency of a local server
(benchmarks/bench_openai_client.py measures both).

Long because the request window, retry and backoff policy, the server-down rule (per server), routing between
servers, constraint dialects (vLLM, OpenAI) and redaction of secrets share one event loop's state; each is small, but
they are one protocol.
"""
from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import logging
import os
import random
import threading
import time
from collections import Counter, deque
from typing import Any, Callable, Optional, Sequence

from recbench.api.config import OpenAIBackendConf as Conf
from recbench.api.types import Request, Response
from recbench.backends.base import Backend, BackendUnavailable, empty_answer
from recbench.backends.endpoints import (
    Endpoint,
    check_served,
    is_hosted,
    server_identity,
    split_base_urls,
    split_url,
)
from recbench.backends.quirks import apply_quirks, check_quirks
from recbench.backends.retry import RetryPolicy, parse_retry_after, retryable_status
from recbench.backends.transport import (
    ConnectFailure,
    HttpReply,
    ReadTimeout,
    TransportError,
    make_transport,
)
from recbench.backends.transport import available as transport_available
from recbench.store.redact import redact_url

log = logging.getLogger(__name__)

#: how constraints travel: "vllm" (the `structured_outputs` request field: choice, json, regex), "openai"
#: (standard `response_format` json_schema; choice/regex are not enforced, counted), "none" (never sent)
CONSTRAINT_MODES = ("vllm", "openai", "none")


class _Failure(Exception):
    """One failed attempt: retryable or not, with the HTTP status and Retry-After when there was one."""

    def __init__(self, message: str, *, retryable: bool, status: Optional[int] = None,
                 retry_after: Optional[float] = None, connection: bool = False):
        super().__init__(message)
        self.retryable, self.status, self.retry_after = retryable, status, retry_after
        self.connection = connection  # no HTTP answer at all (refused, reset, dropped): judged by the down rule


class OpenAIBackend(Backend):
    """Chat completions against any OpenAI-compatible `base_url` (one URL or a list of servers of the same model),
    `concurrency` requests in flight on one event loop."""

    kind = "openai"

    def __init__(
        self,
        model: str,
        base_url: Any = Conf.base_url,
        api_key_env: Optional[str] = Conf.api_key_env,
        name: Optional[str] = Conf.name,
        revision: Optional[str] = Conf.revision,
        concurrency: int = Conf.concurrency,
        timeout_s: float = Conf.timeout_s,
        max_retries: int = Conf.max_retries,
        backoff_initial_s: float = Conf.backoff_initial_s,
        backoff_max_s: float = Conf.backoff_max_s,
        backoff_jitter: float = Conf.backoff_jitter,
        max_retry_after_s: float = Conf.max_retry_after_s,
        constraints: str = "vllm",
        extra_body: Optional[dict[str, Any]] = None,
        batch_size: Optional[int] = Conf.batch_size,
        seed_param: bool = Conf.seed_param,
        max_consecutive_failures: int = Conf.max_consecutive_failures,
        down_after_s: float = Conf.down_after_s,
        transport: str = "auto",
        quirks: Optional[Sequence[str]] = Conf.quirks,  # type: ignore[assignment]
    ):
        self.quirks = check_quirks(quirks)
        if int(max_consecutive_failures) < 1:
            raise ValueError(f"max_consecutive_failures must be >= 1, got {max_consecutive_failures!r} "
                             "(model.backend.max_consecutive_failures)")
        if not float(down_after_s) > 0:
            raise ValueError(f"down_after_s must be > 0 seconds, got {down_after_s!r} (model.backend.down_after_s)")
        self.model = model
        self.name = name or model
        self.base_urls = self.check_config(base_url=base_url, api_key_env=api_key_env, constraints=constraints)
        self.base_url = ",".join(self.base_urls)
        self.api_key_env = api_key_env
        self._endpoints = [Endpoint(u, _api_key(api_key_env, u)) for u in self.base_urls]
        self._secrets = [s for ep in self._endpoints for s in ep.secrets]
        self._public_url = ",".join(ep.public for ep in self._endpoints)
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
        self._cond: Optional[asyncio.Condition] = None
        self._dead: Optional[BackendUnavailable] = None
        self._served: dict[str, list[str]] = {}  # endpoint -> the models its /v1/models listed (checked ones only)
        self._models_asked = False

    @staticmethod
    def check_config(base_url: Any = None, api_key_env: Optional[str] = None, constraints: str = "vllm",
                     **_: Any) -> list[str]:
        """The config errors construction refuses (a base URL that is not http(s) with a host, an empty or repeating
        list, user info together with api_key_env, an unknown constraints mode), without building anything:
        ValueError naming the key. Returns the endpoints' URLs."""
        if constraints not in CONSTRAINT_MODES:
            raise ValueError(f"constraints must be one of {CONSTRAINT_MODES}, got {constraints!r}")
        urls = split_base_urls(base_url)
        for url in urls:
            if split_url(url).username is not None and api_key_env:
                raise ValueError(f"{redact_url(url)} carries user info and model.backend.api_key_env is set too: give "
                                 "the credentials one way (the key in the environment variable)")
        return urls

    @staticmethod
    def check_endpoints(base_url: Any = None, model: str = "", api_key_env: Optional[str] = None,
                        down_after_s: float = Conf.down_after_s, **_: Any) -> dict[str, list[str]]:
        """With two or more endpoints, ask each one's GET /models (in parallel, down_after_s each) and refuse, with
        one ConfigError line naming the endpoint and both model names, one that does not list `model`. An endpoint
        that does not answer, or has no /models, is not checked here (a down one is probed during the run).
        Returns {endpoint (masked): served model ids} of those that answered."""
        urls = split_base_urls(base_url)
        if len(urls) < 2:
            return {}
        eps = [Endpoint(u, os.environ.get(api_key_env or "", "") or "EMPTY") for u in urls]
        return check_served(eps, model, float(down_after_s))

    # ---- identity and records ---------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        """Kind, name, served model id, optional revision; the server only for hosted APIs (scheme+host+path). A
        self-run server's URL is not part of it: one server or several of the same model share cached answers."""
        ident = {"kind": self.kind, "name": self.name, "model": self.model, "revision": self.revision}
        hosted = sorted({server_identity(u) for u in self.base_urls if is_hosted(u)})
        if hosted:  # a hosted API's model names are its own: its answers are kept apart from another's
            ident["server"] = hosted[0] if len(hosted) == 1 else hosted
        if self.quirks:  # the server sees rewritten messages: keep their answers apart in the cache
            ident["quirks"] = list(self.quirks)
        return ident

    def effective_params(self) -> dict[str, Any]:
        """Endpoint(s), concurrency, timeout, retry policy, constraint mode, extra body fields (never the key)."""
        urls = [ep.public for ep in self._endpoints]
        out = {"base_url": urls[0] if len(urls) == 1 else urls, "api_key_env": self.api_key_env,
               "concurrency": self.concurrency, "timeout_s": self.timeout_s, "retry": dataclasses.asdict(self.policy),
               "constraints": self.constraints, "extra_body": self.extra_body, "batch_size": self.batch_size,
               "max_consecutive_failures": self.max_consecutive_failures, "down_after_s": self.down_after_s,
               "transport": self.transport}
        if len(urls) > 1:  # what each server listed at the start, and how many answers it gave
            out["endpoints"] = [{"base_url": ep.public, "served": self._served.get(ep.public), "answers": ep.answered}
                                for ep in self._endpoints]
        return out

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
        is cancelled and the exception propagates. Each attempt goes to the endpoint with the fewest in flight among
        those that are up. Raises BackendUnavailable when every endpoint is down: at least
        `max_consecutive_failures` connection failures in a row and no HTTP answer for `down_after_s` seconds at
        each (no request is sent after that; see `_send`); ConfigError (before any request) when an endpoint of
        several does not serve the model.
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
            if len(self._endpoints) > 1 and not self._models_asked:  # every server of a list serves the model
                self._served.update(check_served(self._endpoints, self.model, self.down_after_s))
                self._models_asked = True  # once: one down now is checked by its 404s if it serves another name
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
        if self._cond is None:
            self._cond = asyncio.Condition()
        for ep in self._endpoints:
            if ep.client is None:  # one keep-alive pool per server; its connect events mark that server up
                ep.client = make_transport(self.transport, self.concurrency, self.timeout_s,
                                           functools.partial(self._on_connect, ep))
        self._dead = None
        start = time.monotonic()
        for ep in self._endpoints:  # a new stream gives every server a fresh down_after_s
            ep.consecutive = ep.refused = 0
            ep.down = False
            ep.last_answer = start
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
        """One request with its retries, each attempt at the endpoint `_acquire` picks. A retryable failure uses one
        of its `max_retries` (a connection failure waits at most down_after_s / 4), except a connection failure at an
        endpoint that looks down (`max_consecutive_failures` in a row), the request's first connection failure at an
        endpoint while another is not known to be down, and any failure of a probe sent to a drained endpoint while
        others were up: those go again at once
        where a server is up, or, with none up, probe again every down_after_s / 4, without using the budget, until
        a server answers or `_send` declares every one down, so dead servers stop the run (exit 2) instead of
        abandoning examples one by one."""
        body = json.dumps(self._payload(req), ensure_ascii=False).encode()
        last: Optional[_Failure] = None
        attempts = used = 0
        t_start = time.monotonic()
        where = self._endpoints[0]
        refused_here: set[int] = set()  # endpoints where this request met a connection failure
        while True:
            attempts += 1
            ep, probe, volunteer = await self._acquire()
            where = ep
            t0 = time.monotonic()
            ep.in_flight += 1
            try:
                resp = _parse(await self._send(ep, body, probe))
                resp.latency_s = time.monotonic() - t0
                if len(self._endpoints) > 1:  # which server answered (masked like every URL recbench writes)
                    resp.endpoint = ep.public
                ep.answered += 1
                self.stats["successes"] += 1
                return resp
            except _Failure as f:
                last = f
                if f.status is not None:
                    self.stats[f"status_{f.status}"] += 1
                if f.status == 200:
                    self.stats["malformed"] += 1
            finally:
                ep.in_flight -= 1
            if not last.retryable:
                break
            # a connection failure is free once per server while another server may be up (a request that breaks
            # every connection it is sent on still runs out of retries)
            elsewhere = last.connection and id(ep) not in refused_here and any(
                e is not ep and not e.down for e in self._endpoints)
            if last.connection:
                refused_here.add(id(ep))
            if volunteer or elsewhere or (last.connection and ep.consecutive >= self.max_consecutive_failures):
                # a server that looks down, the first failure here of several servers, or a probe of a drained
                # one: the retry budget untouched
                self.stats["probes"] += 1
                if not self._any_up():
                    await asyncio.sleep(self.down_after_s / 4)
                continue
            if used >= self.policy.max_retries:
                break
            self.stats["retries"] += 1
            delay = self.policy.delay(used, last.retry_after, self._rng)
            if last.connection:  # no HTTP answer: retry soon (elsewhere at once), so a dead server is seen in time
                delay = 0.0 if self._any_up() else min(delay, self.down_after_s / 4)
            await asyncio.sleep(delay)
            used += 1
        assert last is not None
        self.stats["gave_up"] += 1
        what = f"HTTP {last.status}" if last.status is not None else "no HTTP status"
        msg = (f"openai backend: POST {where.public}/chat/completions (model {self.model}) failed after "
               f"{attempts} attempt(s) in {time.monotonic() - t_start:.1f}s; last error: {what}: {last}")
        return Response(error=self._scrub(msg), latency_s=time.monotonic() - t_start)

    def _up(self, ep: Endpoint) -> bool:
        """Connected since its last connection failure, and not answering 5xx to everything."""
        return ep.alive and ep.errors_5xx < self.max_consecutive_failures

    def _any_up(self) -> bool:
        return any(self._up(ep) for ep in self._endpoints)

    async def _acquire(self) -> tuple[Endpoint, bool, bool]:
        """The endpoint for the next attempt, and whether it probes (alone) a server not known to be up, and whether
        it was sent there although another was up. The endpoints that are up, and those whose first connection is
        being made, take attempts by fewest in flight; a drained one (connection failures, or
        max_consecutive_failures 5xx answers in a row) takes one attempt as a probe once its wait has passed
        (down_after_s / 4, doubling per failed probe up to backoff_max_s). With none up, as with one server:
        5xx-answering servers still take attempts, the others one probe at a time each."""
        assert self._cond is not None
        eps = self._endpoints
        async with self._cond:
            while True:
                if self._dead:
                    raise self._dead
                up = [ep for ep in eps if self._up(ep)]
                answering = up or [ep for ep in eps if ep.alive]  # none up: servers answering 5xx still take work
                if answering:
                    now = time.monotonic()
                    for ep in eps:  # a drained server whose wait has passed takes this attempt as its probe
                        if not self._up(ep) and not ep.probing and now >= ep.next_probe and (up or not ep.alive):
                            ep.probing = True
                            return ep, True, bool(up)
                    # a server being connected to for the first time takes its share too (by fewest in flight),
                    # so the first wave is not all sent to whichever server connected first
                    joining = [ep for ep in eps if ep.pending and ep.probing]
                    return min(answering + joining, key=lambda e: e.in_flight), False, False
                idle = [ep for ep in eps if not ep.probing]
                if idle:
                    ep = min(idle, key=lambda e: e.next_probe)  # the one waiting longest for its probe
                    ep.probing = True
                    return ep, True, False
                await self._cond.wait()

    def _drain(self, ep: Endpoint, probe: bool) -> None:
        """Schedule the endpoint's next probe (it just failed): down_after_s / 4, doubling per failed probe."""
        ep.failed_probes = ep.failed_probes + 1 if probe else 0
        wait = min(max(self.policy.max_s, self.down_after_s / 4), self.down_after_s / 4 * 2 ** ep.failed_probes)
        ep.next_probe = time.monotonic() + wait

    async def _send(self, ep: Endpoint, body: bytes, probe: bool) -> HttpReply:
        """One HTTP attempt at `ep` (a probe holds its `probing` flag until it returns)."""
        assert ep.client is not None and self._cond is not None
        try:
            if self._dead:
                raise self._dead
            self.stats["attempts"] += 1
            reply = await ep.client.post(ep.url, body, ep.headers)
        except ConnectFailure as e:
            ep.alive = ep.pending = False
            ep.consecutive += 1
            ep.last_error = self._scrub(str(e))
            self._drain(ep, probe)
            self.stats["connection_errors"] += 1
            self.stats["max_consecutive"] = max(self.stats["max_consecutive"], ep.consecutive)
            silent = time.monotonic() - ep.last_answer
            if ep.consecutive >= self.max_consecutive_failures and silent >= self.down_after_s:
                if not ep.down and self._any_up():
                    log.warning("openai backend: %s is down (no answer for %.1fs, %d connection attempts in a row "
                                "failed); the other servers take its requests, it is probed again later", ep.public,
                                silent, ep.consecutive)
                ep.down = True
                if all(e.down for e in self._endpoints):
                    self._dead = BackendUnavailable(self._down_message())
                    raise self._dead from None
            raise _Failure(self._scrub(f"connection error at {ep.public}: {e}"), retryable=True,
                           connection=True) from None
        except ReadTimeout as e:
            self.stats["timeouts"] += 1
            raise _Failure(f"timed out after {self.timeout_s:g}s at {ep.public} ({e})", retryable=True) from None
        except TransportError as e:
            raise _Failure(self._scrub(str(e)), retryable=False) from None
        else:
            now = time.monotonic()
            if ep.consecutive:
                self.stats["max_silence_s"] = max(self.stats["max_silence_s"], round(now - ep.last_answer, 3))
            ep.consecutive = 0
            ep.down = False
            ep.last_answer = now
            await self._on_connect(ep)
        finally:
            if probe:
                async with self._cond:
                    ep.probing = False
                    self._cond.notify_all()
        if reply.status == 200:
            ep.errors_5xx = ep.failed_probes = 0
        elif reply.status >= 500:
            ep.errors_5xx += 1
            if ep.errors_5xx >= self.max_consecutive_failures:  # drained: others take the work, probed later
                self._drain(ep, probe)
        if reply.status in REFUSED_STATUSES:  # one refusal may be that request's; a run of them is the config
            ep.refused += 1
            if self._dead is None and ep.refused >= self.max_consecutive_failures:
                where = (f"check model.backend.model ('{self.model}': the served model's name) and the path of "
                         "model.backend.base_url" if reply.status == 404 else
                         f"check the key in ${self.api_key_env} (model.backend.api_key_env)" if self.api_key_env else
                         "the server wants an API key: export it and name the variable in model.backend.api_key_env")
                self._dead = BackendUnavailable(
                    f"openai backend: {ep.public} refused {ep.refused} requests in a row (HTTP "
                    f"{reply.status}: {self._scrub(_error_text(reply))}); {where}")
            if self._dead is not None:  # the first reason given stays the one reported
                raise self._dead
        else:
            ep.refused = 0
        if reply.status != 200:
            raise _Failure(self._scrub(_error_text(reply)), retryable=retryable_status(reply.status),
                           status=reply.status, retry_after=parse_retry_after(reply.headers))
        return reply

    def _down_message(self) -> str:
        """The one line of BackendUnavailable when every endpoint is down."""
        now = time.monotonic()
        if len(self._endpoints) == 1:
            ep = self._endpoints[0]
            return (f"openai backend: server down: no answer from {ep.public} for {now - ep.last_answer:.1f}s, "
                    f"{ep.consecutive} connection attempts in a row failed (last: {ep.last_error}); start the server "
                    "there or fix model.backend.base_url")
        each = ", ".join(f"{ep.public} for {now - ep.last_answer:.1f}s ({ep.consecutive} connection attempts in a row "
                         "failed)" for ep in self._endpoints)
        last = self._endpoints[0].last_error
        return (f"openai backend: every server down: no answer from {each}; last error: {last}; start the servers or "
                "fix model.backend.base_url")

    async def _on_connect(self, ep: Endpoint) -> None:
        """A connection to `ep` was made or an answer came back: let every waiting attempt go."""
        ep.pending = False
        if not ep.alive and self._cond is not None:
            async with self._cond:
                ep.alive = True
                self._cond.notify_all()

    def _scrub(self, text: str) -> str:
        """Remove the API key, URL password and query values from any text that might be recorded (some servers
        echo them in errors; transport errors quote the request URL)."""
        for ep in self._endpoints:
            text = text.replace(ep.url, ep.public + "/chat/completions")
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def close(self) -> None:
        """Close the HTTP connections and the event loop."""
        if self._loop.is_closed():
            return
        with self._call_lock:
            clients = [ep.client for ep in self._endpoints if ep.client is not None]

            async def _close_all() -> None:
                for c in clients:
                    await c.aclose()

            try:
                if clients:
                    if _loop_running_here():
                        _run_in_thread(lambda: self._loop.run_until_complete(_close_all()))
                    else:
                        self._loop.run_until_complete(_close_all())
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
            for ep in self._endpoints:
                ep.client = None
            self._loop.close()

    def __del__(self) -> None:
        try:
            if not self._loop.is_closed() and not self._loop.is_running() and not _loop_running_here():
                self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown; nothing left to release
            pass


def _api_key(api_key_env: Optional[str], base_url: str) -> str:
    """The key from the environment variable api_key_env ("EMPTY" without one: local servers accept any key)."""
    if not api_key_env:
        return "EMPTY"  # never read from config files
    key = os.environ.get(api_key_env)
    if not key:
        raise RuntimeError(f"openai backend: environment variable {api_key_env} (model.backend.api_key_env) "
                           f"is not set; export the API key for {redact_url(base_url)} there")
    return key


#: answers that refuse the credentials (401/403: a wrong or missing key) or the model or path (404: a name the server
#: does not serve): a run of max_consecutive_failures of them stops the run like a dead server
REFUSED_STATUSES = frozenset({401, 403, 404})


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
