"""The openai backend's streaming contract, dead-server stop, cache identity and transports, against the stub server."""
from __future__ import annotations

import importlib.util
import threading
import time

import pytest

from backends_stub import StubServer, default_answer, listwise_answer, refused_url  # noqa: E402
from tests.doubles import ScriptedBackend  # noqa: E402

from recbench.backends.base import BackendUnavailable  # noqa: E402
from recbench.backends.endpoints import is_hosted, server_identity  # noqa: E402
from recbench.backends.openai import OpenAIBackend  # noqa: E402
from recbench.backends.transport import event_loop_available, make_transport, new_event_loop  # noqa: E402
from recbench.store.response_cache import cache_key  # noqa: E402
from recbench.api.types import Request, SamplingParams  # noqa: E402

pytestmark = pytest.mark.fast

FAST = dict(backoff_initial_s=0.01, backoff_max_s=0.05, timeout_s=5.0)
TRANSPORTS = ["httpx"] + [t for t in ("aiohttp", "httptools") if importlib.util.find_spec(t) is not None]
EVENT_LOOPS = ["asyncio"] + (["uvloop"] if event_loop_available("auto") == "uvloop" else [])


def _reqs(n: int, tag: str = "r") -> list[Request]:
    return [Request.chat([{"role": "user", "content": f"User A:\n- Average rating: {i % 5}.0\nUser B:\n"
                                                      f"- Average rating: 2.5\n{tag} {i}"}],
                         SamplingParams(max_tokens=16)) for i in range(n)]


class Producer:
    """next_requests/on_response pair over a list of requests; records pulls, deliveries and the peak in flight."""

    def __init__(self, requests: list[Request], follow_up=None):
        self.todo = list(requests)
        self.follow_up = follow_up  # resp -> Request or None: made available by on_response
        self.pulls: list[tuple[int, int]] = []  # (asked k, got)
        self.delivered: list[tuple[Request, object]] = []
        self.in_flight = 0
        self.peak = 0
        self.thread_ids: set[int] = set()

    def next_requests(self, k: int) -> list[Request]:
        batch, self.todo = self.todo[:k], self.todo[k:]
        self.pulls.append((k, len(batch)))
        self.in_flight += len(batch)
        self.peak = max(self.peak, self.in_flight)
        return batch

    def on_response(self, req: Request, resp) -> None:
        self.thread_ids.add(threading.get_ident())
        self.in_flight -= 1
        self.delivered.append((req, resp))
        if self.follow_up is not None:
            nxt = self.follow_up(req, resp)
            if nxt is not None:
                self.todo.append(nxt)


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stream_keeps_the_window_full_and_delivers_each_answer_once(transport, event_loop):
    reqs = _reqs(40)
    with StubServer(latency_s=0.15) as stub:
        b = OpenAIBackend(model="stub", base_url=stub.base_url, concurrency=8, transport=transport,
                          event_loop=event_loop, **FAST)
        assert b.event_loop == event_loop
        p = Producer(reqs)
        b.stream(p.next_requests, p.on_response)
        b.close()
    assert stub.max_in_flight == 8 and p.peak == 8  # never more than the window, and the window was filled
    assert sorted(id(r) for r, _ in p.delivered) == sorted(id(r) for r in reqs)  # each exactly once
    assert all(resp.ok and resp.text == listwise_answer(r.message_dicts()) for r, resp in p.delivered)
    assert p.thread_ids == {threading.get_ident()}  # on_response runs in the calling thread
    assert p.pulls[0] == (8, 8) and p.pulls[-1][1] == 0 and stub.answered == 40


def test_an_unknown_event_loop_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"event_loop must be one of \('auto', 'asyncio', 'uvloop'\), got 'trio' "
                                         r"\(model.backend.event_loop\)"):
        OpenAIBackend(model="stub", base_url="http://127.0.0.1:9/v1", event_loop="trio")


