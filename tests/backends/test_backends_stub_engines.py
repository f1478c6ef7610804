"""The stub server's two engines (a thread per connection, one asyncio loop) serve the same replies, counts and
faults; the asyncio engine's own HTTP edges (pipelining, Connection: close, bad bodies, stop mid-wait)."""
from __future__ import annotations

import json
import re
import socket
import time
import urllib.request

import pytest

pytest.importorskip("httptools")

from backends_stub import ALL_FAULTS, FLAKY_FAULTS, StubServer, default_answer, get_stats, start_stub_process  # noqa: E402

from recbench.api.types import Request, SamplingParams  # noqa: E402
from recbench.backends.openai import OpenAIBackend  # noqa: E402
from recbench.testing.openai_stub import ENGINES, request_key  # noqa: E402

pytestmark = pytest.mark.fast

KEY = "sk-stub-engines"


def _reqs(n: int) -> list[Request]:
    return [Request.chat([{"role": "user", "content": f"User A:\n- Average rating: {i % 5}.0\nUser B:\n"
                                                      f"- Average rating: 2.5\nrequest {i}"}],
                         SamplingParams(max_tokens=8)) for i in range(n)]


#: request i's first attempt gets fault i mod (kinds + 3), every kind in turn, then three clean ones
FIRST_FAULT = {request_key(r.message_dicts()): (ALL_FAULTS + (None,) * 3)[i % (len(ALL_FAULTS) + 3)]
               for i, r in enumerate(_reqs(60))}


def _schedule(key: str, attempt: int):
    """Request i's fault on its first attempt, a clean second attempt."""
    return FIRST_FAULT[key] if attempt == 1 else None


def _serve(engine: str) -> tuple[list[tuple], dict, dict]:
    """(each request's ok, text and HTTP errors), the counters and /v1/models, from 60 requests with faults."""
    with StubServer(schedule=_schedule, expected_key=KEY, served_model="stub", straggler_share=0.2, straggler_s=0.15,
                    latency_s=0.01, slow_s=1.5, retry_after_s=0.05, engine=engine) as stub:
        b = OpenAIBackend(model="stub", base_url=stub.base_url, concurrency=8, timeout_s=1.0, max_retries=2,
                          backoff_initial_s=0.01, backoff_max_s=0.05, api_key_env="RB_STUB_ENGINES_KEY")
        out = b.generate(_reqs(60))
        b.close()
        with urllib.request.urlopen(stub.base_url + "/models", timeout=10) as r:  # through the engine
            models = json.loads(r.read())
        t0 = time.monotonic()
        while stub.stats()["in_flight"] and time.monotonic() - t0 < 5:  # the slow replies the client gave up on
            time.sleep(0.05)
        stats = get_stats(stub.base_url)  # over HTTP, through the engine itself
    results = [(r.ok, r.text, re.findall(r"HTTP \d+", r.error or "")) for r in out]
    return results, stats, models


def test_both_engines_give_the_same_replies_counts_and_faults(monkeypatch):
    monkeypatch.setenv("RB_STUB_ENGINES_KEY", KEY)
    (res_t, st_t, models_t), (res_a, st_a, models_a) = _serve("threads"), _serve("asyncio")
    assert res_a == res_t
    # how many overlapped, and when the first request came, depend on the machine, not on the engine
    timing = ("max_in_flight", "max_serving", "first_at")
    assert all(isinstance(st["first_at"], float) for st in (st_a, st_t))  # both engines log the first arrival
    assert {k: v for k, v in st_a.items() if k not in timing} == {k: v for k, v in st_t.items() if k not in timing}
    assert set(st_a["faults"]) == set(ALL_FAULTS)  # every kind was served by both
    # paid: every full answer, the slow ones the client had stopped waiting for included (a hosted API bills them)
    assert st_a["paid"] == sum(ok for ok, _, _ in res_a) + st_a["faults"]["slow"] and st_a["in_flight"] == 0
    assert st_a["received"] == 60 + sum(f in FLAKY_FAULTS for f in FIRST_FAULT.values())  # a retry per flaky one
    assert models_a == models_t and models_a["data"][0]["id"] == "stub"
    ok = [(r, text) for r, (good, text, _) in zip(_reqs(60), res_a) if good]
    assert ok and all(text == default_answer(r.message_dicts()) for r, text in ok)
    # the non-retryable faults (a 401 echo, vLLM's 404 for a model) are the only failures
    assert {tuple(err) for good, _, err in res_a if not good} == {("HTTP 401",), ("HTTP 404",)}


@pytest.mark.parametrize("engine", ENGINES)
def test_the_capacity_bound_holds_in_both_engines(engine):
    with StubServer(capacity=3, latency_s=0.05, engine=engine) as stub:
        b = OpenAIBackend(model="m", base_url=stub.base_url, concurrency=8)
        out = b.generate(_reqs(24))
        b.close()
        stats = stub.stats()
    assert all(r.ok for r in out) and stats["paid"] == 24
    assert stats["max_serving"] == 3 and stats["max_in_flight"] > 3  # the others waited for a slot


