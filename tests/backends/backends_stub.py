"""A fault-injecting OpenAI-compatible stub server (stdlib, 127.0.0.1 only) and Hydra compose helper for backend tests."""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter, defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Optional

from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from recbench.app import CONFIG_MODULE, register_resolvers

FAULTS = ("429", "500", "slow", "truncated")


def need_vllm():
    """Skip (naming the command that installs it) when vLLM is not importable in this interpreter."""
    import pytest

    return pytest.importorskip("vllm", reason="vLLM not installed in this venv: run `bash scripts/test_vllm.sh` "
                                               "(creates .venv-vllm and runs tests/backends there)")


def compose_cfg(*overrides: str):
    """The composed run config for these overrides, as `python -m recbench ...` builds it."""
    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        return compose(config_name="config", overrides=["run.progress=false", *overrides])


def listwise_answer(messages: list[dict]) -> str:
    """Deterministic 'model': rank the prompt's user labels by their stated average rating, lowest first."""
    text = messages[-1]["content"]
    blocks = re.findall(r"^(User [A-Z]):\s*\n- Average rating: ([0-9.]+)", text, flags=re.M)
    if not blocks:
        return "no users found"
    ranked = [lab for lab, avg in sorted(blocks, key=lambda b: (float(b[1]), b[0]))]
    return json.dumps({"ranking": ranked})


def request_key(messages: list[dict]) -> str:
    """Stable id of a chat request (its messages)."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()


class StubServer:
    """Answers /v1/chat/completions with answer_fn, injecting faults from `schedule(key, attempt)`.

    schedule returns None (answer normally) or one of FAULTS: "429" (with Retry-After), "500", "slow"
    (sleeps `slow_s` before answering, beyond the client's timeout) or "truncated" (200 with half a JSON body).
    """

    def __init__(self, answer_fn: Callable[[list[dict]], str] = listwise_answer,
                 schedule: Optional[Callable[[str, int], Optional[str]]] = None, *, retry_after_s: float = 0.2,
                 slow_s: float = 3.0, expected_key: Optional[str] = None, echo_key_in_401: bool = False):
        self.answer_fn = answer_fn
        self.schedule = schedule or (lambda key, attempt: None)
        self.retry_after_s = retry_after_s
        self.slow_s = slow_s
        self.expected_key = expected_key
        self.echo_key_in_401 = echo_key_in_401
        self.attempts: dict[str, int] = defaultdict(int)
        self.faults: Counter = Counter()
        self.auth_seen: set[str] = set()
        self.in_flight = 0
        self.max_in_flight = 0
        self.answered = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # keep test output quiet
                pass

            def do_GET(self):
                self._send(200, b'{"status":"ok"}')

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                with stub._lock:
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                try:
                    stub._handle(self, body)
                finally:
                    with stub._lock:
                        stub.in_flight -= 1

            def _send(self, status: int, payload: bytes, headers: Optional[dict] = None, length: Optional[int] = None):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload) if length is None else length))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(payload)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.Handler = Handler
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def _handle(self, h, body: dict) -> None:
        auth = h.headers.get("Authorization", "")
        with self._lock:
            self.auth_seen.add(auth)
        if self.expected_key is not None and auth != f"Bearer {self.expected_key}":
            msg = {"error": {"message": "Incorrect API key provided: "
                             + (auth.removeprefix("Bearer ") if self.echo_key_in_401 else "***"), "code": 401}}
            h._send(401, json.dumps(msg).encode())
            return
        messages = body.get("messages", [])
        key = request_key(messages)
        with self._lock:
            self.attempts[key] += 1
            attempt = self.attempts[key]
        fault = self.schedule(key, attempt)
        if fault:
            with self._lock:
                self.faults[fault] += 1
        if fault == "401echo":  # a server that echoes the key it received (some do): must never reach our files
            h._send(401, json.dumps({"error": {"message": f"Incorrect API key provided: {auth.removeprefix('Bearer ')}",
                                               "code": 401}}).encode())
            return
        if fault == "429":
            h._send(429, b'{"error":{"message":"rate limited","code":429}}',
                    headers={"Retry-After": f"{self.retry_after_s:g}"})
            return
        if fault == "500":
            h._send(500, b'{"error":{"message":"internal error","code":500}}')
            return
        if fault == "slow":
            self._stopping.wait(self.slow_s)  # the client gives up first; returns early when the server stops
        text = self.answer_fn(messages)
        payload = json.dumps({
            "id": f"stub-{key[:8]}-{attempt}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": sum(len(m["content"].split()) for m in messages),
                      "completion_tokens": len(text.split()), "total_tokens": 0},
        }).encode()
        if fault == "truncated":
            cut = payload[: len(payload) // 2]
            h._send(200, cut)  # a well-framed response whose JSON body is cut in half
            return
        with self._lock:
            self.answered += 1
        h._send(200, payload)

    def __enter__(self) -> "StubServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=10)


def rate_schedule(rate: float, faults: tuple[str, ...] = FAULTS, max_faulty_attempts: int = 2, seed: int = 0):
    """Deterministic schedule: a request is faulty with probability `rate` on each of its first attempts (hash-based)."""

    def schedule(key: str, attempt: int) -> Optional[str]:
        if attempt > max_faulty_attempts:
            return None
        h = int(hashlib.sha256(f"{seed}:{key}:{attempt}".encode()).hexdigest()[:8], 16)
        if (h % 10_000) / 10_000 >= rate:
            return None
        return faults[(h // 10_000) % len(faults)]

    return schedule
