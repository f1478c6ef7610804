"""The openai backend against a fault-injecting local stub: 429 + Retry-After, 500, timeouts, truncated JSON, key hygiene."""
from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")

from backends_stub import StubServer, compose_cfg, listwise_answer, rate_schedule, request_key  # noqa: E402
from tests.doubles import ScriptedBackend  # noqa: E402

from recbench.run.evaluate import run_from_config  # noqa: E402
from recbench.backends.openai import OpenAIBackend  # noqa: E402
from recbench.backends.retry import RetryPolicy, parse_retry_after  # noqa: E402
from recbench.run.cost import run_cost  # noqa: E402
from recbench.api.types import Request, SamplingParams  # noqa: E402

pytestmark = pytest.mark.fast

FAST = dict(backoff_initial_s=0.01, backoff_max_s=0.05, timeout_s=2.0)


def _reqs(n: int) -> list[Request]:
    return [Request.chat([{"role": "user", "content": f"User A:\n- Average rating: {i % 5}.0\nUser B:\n"
                                                      f"- Average rating: 2.5\nrequest {i}"}],
                         SamplingParams(max_tokens=16)) for i in range(n)]


def _backend(stub: StubServer, **kw) -> OpenAIBackend:
    return OpenAIBackend(model="stub", base_url=stub.base_url, **{**FAST, **kw})


def test_retry_after_is_honoured_and_counted():
    with StubServer(schedule=lambda k, a: "429" if a == 1 else None, retry_after_s=0.4) as stub:
        b = _backend(stub, concurrency=4)
        t0 = time.monotonic()
        out = b.generate(_reqs(3))
        elapsed = time.monotonic() - t0
        b.close()
    assert all(r.ok for r in out), [r.error for r in out]
    assert elapsed >= 0.4, "the Retry-After wait was not honoured"
    assert set(stub.attempts.values()) == {2}
    assert b.stats["retries"] == 3 and b.stats["status_429"] == 3 and b.stats["successes"] == 3
    assert [r.text for r in out] == [listwise_answer(r.message_dicts()) for r in _reqs(3)]


def test_gives_up_after_bounded_retries_with_a_clear_error():
    with StubServer(schedule=lambda k, a: "500") as stub:
        b = _backend(stub, max_retries=2)
        (r,) = b.generate(_reqs(1))
        b.close()
    assert not r.ok
    assert stub.base_url + "/chat/completions" in r.error and "HTTP 500" in r.error and "3 attempt(s)" in r.error
    assert list(stub.attempts.values()) == [3]  # 1 + max_retries, never more
    assert b.stats["gave_up"] == 1


def test_non_retryable_status_fails_at_once():
    with StubServer(schedule=lambda k, a: "401echo") as stub:
        b = _backend(stub, max_retries=3)
        (r,) = b.generate(_reqs(1))
        b.close()
    assert not r.ok and "HTTP 401" in r.error and "1 attempt(s)" in r.error
    assert list(stub.attempts.values()) == [1]


def test_timeout_and_truncated_json_are_retried():
    def schedule(key, attempt):
        return {1: "slow", 2: "truncated"}.get(attempt)

    with StubServer(schedule=schedule, slow_s=5.0) as stub:
        b = _backend(stub, timeout_s=0.5, concurrency=8)
        t0 = time.monotonic()
        out = b.generate(_reqs(4))
        elapsed = time.monotonic() - t0
        b.close()
    assert all(r.ok for r in out), [r.error for r in out]
    assert set(stub.attempts.values()) == {3}
    assert b.stats["timeouts"] == 4 and b.stats["malformed"] == 4
    assert elapsed < 4.0, "timeouts did not cut the slow responses short"


def test_concurrency_limit_is_respected():
    def slow_answer(messages):
        time.sleep(0.05)
        return listwise_answer(messages)

    with StubServer(answer_fn=slow_answer) as stub:
        b = _backend(stub, concurrency=4)
        out = b.generate(_reqs(40))
        b.close()
    assert all(r.ok for r in out)
    assert 2 <= stub.max_in_flight <= 4


def test_retry_policy_and_retry_after_parsing():
    p = RetryPolicy(max_retries=3, initial_s=1.0, max_s=5.0, jitter=0.5)
    import random

    rng = random.Random(1)
    for attempt in range(6):
        d = p.delay(attempt, None, rng)
        base = min(5.0, 2 ** attempt)
        assert 0.5 * base <= d <= 1.5 * base
    assert p.delay(0, 7.0) == 7.0 and p.delay(0, 999.0) == p.max_retry_after_s
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after({}) is None


def test_cost_block():
    c = run_cost({"prompt_per_1m": 2.5, "completion_per_1m": 10.0, "currency": "USD"}, 1_000_000, 200_000)
    assert c["total"] == pytest.approx(4.5) and c["currency"] == "USD"
    assert run_cost(None, 10, 10) is None


# ---- the PerRecBench loop through the stub ---------------------------------------------------------
def _perrec_cfg(tmp: Path, name: str, *extra: str):
    return compose_cfg("task=perrec", "method=listwise", "model=smollm2-openai", "limit=24",
                       f"cache.path={tmp / name / 'cache.sqlite'}", *extra)


def _cache_rows(path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(path) as c:
        return c.execute("SELECT request, response FROM responses").fetchall()


def _records(run_dir: Path) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, (run_dir / "samples.jsonl").read_text().splitlines())}


