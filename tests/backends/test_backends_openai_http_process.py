"""The openai backend with its HTTP side in a second process (model.backend.http_process=true), against the stub:
the same answers, counters and errors as in one process (its kill test: tests/core/test_core_engine.py)."""
from __future__ import annotations

import json
import multiprocessing
import threading
import time
from pathlib import Path

import pytest

from backends_stub import StubServer, compose_cfg, listwise_answer, rate_schedule, refused_url  # noqa: E402
from tests.doubles import ScriptedBackend  # noqa: E402

from recbench.api.types import Request, SamplingParams  # noqa: E402
from recbench.backends.base import BackendUnavailable  # noqa: E402
from recbench.backends.openai import OpenAIBackend  # noqa: E402
from recbench.run.evaluate import run_from_config  # noqa: E402

pytestmark = pytest.mark.fast

FAST = dict(backoff_initial_s=0.01, backoff_max_s=0.05, timeout_s=5.0)


def _reqs(n: int, tag: str = "r") -> list[Request]:
    return [Request.chat([{"role": "user", "content": f"User A:\n- Average rating: {i % 5}.0\nUser B:\n"
                                                      f"- Average rating: 2.5\n{tag} {i}"}],
                         SamplingParams(max_tokens=16)) for i in range(n)]


def _children() -> list:
    return [p for p in multiprocessing.active_children() if p.name == "recbench-http"]


def test_stream_in_a_second_process_answers_each_request_once_within_the_window():
    reqs = _reqs(60)
    pulls: list[tuple[int, int]] = []
    got: list[tuple[Request, object]] = []
    threads: set[int] = set()
    todo = list(reqs)

    def next_requests(k: int) -> list[Request]:
        batch, todo[:] = todo[:k], todo[k:]
        pulls.append((k, len(batch)))
        return batch

    def on_response(req, resp) -> None:
        threads.add(threading.get_ident())
        got.append((req, resp))

    with StubServer(latency_s=0.1) as stub:
        b = OpenAIBackend(model="stub", base_url=stub.base_url, concurrency=8, http_process=True, **FAST)
        b.stream(next_requests, on_response)
        b.close()
    assert sorted(id(r) for r, _ in got) == sorted(id(r) for r in reqs)  # each exactly once, as the same object
    assert all(resp.ok and resp.text == listwise_answer(r.message_dicts()) for r, resp in got)
    assert threads == {threading.get_ident()}  # on_response runs in the calling thread
    assert stub.max_in_flight == 8 and stub.answered == 60  # the child keeps the usual window of 8 in flight
    assert pulls[0] == (8, 8) and pulls[-1][1] == 0  # at most concurrency sent and unanswered
    assert b.stats["successes"] == 60 and b.stats["attempts"] == 60 and b._endpoints[0].answered == 60
    assert b.effective_params()["http_process"] is True and not _children()


def test_refused_server_stops_the_run_from_the_second_process():
    url = refused_url()
    b = OpenAIBackend(model="stub", base_url=url, concurrency=4, max_consecutive_failures=3, down_after_s=0.6,
                      http_process=True, **FAST)
    with pytest.raises(BackendUnavailable) as ei:
        b.generate(_reqs(10))
    b.close()
    msg = str(ei.value)
    assert url in msg and "model.backend.base_url" in msg and "server down" in msg and "\n" not in msg
    assert not _children()


def test_a_failing_consumer_stops_the_second_process_and_the_backend_stays_usable():
    with StubServer(latency_s=0.05) as stub:
        b = OpenAIBackend(model="stub", base_url=stub.base_url, concurrency=4, http_process=True, **FAST)
        todo = _reqs(40)

        def next_requests(k: int) -> list[Request]:
            batch, todo[:] = todo[:k], todo[k:]
            return batch

        def boom(req, resp) -> None:
            raise KeyError("consumer failed")

        with pytest.raises(KeyError, match="consumer failed"):
            b.stream(next_requests, boom)
        assert not _children()  # the child was stopped, not left running
        time.sleep(0.2)
        answered = stub.answered
        time.sleep(0.3)
        assert stub.answered == answered < 40  # nothing is sent after the stop
        out = b.generate(_reqs(3, "again"))
        b.close()
    assert all(r.ok for r in out)


def _records(run_dir: Path) -> dict[str, dict]:
    return {r["id"]: r for r in map(json.loads, (run_dir / "samples.jsonl").read_text().splitlines())}


def test_perrec_run_through_faults_in_a_second_process_matches_a_clean_run(tmp_path):
    """Faults at a 40% rate on the first two attempts, retried in the child: the same records as a scripted run."""
    def cfg(name):
        return compose_cfg("task=perrec", "method=listwise", "model=smollm2-openai", "limit=24",
                           f"cache.path={tmp_path / name / 'cache.sqlite'}")

    run_from_config(cfg("ref"), tmp_path / "ref" / "run",
                    backend=ScriptedBackend(lambda r: listwise_answer(r.message_dicts())))
    with StubServer(schedule=rate_schedule(0.4), retry_after_s=0.05, slow_s=5.0) as stub:
        b = OpenAIBackend(model="smollm2", base_url=stub.base_url, concurrency=8, max_retries=4, http_process=True,
                          backoff_initial_s=0.01, backoff_max_s=0.05, timeout_s=1.5)
        m = run_from_config(cfg("child"), tmp_path / "child" / "run", backend=b).to_dict()
        b.close()
    assert m["complete"] and m["counts"]["backend_errors"] == 0 and sum(stub.faults.values()) > 0
    assert b.stats["retries"] >= sum(stub.faults.values()) and b.stats["gave_up"] == 0  # counted in the child
    got, want = _records(tmp_path / "child" / "run"), _records(tmp_path / "ref" / "run")
    assert got.keys() == want.keys() and len(got) == 24
    for k in want:
        assert got[k]["prediction"] == want[k]["prediction"] and got[k]["metrics"] == want[k]["metrics"]
        assert [c["response"] for c in got[k]["calls"]] == [c["response"] for c in want[k]["calls"]]
