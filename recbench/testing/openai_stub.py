"""A fault-injecting OpenAI-compatible stub server (stdlib, loopback only) for tests and benchmarks.

In process (tests that script faults with a function)::

    with StubServer(latency_s=0.2, schedule=lambda key, attempt: "429" if attempt == 1 else None) as stub:
        ... stub.base_url, stub.answered, stub.attempts ...

In its own process (benchmarks that kill and restart recbench; counts stay readable over HTTP)::

    with start_stub_process(latency_s=0.2, straggler_share=0.05) as stub:
        ... stub.base_url, stub.stats()["paid"] ...

or from a shell: ``python -m recbench.testing.openai_stub --latency 0.2 --port 8000``.

Answers are a deterministic function of the prompt (see `default_answer`), so runs are reproducible.
`capacity` bounds the requests served at once (the rest wait, as on a busy GPU); `served_model` names the one
model `GET /v1/models` lists, and a chat request for another name gets vLLM's 404 (without it, /v1/models is a 404
and any name is answered). `GET /stats` returns the counters (``paid`` = chat completions answered with 200 and a
full body, i.e. the requests a hosted API would bill); `POST /stats/reset` zeroes them.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from recbench.testing.stub_http import (  # noqa: F401 - the helpers tests import from here
    _Server,
    bound_socket,
    free_port,
    get_stats,
    handler_for,
    refused_url,
    reset_stats,
)
from recbench.testing.stub_judges import ANSWERS
from recbench.testing.stub_process import StubProcess, start_stub_process  # noqa: F401 - imported from here

#: faults a schedule may return: 429 (with Retry-After), 500, slow (answers after `slow_s`, past a client's
#: timeout), truncated (200 with half a JSON body), reset (connection closed without an answer), null / empty
#: (200 whose message.content is null / ""), nochoices (200 with "choices": []), 401echo (a 401 that echoes the
#: key it received, as some servers do), 404model (vLLM's answer to a model name it does not serve)
FAULTS = ("429", "500", "slow", "truncated")
#: every fault a flaky server shows, each retryable: what "30% faults of every kind" means in the tests
FLAKY_FAULTS = (*FAULTS, "reset", "null", "empty", "nochoices")
ALL_FAULTS = (*FLAKY_FAULTS, "401echo", "404model")
LOOPBACK = ("127.0.0.1", "::1", "localhost")
#: how the stub serves: a thread per connection (stdlib only), or one asyncio loop with httptools' parser (about 30%
#: less CPU; for benchmarks, where the stub shares the cores with the client it measures)
ENGINES = ("threads", "asyncio")

Schedule = Callable[[str, int], Optional[str]]


@dataclass
class Reply:
    """What the stub sends one request: after `wait_s`, `status` with a JSON `payload` and extra `headers`, or (reset)
    the connection closed without an answer; `paid` counts it as a full answer once it goes out."""

    status: int
    payload: bytes | str
    headers: dict[str, str] = field(default_factory=dict)
    wait_s: float = 0.0
    reset: bool = False
    paid: bool = False

    def body(self) -> bytes:
        """The payload as bytes."""
        return self.payload.encode() if isinstance(self.payload, str) else self.payload


# ---- deterministic answers ---------------------------------------------------------------------------
def _user_averages(text: str) -> list[tuple[str, float]]:
    """(label, stated average rating) of each user block in a PerRecBench prompt, in prompt order."""
    return [(lab, float(avg)) for lab, avg in
            re.findall(r"^\[?(User [A-Z])\]?:\s*\n- Average rating: ([0-9.]+)", text, flags=re.M)]


def listwise_answer(messages: list[dict]) -> str:
    """Deterministic 'model': rank the prompt's user labels by their stated average rating, lowest first."""
    blocks = _user_averages(messages[-1]["content"])
    if not blocks:
        return "no users found"
    ranked = [lab for lab, avg in sorted(blocks, key=lambda b: (b[1], b[0]))]
    return json.dumps({"ranking": ranked})


def default_answer(messages: list[dict]) -> str:
    """A parseable, deterministic answer for PerRecBench prompts (listwise, pairwise, pointwise), else a hash."""
    text = messages[-1]["content"] if messages else ""
    users = _user_averages(text)
    if '{"ranking"' in text:
        return listwise_answer(messages)
    if '"[User A]" or "[User B]"' in text and len(users) == 2:
        (_, a), (_, b) = users  # the user with the lower average "likes it more": consistent in both orders
        return "[User A]" if (a, 0) < (b, 1) else "[User B]"
    if "single number between 1 and 5" in text and users:
        return f"{min(5, max(1, round(users[0][1] + 0.5)))}"
    if users:
        return listwise_answer(messages)
    return "answer " + request_key(messages)[:12]