@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_the_body_reaches_the_server_as_sent(event_loop):
    """Non-ASCII text and a JSON-schema constraint go out (orjson) and come back as the server read them."""
    from recbench.api.types import Constraint

    content = "Rate «Amélie» 🎬 — \"quoted\"\nnext line"
    schema = Constraint.json_schema({"type": "object", "properties": {"ranking": {"type": "array"}}})
    reqs = [Request.chat([{"role": "user", "content": f"{content} {i}"}], SamplingParams(max_tokens=16),
                         constraint=schema) for i in range(3)]
    with StubServer() as stub:
        b = OpenAIBackend(model="stub", base_url=stub.base_url, concurrency=2, event_loop=event_loop, **FAST)
        out = b.generate(reqs)
        b.close()
    assert [r.text for r in out] == [default_answer(r.message_dicts()) for r in reqs]


@pytest.mark.parametrize("transport", [t for t in TRANSPORTS if t != "httpx"])
@pytest.mark.parametrize("event_loop", EVENT_LOOPS)
def test_each_new_connection_is_reported_once(event_loop, transport):
    """on_connect is called per connection made: one for sequential keep-alive posts, one per slot used."""
    import asyncio

    body = b'{"model": "stub", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}'
    made: list[int] = []

    async def counted() -> None:
        made.append(1)

    async def main(url: str) -> tuple[int, int]:
        t = make_transport(transport, 3, 5.0, counted)
        for _ in range(4):
            assert (await t.post(url, body, {"Content-Type": "application/json"})).status == 200
        sequential = len(made)
        await asyncio.gather(*[t.post(url, body, {"Content-Type": "application/json"}) for _ in range(6)])
        await t.aclose()
        return sequential, len(made)

    with StubServer(latency_s=0.1) as stub:
        loop = new_event_loop(event_loop)
        try:
            sequential, total = loop.run_until_complete(main(stub.base_url + "/chat/completions"))
        finally:
            loop.close()
    assert sequential == 1 and total == 3  # keep-alive reuses the first; six at once fill the three slots


def test_stream_answers_arrive_out_of_order_without_a_barrier():
    """Request i is answered after (n - i) * 150 ms: later requests overtake earlier ones and are delivered first."""
    n = 6
    reqs = _reqs(n)
    delay = {r.messages[0][1]: (n - i) * 0.15 for i, r in enumerate(reqs)}

    def answer(messages):
        time.sleep(delay[messages[0]["content"]])
        return default_answer(messages)

    with StubServer(answer_fn=answer) as stub:
        b = OpenAIBackend(model="stub", base_url=stub.base_url, concurrency=n, **FAST)
        p = Producer(reqs)
        b.stream(p.next_requests, p.on_response)
        b.close()
    order = [reqs.index(r) for r, _ in p.delivered]
    assert order == list(range(n))[::-1], order
    assert all(resp.ok for _, resp in p.delivered)


def test_on_response_can_make_more_requests_available():
    """Each chain answer unlocks one follow-up (3 rounds); a slow request stays in flight meanwhile, so the pull
    after the chain's end is empty while something is in flight: that must not end the stream."""
    first = [*_reqs(1, "chain0"), *_reqs(1, "slow")]

    def answer(messages):
        time.sleep(1.5 if "slow" in messages[0]["content"] else 0.02)
        return default_answer(messages)

    def follow_up(req, resp):
        text = req.messages[0][1]
        if "chain" not in text or "chain2" in text:
            return None
        depth = int(text.split("chain")[1].split()[0])
        return Request.chat([{"role": "user", "content": text.replace(f"chain{depth}", f"chain{depth + 1}")}],
                            SamplingParams(max_tokens=16))

    with StubServer(answer_fn=answer) as stub:
        b = OpenAIBackend(model="stub", base_url=stub.base_url, concurrency=16, **FAST)
        p = Producer(first, follow_up)
        b.stream(p.next_requests, p.on_response)
        b.close()
    texts = [r.messages[0][1].split()[-2] for r, _ in p.delivered]
    assert texts == ["chain0", "chain1", "chain2", "slow"] and stub.answered == 4
    assert p.pulls == [(16, 2), (15, 1), (15, 1), (15, 0), (16, 0)]  # the empty pull at (15, 0) did not end it