def test_perrec_run_through_faults_matches_a_clean_run(tmp_path):
    """Faults at a 40% rate on the first two attempts: the run completes, answers equal the fault-free ones."""
    ref = run_from_config(_perrec_cfg(tmp_path, "ref"), tmp_path / "ref" / "run",
                          backend=ScriptedBackend(lambda r: listwise_answer(r.message_dicts()))).to_dict()
    max_retries = 4
    with StubServer(schedule=rate_schedule(0.4), retry_after_s=0.05, slow_s=5.0) as stub:
        b = OpenAIBackend(model="smollm2", base_url=stub.base_url, concurrency=8, max_retries=max_retries,
                          backoff_initial_s=0.01, backoff_max_s=0.05, timeout_s=1.5)
        m = run_from_config(_perrec_cfg(tmp_path, "faulty"), tmp_path / "faulty" / "run", backend=b).to_dict()
        b.close()
    assert m["complete"] and m["counts"]["backend_errors"] == 0
    assert set(stub.faults) == {"429", "500", "slow", "truncated"}, stub.faults  # every fault kind happened
    assert max(stub.attempts.values()) <= max_retries + 1
    # every injected fault cost one retry (a loaded machine may add a genuine timeout or two), none gave up
    assert sum(stub.faults.values()) <= b.stats["retries"] <= max_retries * len(stub.attempts)
    assert b.stats["gave_up"] == 0
    got, want = _records(tmp_path / "faulty" / "run"), _records(tmp_path / "ref" / "run")
    assert got.keys() == want.keys() and len(got) == 24
    for k in want:
        assert got[k]["prediction"] == want[k]["prediction"] and got[k]["metrics"] == want[k]["metrics"]
    assert m["metrics"]["ptc"]["mean"] == ref["metrics"]["ptc"]["mean"]
    rows = _cache_rows(tmp_path / "faulty" / "cache.sqlite")
    assert len(rows) == len(stub.attempts)  # one row per distinct request, no error rows
    assert all(json.loads(resp)["text"].startswith('{"ranking"') for _, resp in rows)
    assert m["cost"]["total"] > 0 and m["cost"]["currency"] == "USD"  # smollm2-openai has a price table


def test_errors_are_never_cached_and_a_rerun_completes(tmp_path):
    """Requests that fail past the retry bound are abandoned, not cached; the rerun sends only those."""
    doomed: set[str] = set()

    def schedule(key, attempt):
        if len(doomed) < 3 and key not in doomed and attempt == 1:
            doomed.add(key)
        return "500" if key in doomed else None

    cfg = _perrec_cfg(tmp_path, "c")
    with StubServer(schedule=schedule) as stub:
        b = OpenAIBackend(model="smollm2", base_url=stub.base_url, max_retries=1, **{k: v for k, v in FAST.items()})
        m1 = run_from_config(cfg, tmp_path / "c" / "run", backend=b).to_dict()
        b.close()
    assert not m1["complete"] and m1["counts"]["backend_errors"] == 3
    assert all(stub.attempts[k] == 2 for k in doomed)
    cached = {request_key(json.loads(req)["messages"]) for req, _ in _cache_rows(tmp_path / "c" / "cache.sqlite")}
    assert not (cached & doomed) and len(cached) == 24 - 3
    with StubServer() as healthy:
        b2 = OpenAIBackend(model="smollm2", base_url=healthy.base_url, **FAST)
        m2 = run_from_config(cfg, tmp_path / "c" / "run", backend=b2).to_dict()
        b2.close()
    assert m2["complete"] and m2["counts"]["examples"] == 24
    assert set(healthy.attempts) == doomed  # only the failed ones were sent again


def test_api_key_never_reaches_any_output_file(tmp_path, monkeypatch):
    """The key comes from the env var named in config; run dir, cache, logs and errors never contain it."""
    key = "sk-rbtest-" + "7f3a9c21d4e84b6f"
    monkeypatch.setenv("RECBENCH_TEST_API_KEY", key)
    log_file = tmp_path / "debug.log"
    handler = logging.FileHandler(log_file)
    handler.setLevel(logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    echoed: set[str] = set()

    def schedule(k, attempt):  # one request gets a 401 that echoes the key it received
        if not echoed or k in echoed:
            echoed.add(k)
            return "401echo"
        return None

    try:
        with StubServer(schedule=schedule, expected_key=key) as stub:
            cfg = _perrec_cfg(tmp_path, "k", f"model.backend.base_url={stub.base_url}",
                              "model.backend.api_key_env=RECBENCH_TEST_API_KEY", "limit=6")
            m = run_from_config(cfg, tmp_path / "k" / "run").to_dict()
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()
    assert stub.auth_seen == {f"Bearer {key}"}  # the key was really used
    assert m["counts"]["examples"] == 5 and m["counts"]["backend_errors"] == 1
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".sqlite" for p in files) and log_file.stat().st_size > 0
    errors = (tmp_path / "k" / "run").rglob("*error*")
    assert any("HTTP 401" in p.read_text() for p in errors if p.is_file())
    leaks = [str(p) for p in files if key.encode() in p.read_bytes()]
    assert not leaks, f"API key written to {leaks}"


def test_missing_key_env_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("RECBENCH_ABSENT_KEY", raising=False)
    with pytest.raises(RuntimeError, match="RECBENCH_ABSENT_KEY"):
        OpenAIBackend(model="x", base_url="http://127.0.0.1:9/v1", api_key_env="RECBENCH_ABSENT_KEY")