def request_key(messages: list[dict]) -> str:
    """Stable id of a chat request (its messages)."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()


def _unit(*parts: Any) -> float:
    """A deterministic number in [0, 1) from the parts (hash-based)."""
    h = hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:8]
    return int(h, 16) / 16 ** 8


def rate_schedule(rate: float, faults: tuple[str, ...] = FAULTS, max_faulty_attempts: int = 2, seed: int = 0) -> Schedule:
    """Deterministic schedule: a request is faulty with probability `rate` on each of its first attempts (hash-based)."""

    def schedule(key: str, attempt: int) -> Optional[str]:
        if attempt > max_faulty_attempts:
            return None
        h = int(hashlib.sha256(f"{seed}:{key}:{attempt}".encode()).hexdigest()[:8], 16)
        if (h % 10_000) / 10_000 >= rate:
            return None
        return faults[(h // 10_000) % len(faults)]

    return schedule


# ---- the server --------------------------------------------------------------------------------------
class StubServer:
    """Answers /v1/chat/completions with answer_fn after `latency_s`, injecting faults from `schedule(key, attempt)`.

    A share `straggler_share` of requests (chosen by prompt hash, so the same ones every run) takes
    `straggler_s` instead of `latency_s`. schedule returns None (answer normally) or one of ALL_FAULTS.
    At most `capacity` chat requests are served at once (None: no limit); the others wait for a slot before their
    latency starts. `served_model`: the model /v1/models lists and the only name chat requests may ask for.
    """

    def __init__(self, answer_fn: Callable[[list[dict]], str] = default_answer, schedule: Optional[Schedule] = None,
                 *, latency_s: float = 0.0, straggler_share: float = 0.0, straggler_s: float = 3.0,
                 retry_after_s: float = 0.2, slow_s: float = 3.0, expected_key: Optional[str] = None,
                 echo_key_in_401: bool = False, capacity: Optional[int] = None, served_model: Optional[str] = None,
                 host: str = "127.0.0.1", port: int = 0, engine: str = "threads"):
        if host not in LOOPBACK:
            raise ValueError(f"StubServer: host {host!r} is not a loopback address; use one of {LOOPBACK}")
        if engine not in ENGINES:
            raise ValueError(f"StubServer: engine {engine!r} is not one of {ENGINES}")
        self.answer_fn = answer_fn
        self.schedule = schedule or (lambda key, attempt: None)
        self.latency_s, self.straggler_share, self.straggler_s = latency_s, straggler_share, straggler_s
        self.retry_after_s = retry_after_s
        self.slow_s = slow_s
        self.expected_key = expected_key
        self.echo_key_in_401 = echo_key_in_401
        if capacity is not None and int(capacity) < 1:
            raise ValueError(f"StubServer: capacity must be >= 1 or None, got {capacity!r}")
        self.capacity = None if capacity is None else int(capacity)
        self._slots = threading.BoundedSemaphore(self.capacity) if self.capacity else None
        self.served_model = served_model
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.reset()
        self.engine = engine
        if engine == "asyncio":
            from recbench.testing.stub_asyncio import AsyncioEngine  # needs httptools (the dev and openai extras)

            self._aio = AsyncioEngine(self, bound_socket(host, port))
            self.port = self._aio.sock.getsockname()[1]
        else:
            self.httpd = _Server((host, port), handler_for(self))
            self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = None if engine == "asyncio" else threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def reset(self) -> None:
        """Zero every counter."""
        with self._lock:
            self.attempts: dict[str, int] = defaultdict(int)
            self.faults: Counter = Counter()
            self.auth_seen: set[str] = set()
            self.paths: Counter = Counter()  # request path (with its query) of every chat completion received
            self.in_flight = 0  # received and not yet answered (waiting for a slot included)
            self.max_in_flight = 0
            self.serving = 0  # holding one of the `capacity` slots
            self.max_serving = 0
            self.received = self.answered = self.stragglers = 0
            self.first_at: Optional[float] = None  # time.time() when the first chat request arrived (start-up)

    def stats(self) -> dict[str, Any]:
        """Counters as plain JSON: paid (answered in full), received, distinct prompts, faults, max in flight."""
        with self._lock:
            return {"paid": self.answered, "received": self.received, "distinct": len(self.attempts),
                    "faults": dict(self.faults), "stragglers": self.stragglers, "in_flight": self.in_flight,
                    "max_in_flight": self.max_in_flight, "max_serving": self.max_serving, "first_at": self.first_at}

    def models(self) -> tuple[int, dict[str, Any]]:
        """(status, body) of GET /v1/models: the served model as vLLM lists it, or a 404 when none is named."""
        if self.served_model is None:
            return 404, {"error": {"message": "this stub lists no models (start it with served_model)", "code": 404}}
        return 200, {"object": "list", "data": [{"id": self.served_model, "object": "model", "created": 0,
                                                 "owned_by": "recbench-stub", "root": self.served_model,
                                                 "parent": None}]}

    def route(self, method: str, path: str) -> Optional[Reply]:
        """The reply to a request that is not a chat completion (GET /stats, /models or anything else: a health
        check; POST /stats/reset), sent at once and not counted; None for a chat request."""
        route = path.split("?")[0].rstrip("/")
        if method == "GET":
            if route.endswith("/stats"):
                return Reply(200, json.dumps(self.stats()))
            if route.endswith("/models"):
                status, body = self.models()
                return Reply(status, json.dumps(body))
            return Reply(200, b'{"status":"ok"}')
        if route.endswith("/stats/reset"):
            self.reset()
            return Reply(200, b'{"status":"reset"}')
        return None

    def latency_for(self, key: str) -> float:
        """This prompt's latency: straggler_s for the hash-chosen share of prompts, latency_s otherwise."""
        if self.straggler_share > 0 and _unit("straggler", key) < self.straggler_share:
            return self.straggler_s
        return self.latency_s

    def reply_to(self, auth: str, body: dict) -> Reply:
        """What one chat request gets (its fault, its latency, its body), counted; the engine waits and sends it."""
        with self._lock:
            self.auth_seen.add(auth)
        if self.expected_key is not None and auth != f"Bearer {self.expected_key}":
            shown = auth.removeprefix("Bearer ") if self.echo_key_in_401 else "***"
            return Reply(401, json.dumps({"error": {"message": f"Incorrect API key provided: {shown}", "code": 401}}))
        if self.served_model is not None and body.get("model") != self.served_model:
            return _no_model(body)
        messages = body.get("messages", [])
        key = request_key(messages)
        with self._lock:
            self.attempts[key] += 1
            attempt = self.attempts[key]
        fault = self.schedule(key, attempt)
        if fault:
            with self._lock:
                self.faults[fault] += 1
        return _refusal(fault, auth, body, self.retry_after_s) or self._answer(body, messages, key, attempt, fault)

    def _answer(self, body: dict, messages: list, key: str, attempt: int, fault: Optional[str]) -> Reply:
        """A 200 after the prompt's latency: the answer, or the fault's malformed body (not counted as paid)."""
        wait = self.slow_s if fault == "slow" else self.latency_for(key)
        if wait > 0 and wait != self.latency_s and fault != "slow":
            with self._lock:
                self.stragglers += 1
        text = {"null": None, "empty": ""}[fault] if fault in ("null", "empty") else self.answer_fn(messages)
        choices = [] if fault == "nochoices" else [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop",
             "logprobs": _logprobs(text or "", body.get("top_logprobs")) if body.get("logprobs") else None}]
        payload = json.dumps({
            "id": f"stub-{key[:8]}-{attempt}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "stub"), "choices": choices,
            "usage": {"prompt_tokens": sum(len(m["content"].split()) for m in messages),
                      "completion_tokens": len((text or "").split()), "total_tokens": 0},
        }).encode()
        if fault == "truncated":  # a well-framed response whose JSON body is cut in half
            payload = payload[: len(payload) // 2]
        # truncated, null, empty, nochoices: not an answer a client may keep, so not counted as paid
        return Reply(200, payload, wait_s=wait, paid=fault not in ("truncated", "null", "empty", "nochoices"))

    def sent(self, reply: Reply) -> None:
        """Count a reply whose wait is over and that goes out now (paid: a full answer)."""
        if reply.paid:
            with self._lock:
                self.answered += 1

    def arrived(self, path: str) -> None:
        """Count a chat request that arrived; it is in flight (waiting for a slot included) until `left`."""
        with self._lock:
            self.first_at = self.first_at or time.time()
            self.received += 1
            self.paths[path] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def left(self) -> None:
        """Count a chat request that is answered (or failed)."""
        with self._lock:
            self.in_flight -= 1

    def serving_now(self, delta: int) -> None:
        """Count a request that takes (+1) or gives back (-1) one of the `capacity` slots."""
        with self._lock:
            self.serving += delta
            self.max_serving = max(self.max_serving, self.serving)

    def start(self) -> "StubServer":
        """Serve in a daemon thread."""
        if self.engine == "asyncio":
            self._aio.start()
        else:
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (Ctrl-C), then close the socket."""
        if self.engine == "asyncio":
            self._aio.run()
            self._aio.sock.close()
            return
        try:
            self.httpd.serve_forever(poll_interval=0.05)
        except KeyboardInterrupt:
            pass
        finally:
            self.httpd.server_close()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._stopping.set()
        if self.engine == "asyncio":
            self._aio.stop()
            return
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> "StubServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _no_model(body: dict) -> Reply:
    """vLLM's 404 for a model name it does not serve."""
    return Reply(404, json.dumps({"object": "error", "message": f"The model `{body.get('model')}` does not exist.",
                                  "type": "NotFoundError", "code": 404}))


def _refusal(fault: Optional[str], auth: str, body: dict, retry_after_s: float) -> Optional[Reply]:
    """The reply of a fault that is no 200 (401echo, 404model, 429, 500, reset); None for the others."""
    if fault == "401echo":
        return Reply(401, json.dumps({"error": {"message": f"Incorrect API key provided: {auth.removeprefix('Bearer ')}",
                                                "code": 401}}))
    if fault == "404model":
        return _no_model(body)
    if fault == "429":
        return Reply(429, b'{"error":{"message":"rate limited","code":429}}', {"Retry-After": f"{retry_after_s:g}"})
    if fault == "500":
        return Reply(500, b'{"error":{"message":"internal error","code":500}}')
    if fault == "reset":
        return Reply(0, b"", reset=True)
    return None


def _logprobs(text: str, top: Optional[int]) -> dict:
    """OpenAI-shaped logprobs for the answer's whitespace tokens (deterministic values)."""
    toks = text.split() or [""]
    return {"content": [{"token": t, "logprob": -_unit("lp", t), "bytes": None,
                         "top_logprobs": [{"token": t, "logprob": -_unit("lp", t), "bytes": None}][: int(top or 0)]}
                        for t in toks]}


def main(argv: Optional[list[str]] = None) -> None:
    """Command line: serve until interrupted, print the base URL first."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1", choices=LOOPBACK)
    ap.add_argument("--port", type=int, default=0, help="0 = a free port")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds per answer")
    ap.add_argument("--straggler-share", type=float, default=0.0, help="share of prompts answered after --straggler-s")
    ap.add_argument("--straggler-s", type=float, default=3.0)
    ap.add_argument("--fault-rate", type=float, default=0.0, help="chance a first or second attempt is faulty")
    ap.add_argument("--faults", default=",".join(FAULTS), help=f"comma list from {ALL_FAULTS}")
    ap.add_argument("--retry-after", type=float, default=0.2, help="Retry-After seconds sent with 429")
    ap.add_argument("--capacity", type=int, default=None, help="requests served at once (the rest wait); default: no limit")
    ap.add_argument("--served-model", default=None, help="the model /v1/models lists; chat for another name: 404")
    ap.add_argument("--engine", default="threads", choices=ENGINES, help="a thread per connection, or one asyncio loop")
    ap.add_argument("--answer", default=None, choices=sorted(ANSWERS), help="a stub judge's answers (stub_judges.py)")
    a = ap.parse_args(argv)
    faults = tuple(f for f in a.faults.split(",") if f)
    bad = [f for f in faults if f not in ALL_FAULTS]
    if bad:
        ap.error(f"--faults: unknown {bad}; valid: {', '.join(ALL_FAULTS)}")
    stub = StubServer(ANSWERS.get(a.answer, default_answer),
                      schedule=rate_schedule(a.fault_rate, faults) if a.fault_rate > 0 else None,
                      latency_s=a.latency, straggler_share=a.straggler_share, straggler_s=a.straggler_s,
                      retry_after_s=a.retry_after, capacity=a.capacity, served_model=a.served_model, host=a.host,
                      port=a.port, engine=a.engine)
    print(f"stub OpenAI server listening on {stub.base_url}", flush=True)
    stub.serve_forever()


if __name__ == "__main__":
    main()