def test_on_response_error_stops_the_stream_and_the_backend_stays_usable():
    with StubServer(latency_s=0.2) as stub:
        b = OpenAIBackend(model="stub", base_url=stub.base_url, concurrency=4, **FAST)
        p = Producer(_reqs(20))

        def boom(req, resp):
            p.on_response(req, resp)
            raise KeyError("consumer failed")

        with pytest.raises(KeyError, match="consumer failed"):
            b.stream(p.next_requests, boom)
        pulled = sum(got for _, got in p.pulls)
        time.sleep(0.4)
        assert len(p.delivered) == 1 and pulled == 4  # no pull after the error, the rest was cancelled
        out = b.generate(_reqs(3, "again"))  # the backend still works afterwards
        b.close()
    assert all(r.ok for r in out)


def test_base_class_stream_pulls_batches_and_delivers_in_order():
    b = ScriptedBackend(lambda r: r.messages[0][1][-1], batch_size=3)
    reqs = _reqs(7)
    p = Producer(reqs)
    b.stream(p.next_requests, p.on_response)
    assert b.batches == [3, 3, 1] and [r for r, _ in p.delivered] == reqs
    assert p.pulls == [(3, 3), (3, 3), (3, 1), (3, 0)]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_refused_server_stops_once_down_after_s_passes_without_an_answer(transport):
    """Nothing listens: connection failures never use up a request's retries (no example is abandoned); the stop
    comes at the first failure after down_after_s with N in a row, probes spaced down_after_s / 4."""
    url = refused_url()
    b = OpenAIBackend(model="stub", base_url=url, concurrency=8, max_consecutive_failures=3, transport=transport,
                      down_after_s=0.6, **FAST)
    t0 = time.monotonic()
    with pytest.raises(BackendUnavailable) as ei:
        b.generate(_reqs(20))
    elapsed = time.monotonic() - t0
    msg = str(ei.value)
    b.close()
    assert url in msg and "model.backend.base_url" in msg and "start the server" in msg and "server down" in msg
    assert isinstance(ei.value, RuntimeError) and "\n" not in msg
    assert 0.6 <= elapsed < 0.6 + 0.15 + 1.0, elapsed  # the window, one probe interval, slack for a loaded machine
    assert b.stats["gave_up"] == 0 and b.stats["successes"] == 0
    # 2 failures use a retry each, then every waiting request probes once per 0.15 s (8 requests, ~4 rounds)
    assert b.stats["connection_errors"] == b.stats["attempts"] and 3 <= b.stats["attempts"] <= 3 + 8 * 6


def test_reset_connections_count_and_no_request_is_sent_after_the_stop():
    """A server that accepts and then drops every connection is down too (no HTTP answer); no attempt starts after
    the stop, and an attempt already in flight may still reach the server a moment later."""
    with StubServer(schedule=lambda k, a: "reset") as stub:
        b = OpenAIBackend(model="stub", base_url=stub.base_url, concurrency=3, max_consecutive_failures=4,
                          down_after_s=0.4, **FAST)
        t0 = time.monotonic()
        with pytest.raises(BackendUnavailable, match=stub.base_url):
            b.generate(_reqs(20))
        elapsed = time.monotonic() - t0
        attempts_at_stop = b.stats["attempts"]
        time.sleep(0.3)
        b.close()
        assert b.stats["attempts"] == attempts_at_stop and stub.received <= attempts_at_stop
        assert 0.4 <= elapsed < 0.4 + 0.1 + 1.0 and b.stats["gave_up"] == 0
        assert b.stats["connection_errors"] >= 4 and stub.received >= 4


