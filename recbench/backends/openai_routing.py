"""Each request of the openai backend, attempt by attempt: its retries (what uses the retry budget and what does not),
which server takes each attempt (fewest requests in flight among the servers that are up; drained servers probed
again after a doubling wait), and when servers are down (`max_consecutive_failures` connection failures in a row and
`down_after_s` without an answer); the run stops (BackendUnavailable) when every one is down or refuses the requests'
credentials or model."""
from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import Counter
from typing import Optional

from recbench.api.types import Request, Response
from recbench.backends.base import BackendUnavailable
from recbench.backends.endpoints import Endpoint
from recbench.backends.openai_wire import REFUSED_STATUSES, _error_text, _Failure, _parse, build_payload, encode_payload
from recbench.backends.retry import RetryPolicy, parse_retry_after, retryable_status
from recbench.backends.transport import (
    ConnectFailure, HttpReply, NotHttp, ReadTimeout, ResponseTooLarge, TransportError)

log = logging.getLogger("recbench.backends.openai")


class EndpointRouting:
    """A request's attempts and the endpoint state machine of OpenAIBackend (a mixin: the backend holds the state it
    reads)."""

    _endpoints: list[Endpoint]
    _secrets: list[str]
    _cond: Optional[asyncio.Condition]
    _dead: Optional[BackendUnavailable]
    stats: Counter
    policy: RetryPolicy
    model: str
    api_key_env: Optional[str]
    timeout_s: float
    max_consecutive_failures: int
    down_after_s: float
    _rng: random.Random

    async def _one(self, req: Request) -> Response:
        """One request with its retries, each attempt at the endpoint `_acquire` picks. A retryable failure uses one
        of its `max_retries` (a connection failure waits at most down_after_s / 4), except a connection failure at an
        endpoint that looks down (`max_consecutive_failures` in a row), the request's first connection failure at an
        endpoint while another is not known to be down, and any failure of a probe sent to a drained endpoint while
        others were up: those go again at once
        where a server is up, or, with none up, probe again every down_after_s / 4, without using the budget, until
        a server answers or `_send` declares every one down, so dead servers stop the run (exit 2) instead of
        abandoning examples one by one."""
        body = encode_payload(build_payload(self, req))
        last: Optional[_Failure] = None
        attempts = used = 0
        t_start = time.monotonic()
        where = self._endpoints[0]
        refused_here: set[int] = set()  # endpoints where this request met a connection failure
        while True:
            attempts += 1
            ep, probe, volunteer = await self._acquire()
            where = ep
            try:
                return await self._attempt(ep, body, probe)
            except _Failure as f:
                last = f
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

    async def _attempt(self, ep: Endpoint, body: bytes, probe: bool) -> Response:
        """One attempt at `ep`: the parsed answer, or _Failure (counted by its HTTP status)."""
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
            if f.status is not None:
                self.stats[f"status_{f.status}"] += 1
            if f.status == 200:
                self.stats["malformed"] += 1
            raise
        finally:
            ep.in_flight -= 1

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
        if self._dead is None and all(self._up(ep) for ep in eps):  # every server up: no probe due, nothing to wait for
            return min(eps, key=lambda e: e.in_flight), False, False
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
            raise self._connection_failed(ep, e, probe) from None
        except ResponseTooLarge as e:  # the same request would get the same answer: not retried
            raise _Failure(self._scrub(f"the answer from {ep.public} {e.how} {e.size:,} bytes, over "
                                       f"model.backend.max_response_bytes={e.limit}; not read further. Raise that "
                                       "setting if the server's answers are that large"),
                           retryable=False, status=e.status) from None
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
        return self._judge(ep, reply, probe)

    def _connection_failed(self, ep: Endpoint, e: ConnectFailure, probe: bool) -> _Failure:
        """Count a connection failure at `ep` (its drain, the down rule) and return the attempt's _Failure; raise
        BackendUnavailable when every endpoint is down, or when `ep` answered something that is not HTTP
        `max_consecutive_failures` times in a row (another protocol at that address: no retry will help)."""
        ep.alive = ep.pending = False
        ep.consecutive += 1
        ep.last_error = self._scrub(str(e))
        self._drain(ep, probe)
        self.stats["connection_errors"] += 1
        self.stats["max_consecutive"] = max(self.stats["max_consecutive"], ep.consecutive)
        if isinstance(e, NotHttp) and ep.consecutive >= self.max_consecutive_failures:
            if self._dead is None:  # the first reason given stays the one reported
                self._dead = BackendUnavailable(self._scrub(
                    f"openai backend: the server at {ep.public} answered something that is not HTTP: {e.first} "
                    f"({ep.consecutive} answers in a row); check model.backend.base_url: its host and port must be an "
                    "OpenAI-compatible HTTP server's (https:// for one that speaks TLS)"))
            raise self._dead
        silent = time.monotonic() - ep.last_answer
        if ep.consecutive >= self.max_consecutive_failures and silent >= self.down_after_s:
            if not ep.down and self._any_up():
                log.warning("openai backend: %s is down (no answer for %.1fs, %d connection attempts in a row "
                            "failed); the other servers take its requests, it is probed again later", ep.public,
                            silent, ep.consecutive)
            ep.down = True
            if all(e.down for e in self._endpoints):
                self._dead = BackendUnavailable(self._down_message())
                raise self._dead
        return _Failure(self._scrub(f"connection error at {ep.public}: {e}"), retryable=True, connection=True)

    def _judge(self, ep: Endpoint, reply: HttpReply, probe: bool) -> HttpReply:
        """An HTTP answer: a 200 is returned; 5xx answers in a row drain the server; a run of refusals (401, 403,
        404) stops the run; any other status is a _Failure (retryable as the status says)."""
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
