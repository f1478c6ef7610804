"""OpenAI-compatible backend (vLLM serve, llama.cpp server, hosted APIs): a window of requests in flight, retries,
one server or several of the same model (each request to the one with the fewest in flight; failing ones drained).

The HTTP client is a plain keep-alive pool (`recbench.backends.transport`: aiohttp, else httpx); the `openai`
SDK is not used, because its per-request CPU cost was several times the latency of a local server
(benchmarks/bench_openai_client.py measures both). The wire format is in `openai_wire`; each request's attempts
(retries, the choice of server, the server-down rule) in `openai_routing`; this module holds the configuration and
the window of requests in flight.
"""
from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import random
import threading
import time
from collections import Counter, deque
from typing import Any, Callable, Optional, Sequence

from recbench.backends.openai_conf import OpenAIBackendConf as Conf
from recbench.api.types import Request, Response
from recbench.backends.base import Backend, BackendUnavailable
from recbench.backends.endpoints import Endpoint, check_served, is_hosted, server_identity, split_base_urls, split_url
from recbench.backends.openai_routing import EndpointRouting
from recbench.backends.openai_wire import (  # noqa: F401 - _Failure, _parse: the names callers use
    CONSTRAINT_MODES, _api_key, _Failure, _loop_running_here, _parse, _run_in_thread)
from recbench.backends.quirks import check_quirks
from recbench.backends.retry import RetryPolicy
from recbench.backends.transport import available as transport_available
from recbench.backends.transport import event_loop_available, new_event_loop
from recbench.backends.transport import make_transport
from recbench.store.redact import redact_url

log = logging.getLogger(__name__)

def _check_limits(max_consecutive_failures: Any, down_after_s: Any, max_response_bytes: Any) -> None:
    """ValueError naming the key for a failure count < 1, a down_after_s <= 0 or a max_response_bytes < 1."""
    if int(max_consecutive_failures) < 1:
        raise ValueError(f"max_consecutive_failures must be >= 1, got {max_consecutive_failures!r} "
                         "(model.backend.max_consecutive_failures)")
    if not float(down_after_s) > 0:
        raise ValueError(f"down_after_s must be > 0 seconds, got {down_after_s!r} (model.backend.down_after_s)")
    if not isinstance(max_response_bytes, int) or isinstance(max_response_bytes, bool) or max_response_bytes < 1:
        raise ValueError(f"max_response_bytes must be a whole number of bytes >= 1, got {max_response_bytes!r} "
                         "(model.backend.max_response_bytes)")


class OpenAIBackend(EndpointRouting, Backend):
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
        http_process: bool = False,
        event_loop: str = "auto",
        max_response_bytes: int = Conf.max_response_bytes,
    ):
        self._init_args = {k: v for k, v in locals().items() if k not in ("self", "__class__")}  # for http_process
        self.quirks = check_quirks(quirks)
        _check_limits(max_consecutive_failures, down_after_s, max_response_bytes)
        self.max_response_bytes = int(max_response_bytes)
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
        self.seed_param, self.max_consecutive_failures = seed_param, int(max_consecutive_failures)
        self.down_after_s = float(down_after_s)
        self.transport, self.http_process = transport_available(transport, self.base_urls), bool(http_process)
        self.event_loop = event_loop_available(event_loop)  # uvloop when installed: less CPU per request
        self.batch_size = batch_size or max(16, self.concurrency * 4)
        self.stats: Counter = Counter()  # attempts, retries, successes, gave_up, status_<code>, timeouts, ...
        self._rng, self._warned = random.Random(0), set()
        self._loop = new_event_loop(self.event_loop)  # runs only inside stream()/generate()/close(), in the caller's thread
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
               "transport": self.transport, "http_process": self.http_process,
               "max_response_bytes": self.max_response_bytes}
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
            if running is None and self.http_process:  # sending and reading answers on a second core
                from recbench.backends.http_process import stream_in_child

                stream_in_child(self, next_requests, on_response, window=self.concurrency)
            elif running is None:
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
                                           functools.partial(self._on_connect, ep), self.max_response_bytes)
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
