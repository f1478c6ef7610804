"""The shared stub server itself: cross-process counters, stragglers, deterministic answers, loopback only."""
from __future__ import annotations

import json
import time
import urllib.request

import pytest

from backends_stub import StubServer, default_answer, get_stats, request_key, start_stub_process  # noqa: E402

from recbench.backends.openai import OpenAIBackend  # noqa: E402
from recbench.api.types import Request, SamplingParams  # noqa: E402

pytestmark = pytest.mark.fast


def _post(url: str, content: str) -> dict:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": content}]}).encode()
    req = urllib.request.Request(url + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


@pytest.mark.full  # the stub in its own process, killed clients
def test_stub_process_counts_paid_requests_and_stragglers_across_processes():
    prompts = [f"prompt {i}" for i in range(12)]
    probe = StubServer(straggler_share=0.5, straggler_s=0.6, latency_s=0.0)  # same hash rule, never started
    slow = {p for p in prompts if probe.latency_for(request_key([{"role": "user", "content": p}])) == 0.6}
    probe.httpd.server_close()
    assert 0 < len(slow) < len(prompts)
    with start_stub_process(latency_s=0.0, straggler_share=0.5, straggler_s=0.6) as stub:
        times = {}
        for p in prompts:
            t = time.perf_counter()
            _post(stub.base_url, p)
            times[p] = time.perf_counter() - t
        st = get_stats(stub.base_url)  # over HTTP, from this (another) process
        assert st["paid"] == 12 and st["received"] == 12 and st["stragglers"] == len(slow)
        assert all(times[p] >= 0.6 for p in slow)
        stub.reset()
        assert stub.stats()["paid"] == 0
    assert stub.proc.poll() is not None  # stopped


def test_default_answers_are_parseable_and_pairwise_consistent():
    def block(label: str, avg: float) -> str:
        return f"{label}:\n- Average rating: {avg:.2f}; most common rating: 4; number of ratings: 9\n"

    pair = ('Two users both rated the item "X".\n\n{a}\n{b}\nWhich user likes "X" more relative to their own '
            'average rating? Answer with exactly "[User A]" or "[User B]".')
    ab = default_answer([{"role": "user", "content": pair.format(a=block("[User A]", 3.1), b=block("[User B]", 4.2))}])
    ba = default_answer([{"role": "user", "content": pair.format(a=block("[User A]", 4.2), b=block("[User B]", 3.1))}])
    assert (ab, ba) == ("[User A]", "[User B]")  # the same user wins in both orders
    lw = ("3 users all rated ...\n" + block("User A", 4.0) + block("User B", 2.5) + block("User C", 3.0)
          + 'Answer only with JSON of the form {"ranking": ["User A", "User B", "User C"]} in your order.')
    assert json.loads(default_answer([{"role": "user", "content": lw}])) == {"ranking": ["User B", "User C", "User A"]}
    pw = "Here is a user's rating history.\n" + block("User", 3.4).replace("User:", "User A:") + \
        "Answer with a single number between 1 and 5 and nothing else."
    assert default_answer([{"role": "user", "content": pw}]) == "4"


def test_stub_only_binds_loopback():
    with pytest.raises(ValueError, match="loopback"):
        StubServer(host="0.0.0.0")


def test_backend_against_stub_process_with_faults():
    """A fault rate in the separate process (429/500/slow/truncated on early attempts): every request succeeds."""
    with start_stub_process(latency_s=0.02, fault_rate=0.3, retry_after_s=0.05) as stub:
        b = OpenAIBackend(model="m", base_url=stub.base_url, concurrency=8, timeout_s=1.0, backoff_initial_s=0.01,
                          backoff_max_s=0.05)
        reqs = [Request.chat([{"role": "user", "content": f"q {i}"}], SamplingParams(max_tokens=4)) for i in range(30)]
        out = b.generate(reqs)
        b.close()
        st = stub.stats()
    assert all(r.ok for r in out) and st["paid"] == 30 and sum(st["faults"].values()) > 0
    assert [r.text for r in out] == [default_answer(r.message_dicts()) for r in reqs]