def _responses(raw: bytes) -> list[tuple[bytes, bytes]]:
    """(head, body) of each whole response in raw, in order."""
    out = []
    while b"\r\n\r\n" in raw:
        head, rest = raw.split(b"\r\n\r\n", 1)
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        if len(rest) < length:
            break
        out.append((head, rest[:length]))
        raw = rest[length:]
    return out


def _exchange(port: int, data: bytes, until: int) -> list[tuple[bytes, bytes]]:
    """Send raw bytes on one connection; the (head, body) of the first `until` responses (fewer if it closes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        got = b""
        while len(_responses(got)) < until and (chunk := s.recv(65536)):
            got += chunk
        return _responses(got)


def _post(path: str, body: bytes, *headers: str) -> bytes:
    extra = "".join(f"{h}\r\n" for h in headers)
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"{extra}\r\n").encode() + body


def test_asyncio_engine_answers_pipelined_requests_in_order_and_honours_connection_close():
    chat = [json.dumps({"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}).encode() for i in range(3)]
    first = request_key([{"role": "user", "content": "q0"}])
    with StubServer(engine="asyncio", latency_s=0.0, straggler_share=1.0, straggler_s=0.3) as stub:
        assert stub.latency_for(first) == 0.3  # the first answer is the slowest: order is kept, not finish time
        got = _exchange(stub.port, b"".join(_post("/v1/chat/completions", c) for c in chat), until=3)
        assert [head.split(b"\r\n")[0] for head, _ in got] == [b"HTTP/1.1 200 OK"] * 3
        answers = [json.loads(body)["choices"][0]["message"]["content"] for _, body in got]
        assert answers == [default_answer([{"role": "user", "content": f"q{i}"}]) for i in range(3)]  # in order
        with socket.create_connection(("127.0.0.1", stub.port), timeout=5) as s:
            s.sendall(_post("/v1/chat/completions", chat[0], "Connection: close"))
            got = b""
            while chunk := s.recv(65536):  # the server closes after its answer
                got += chunk
        assert got.startswith(b"HTTP/1.1 200 OK") and b"Connection: close" in got
        assert stub.stats()["paid"] == 4


def test_asyncio_engine_refuses_bad_bodies_and_garbage_and_stops_mid_wait():
    with StubServer(engine="asyncio", schedule=lambda k, a: "slow", slow_s=30.0) as stub:
        ((head, body),) = _exchange(stub.port, _post("/v1/chat/completions", b"{not json"), until=1)
        assert head.startswith(b"HTTP/1.1 400 Bad Request") and b"not JSON" in body
        with socket.create_connection(("127.0.0.1", stub.port), timeout=5) as s:
            s.sendall(b"\x16\x03\x01 this is no HTTP\r\n\r\n")
            assert s.recv(100) == b""  # closed, nothing answered
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "wait"}]}).encode()
        waiting = socket.create_connection(("127.0.0.1", stub.port), timeout=5)
        waiting.sendall(_post("/v1/chat/completions", body))
        t0 = time.monotonic()
        while stub.stats()["in_flight"] == 0 and time.monotonic() - t0 < 5:
            time.sleep(0.02)
        assert stub.stats()["in_flight"] == 1
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 5  # stop() did not wait out the 30 s
    assert waiting.recv(100) == b""
    waiting.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_an_answer_function_that_raises_closes_the_connection_and_the_stub_serves_on(engine, capsys):
    def answer(messages):
        if "boom" in messages[-1]["content"]:
            raise RuntimeError("the answer function failed")
        return default_answer(messages)

    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "boom"}]}).encode()
    with StubServer(answer_fn=answer, engine=engine) as stub:
        assert _exchange(stub.port, _post("/v1/chat/completions", body), until=1) == []  # closed, nothing answered
        b = OpenAIBackend(model="m", base_url=stub.base_url)
        (r,) = b.generate(_reqs(1))
        b.close()
        t0 = time.monotonic()
        while stub.stats()["in_flight"] and time.monotonic() - t0 < 5:  # counted out just after the answer goes
            time.sleep(0.01)
        assert r.ok and stub.stats()["in_flight"] == 0 and stub.stats()["received"] == 2
    assert "the answer function failed" in capsys.readouterr().err


def test_engine_names_are_checked_and_the_process_serves_either():
    with pytest.raises(ValueError, match="threads"):
        StubServer(engine="gevent")
    for engine in ENGINES:
        with start_stub_process(latency_s=0.0, engine=engine) as stub:
            b = OpenAIBackend(model="m", base_url=stub.base_url, concurrency=4)
            out = b.generate(_reqs(5))
            b.close()
            assert [r.text for r in out] == [default_answer(r.message_dicts()) for r in _reqs(5)]
            assert stub.stats()["paid"] == 5