def test_http_errors_are_not_connection_failures():
    """500s prove the server is up: requests fail after their bounded retries, no BackendUnavailable."""
    with StubServer(schedule=lambda k, a: "500") as stub:
        b = OpenAIBackend(model="stub", base_url=stub.base_url, concurrency=4, max_consecutive_failures=2,
                          max_retries=2, **FAST)
        out = b.generate(_reqs(5))
        b.close()
    assert all(not r.ok and "HTTP 500" in r.error and "3 attempt(s)" in r.error for r in out)
    assert stub.received == 15 and b.stats["gave_up"] == 5


def test_connection_resets_are_retried_within_the_bound():
    """Resets on the first attempt only: every request succeeds on its second; the failure counter resets."""
    with StubServer(schedule=lambda k, a: "reset" if a == 1 else None) as stub:
        b = OpenAIBackend(model="stub", base_url=stub.base_url, concurrency=4, max_consecutive_failures=50,
                          max_retries=1, **FAST)
        out = b.generate(_reqs(6))
        b.close()
    assert all(r.ok for r in out) and set(stub.attempts.values()) == {2}
    with StubServer(schedule=lambda k, a: "reset") as stub:
        b = OpenAIBackend(model="stub", base_url=stub.base_url, concurrency=1, max_consecutive_failures=50,
                          max_retries=2, **FAST)
        (r,) = b.generate(_reqs(1))
        b.close()
    assert not r.ok and "3 attempt(s)" in r.error and stub.base_url in r.error and stub.received == 3


def test_identity_is_the_served_model_not_the_url_of_self_run_servers():
    """One server, another, or both in a list: one identity, so they share cached answers (issue 22); a hosted
    API's identity keeps its server (scheme+host+path)."""
    with StubServer() as s1, StubServer() as s2:
        b1 = OpenAIBackend(model="smollm2", base_url=s1.base_url)
        b2 = OpenAIBackend(model="smollm2", base_url=s2.base_url)
        both = OpenAIBackend(model="smollm2", base_url=[s1.base_url, s2.base_url])
        i1, i2, i12 = b1.identity(), b2.identity(), both.identity()
        b1.close(), b2.close(), both.close()
    assert i1 == i2 == i12 == {"kind": "openai", "name": "smollm2", "model": "smollm2", "revision": None}
    req = _reqs(1)[0]
    assert cache_key(i1, req) == cache_key(i12, req)
    other = OpenAIBackend(model="smollm2", revision="ckpt-2", base_url=s1.base_url)  # another checkpoint: say so
    assert cache_key(other.identity(), req) != cache_key(i1, req)
    other.close()
    hosted = OpenAIBackend(model="gpt-4o", base_url="https://api.openai.com/v1/")
    assert hosted.identity()["server"] == "https://api.openai.com/v1"
    hosted.close()
    assert server_identity("http://user:secret@GPU-box/v1/?key=abc") == "http://gpu-box:80/v1"
    assert server_identity("https://api.openai.com/v1/") == "https://api.openai.com/v1"  # hosted: unchanged
    assert server_identity("https://generativelanguage.googleapis.com/v1beta/openai/") == \
        "https://generativelanguage.googleapis.com/v1beta/openai"
    assert is_hosted("https://api.deepseek.com/v1") and is_hosted("https://eu.api.together.xyz/v1")
    assert not is_hosted("http://127.0.0.1:8000/v1") and not is_hosted("https://api.openai.com.evil.example/v1")


def test_logprobs_and_token_counts_are_parsed():
    with StubServer() as stub:
        b = OpenAIBackend(model="stub", base_url=stub.base_url, **FAST)
        req = Request.chat([{"role": "user", "content": "say two words"}], SamplingParams(max_tokens=4), logprobs=1)
        (r,) = b.generate([req])
        b.close()
    words = default_answer(req.message_dicts()).split()
    assert r.ok and r.text == " ".join(words)
    assert [t["token"] for t in r.logprobs] == words and all(list(t["top"]) == [t["token"]] for t in r.logprobs)
    assert r.prompt_tokens == 3 and r.completion_tokens == len(words)
