"""Several servers for one model (issue 22, docs/backends.md "Several servers"): `model.backend.base_url` as a list
(or a comma-separated environment value). Throughput adds up across servers with a capacity limit, a server killed
mid-run changes no prediction, a drained server (refused, or answering 5xx) is probed and rejoins, each request goes
where the fewest are in flight, a server of another model is refused before anything is written, every server down
stops the run with exit 2, and one server or several of the same model share cached answers."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from backends_stub import (StubServer, compose_cfg, default_answer, free_port, refused_url, request_key,
                           start_stub_process)

from recbench.api.errors import ConfigError
from recbench.api.types import Request, SamplingParams
from recbench.backends.endpoints import split_base_urls
from recbench.backends.openai import OpenAIBackend
from recbench.run.construct import build_backend
from recbench.run.evaluate import run_from_config

pytestmark = pytest.mark.full

FAST = dict(backoff_initial_s=0.01, backoff_max_s=0.05, timeout_s=10.0)


def _reqs(n: int, tag: str = "q") -> list[Request]:
    return [Request.chat([{"role": "user", "content": f"{tag} {i}"}], SamplingParams(max_tokens=8)) for i in range(n)]


def _cli(tmp: Path, base_url: str, *args: str, **popen):
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp / "runs"), "RECBENCH_CACHE_DIR": str(tmp / "cache")}
    env.pop("RECBENCH_OPENAI_BASE_URL", None)
    cmd = [sys.executable, "-m", "recbench", "task=perrec", "model=smollm2-openai", f"model.backend.base_url={base_url}",
           "run.progress=false", *args]
    tmp.mkdir(parents=True, exist_ok=True)
    if popen:
        return subprocess.Popen(cmd, cwd=tmp, env=env, **popen)
    return subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=600)


def _samples(tmp: Path) -> list[dict]:
    (samples,) = list((tmp / "runs").rglob("samples.jsonl"))
    return [json.loads(line) for line in samples.read_text().splitlines()]


def _predictions(tmp: Path) -> dict[str, object]:
    return {d["id"]: (d["prediction"], d["metrics"]) for d in _samples(tmp)}


# ---- the list itself -----------------------------------------------------------------------------------------------
def test_base_url_list_from_yaml_override_and_environment(monkeypatch):
    a, b = "http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"
    cfg = compose_cfg("model=smollm2-openai", f"model.backend.base_url=[{a},{b}]")
    backend = build_backend(cfg.model)
    assert backend.base_urls == [a, b]
    backend.close()
    monkeypatch.setenv("RECBENCH_OPENAI_BASE_URL", f"{a}, {b}/")  # the environment override: comma-separated
    backend = build_backend(compose_cfg("model=smollm2-openai").model)
    assert backend.base_urls == [a, b] and backend.effective_params()["base_url"] == [a, b]
    backend.close()
    # a comma inside one URL's query stays in that URL; only a comma before another scheme:// separates
    assert split_base_urls("http://h/v1?x=1,2,http://g/v1") == ["http://h/v1?x=1,2", "http://g/v1"]
    with pytest.raises(ValueError, match="more than once"):
        split_base_urls([a, a + "/"])
    with pytest.raises(ValueError, match="empty list"):
        split_base_urls([])


# ---- routing, in-process -------------------------------------------------------------------------------------------
def test_two_servers_with_a_capacity_limit_give_at_least_1_8x_the_throughput_of_one():
    """80 requests, 8 in flight, servers answering 4 at a time after 0.2 s: one server needs 80 / 4 x 0.2 = 4 s,
    two 2 s. Same workload, same window, measured in one test."""
    reqs = _reqs(80)
    with StubServer(latency_s=0.2, capacity=4) as s1, StubServer(latency_s=0.2, capacity=4) as s2:
        walls, outs = {}, {}
        for name, urls in (("one", s1.base_url), ("two", [s1.base_url, s2.base_url])):
            b = OpenAIBackend(model="stub", base_url=urls, concurrency=8, **FAST)
            b.generate(_reqs(8, "warm"))  # connections open before the clock starts, for both
            t0 = time.perf_counter()
            outs[name] = b.generate(reqs)
            walls[name] = time.perf_counter() - t0
            b.close()
        st1, st2 = s1.stats(), s2.stats()
    speedup = walls["one"] / walls["two"]
    print(f"one server {walls['one']:.2f}s, two servers {walls['two']:.2f}s: {speedup:.2f}x (ideal 2.0x)")
    assert speedup >= 1.8, walls
    assert [r.text for r in outs["two"]] == [r.text for r in outs["one"]] == [default_answer(r.message_dicts())
                                                                                for r in reqs]
    assert st1["max_serving"] == st2["max_serving"] == 4  # both full: the capacity was the limit
    assert {r.endpoint for r in outs["one"]} == {None}  # one server: nothing to tell apart, nothing recorded
    on_second = sum(r.endpoint == s2.base_url for r in outs["two"])
    assert 30 <= on_second <= 50 and st2["paid"] >= on_second  # the work was shared


def test_each_request_goes_where_the_fewest_are_in_flight():
    """A fast and a slow server: by fewest in flight the fast one takes most requests (round robin: half each)."""
    with StubServer(latency_s=0.02) as fast, StubServer(latency_s=0.3) as slow:
        b = OpenAIBackend(model="stub", base_url=[slow.base_url, fast.base_url], concurrency=4, **FAST)
        out = b.generate(_reqs(60))
        b.close()
    assert all(r.ok for r in out)
    assert fast.answered > 4 * slow.answered > 0, (fast.answered, slow.answered)


def test_the_first_wave_is_shared_not_sent_to_whichever_server_connected_first():
    """One server has connected, the other's first connection is still being made (its probe in flight): new
    attempts go to both by fewest in flight, not all to the first (on real servers: 5 of 6 to one, before)."""
    b = OpenAIBackend(model="stub", base_url=["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"], concurrency=8)
    first, second = b._endpoints
    first.alive, first.pending, first.in_flight = True, False, 1  # connected, one request on its way
    second.probing, second.in_flight = True, 1  # connecting: its first request (the probe) on its way

    async def six_picks() -> list[str]:
        b._cond = asyncio.Condition()
        picks = []
        for _ in range(6):
            ep, probe, volunteer = await b._acquire()
            assert not probe and not volunteer
            ep.in_flight += 1
            picks.append(ep.base_url)
        return picks

    picks = b._loop.run_until_complete(six_picks())
    b.close()
    assert picks.count(second.base_url) == picks.count(first.base_url) == 3, picks


def test_a_server_that_comes_up_late_is_probed_and_joins():
    """The second server refuses at first (nothing listens on its port); once it listens it takes requests, and no
    request used its retries on the refusals."""
    port = free_port()
    late_url = f"http://127.0.0.1:{port}/v1"
    late: dict[str, StubServer] = {}
    with StubServer(latency_s=0.1) as first:
        b = OpenAIBackend(model="stub", base_url=[first.base_url, late_url], concurrency=4, down_after_s=0.4,
                          max_retries=0, **FAST)
        timer = threading.Timer(0.6, lambda: late.setdefault("s", StubServer(latency_s=0.1, port=port).start()))
        timer.start()
        out = b.generate(_reqs(80))
        b.close()
        timer.join()
    late["s"].stop()
    assert all(r.ok for r in out), [r.error for r in out if not r.ok][:2]
    assert late["s"].answered >= 5 and b.stats["connection_errors"] >= 1 and b.stats["gave_up"] == 0
    assert sum(r.endpoint == late_url for r in out) == late["s"].answered


def test_a_server_answering_5xx_is_drained_and_the_run_does_not_suffer():
    """One server answers 500 to everything: after max_consecutive_failures of them in a row it gets only probes,
    which use no retries; every request is answered by the healthy one."""
    with StubServer(latency_s=0.05) as good, StubServer(schedule=lambda k, a: "500") as sick:
        b = OpenAIBackend(model="stub", base_url=[sick.base_url, good.base_url], concurrency=4,
                          max_consecutive_failures=2, max_retries=2, down_after_s=2.0, **FAST)
        out = b.generate(_reqs(60))
        b.close()
    assert all(r.ok and r.endpoint == good.base_url for r in out) and b.stats["gave_up"] == 0
    assert sick.received <= 10, sick.received  # the first few, then a probe every 0.5 s at most


def test_a_request_that_breaks_every_connection_still_runs_out_of_retries():
    """One prompt makes both servers drop the connection (the others are answered): its failure is free once per
    server, then it uses its retries and gives up, instead of bouncing between the servers for ever."""
    reqs = _reqs(12)
    poison = request_key(reqs[0].message_dicts())

    def drop(key: str, attempt: int):
        return "reset" if key == poison else None

    with StubServer(schedule=drop, latency_s=0.05) as s1, StubServer(schedule=drop, latency_s=0.05) as s2:
        b = OpenAIBackend(model="stub", base_url=[s1.base_url, s2.base_url], concurrency=4, max_retries=2,
                          down_after_s=5.0, **FAST)
        out = b.generate(reqs)
        b.close()
        tries = s1.attempts[poison] + s2.attempts[poison]
    assert not out[0].ok and "attempt(s)" in out[0].error and all(r.ok for r in out[1:])
    assert tries == 2 + (1 + 2), tries  # free once per server, then 1 + max_retries attempts (no probe due yet)


def test_a_server_of_another_model_is_refused_before_any_request():
    with StubServer(served_model="smollm2") as a, StubServer(served_model="other") as b:
        backend = OpenAIBackend(model="smollm2", base_url=[a.base_url, b.base_url], **FAST)
        with pytest.raises(ConfigError) as e:
            backend.generate(_reqs(3))
        backend.close()
        assert a.received == b.received == 0
    msg = str(e.value)
    assert "\n" not in msg and b.base_url in msg and "'other'" in msg and "'smollm2'" in msg and a.base_url in msg


# ---- the command line ----------------------------------------------------------------------------------------------
def test_a_server_killed_mid_run_changes_no_prediction(tmp_path):
    """Two stub processes (capacity 4 each); the second is SIGKILLed once it has answered 20 requests. Exit 0,
    every prediction and per-example metric equals a one-server run's; samples.jsonl names the server of each call,
    its credentials masked."""
    args = ["method=pairwise", "limit=30", "method.constrained=false", "model.backend.concurrency=8"]
    stub = dict(latency_s=0.1, capacity=4, served_model="smollm2")
    with start_stub_process(**stub) as one:
        ref = _cli(tmp_path / "one", one.base_url, *args)
    assert ref.returncode == 0, ref.stderr
    with start_stub_process(**stub) as a, start_stub_process(**stub) as b:
        b_url = b.base_url.replace("http://", "http://user:pw-secret1@")  # the stub ignores the credentials
        run = _cli(tmp_path / "two", f"[{a.base_url},{b_url}]", *args, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120 and run.poll() is None:
            try:
                if b.stats()["paid"] >= 20:
                    break
            except OSError:
                pass
            time.sleep(0.02)
        paid_b = b.stats()["paid"]
        b.proc.kill()  # SIGKILL: requests in flight there are cut off, its port then refuses
        b.proc.wait()
        out, err = run.communicate(timeout=300)
        paid_a = a.stats()["paid"]
    assert run.returncode == 0, err
    assert 20 <= paid_b and paid_a > 0
    want, have = _predictions(tmp_path / "one"), _predictions(tmp_path / "two")
    assert len(want) == 30 and have == want
    masked = b.base_url.replace("http://", "http://***@")
    calls = [c for d in _samples(tmp_path / "two") for c in d["calls"]]
    assert all("endpoint" not in c for c in calls if c["cached"])  # a cache hit was answered by no server now
    endpoints = [c.get("endpoint") for c in calls if not c["cached"]]
    assert set(endpoints) == {a.base_url, masked}, set(endpoints)
    assert 10 <= endpoints.count(masked) <= paid_b + 8  # the killed server answered until it was killed
    files = [f for f in (tmp_path / "two").rglob("*") if f.is_file()]
    assert not [f for f in files if b"pw-secret1" in f.read_bytes() or "pw-secret1" in str(f)]
    m = json.loads(next((tmp_path / "two" / "runs").rglob("metrics.json")).read_text())
    assert m["complete"] and m["counts"]["backend_errors"] == 0
    print(f"killed the second server after {paid_b} answers; the first answered {paid_a}; exit 0, "
          f"{len(have)} predictions identical to the one-server run")


def test_a_server_of_another_model_exits_2_with_one_line_and_writes_nothing(tmp_path):
    with StubServer(served_model="smollm2") as a, StubServer(served_model="SmolLM2-360M") as b:
        p = _cli(tmp_path, f"[{a.base_url},{b.base_url}]", "method=listwise", "limit=4")
        assert a.received == b.received == 0  # not one chat request
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("recbench:") and "Traceback" not in p.stderr, p.stderr
    assert b.base_url in lines[0] and "'SmolLM2-360M'" in lines[0] and "'smollm2'" in lines[0]
    assert not [f for f in tmp_path.rglob("*") if f.is_file()], list(tmp_path.rglob("*"))


def test_every_server_down_exits_2_with_one_line_naming_each(tmp_path):
    urls = [refused_url(), refused_url()]
    t0 = time.monotonic()
    p = _cli(tmp_path, f"[{','.join(urls)}]", "method=listwise", "limit=4")
    wall = time.monotonic() - t0
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("recbench: error")]
    assert len(lines) == 1 and "every server down" in lines[0] and all(u in lines[0] for u in urls), p.stderr
    assert "Traceback" not in p.stderr and wall < 30, wall
    files = [f.name for f in (tmp_path / "runs").rglob("*") if f.is_file()]
    assert "metrics.json" not in files and "errors.jsonl" not in files, files  # nothing scored, nothing abandoned


# ---- the cache -----------------------------------------------------------------------------------------------------
def test_one_server_and_two_share_cached_answers(tmp_path):
    """The cache identity is the served model, not the URL: a run over [a, b] after a run over a asks nothing."""
    with StubServer(served_model="smollm2") as a, StubServer(served_model="smollm2") as b:
        common = ("task=perrec", "method=listwise", "limit=5", "model=smollm2-openai",
                  f"cache.path={tmp_path / 'c.sqlite'}")
        first = run_from_config(compose_cfg(*common, f"model.backend.base_url={a.base_url}"), tmp_path / "one").to_dict()
        second = run_from_config(compose_cfg(*common, f"model.backend.base_url=[{a.base_url},{b.base_url}]"),
                                 tmp_path / "two").to_dict()
    assert first["this_invocation"]["backend_calls"] == 5 and a.answered == 5
    assert second["this_invocation"]["backend_calls"] == 0 and second["this_invocation"]["cache_hits"] == 5
    assert b.received == 0 and second["metrics"] == first["metrics"]
