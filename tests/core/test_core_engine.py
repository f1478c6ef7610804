"""The engine against a local OpenAI-compatible stub, on the toy task: honest exit codes, results independent of
arrival order, and a killed run that resumes paying only for what was in flight."""
from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import time

import pytest

from recbench.run.evaluate import run_from_config
from recbench.testing.openai_stub import StubServer, get_stats, refused_url, start_stub_process
from tests.doubles import ScriptedBackend
from tests.helpers import run_cli
from tests.toy import TOY, isolate, toy_cfg, toy_cli
from tests.toy.scripted import first_shown, reverse

pytestmark = pytest.mark.fast


@pytest.fixture()
def cli(tmp_path, monkeypatch, capfd):
    """`python -m recbench <TOY> model=smollm2-openai model.backend.base_url=<url> <args>` in this process."""
    isolate(monkeypatch, tmp_path)
    return lambda url, *args: run_cli([*TOY, "model=smollm2-openai", f"model.backend.base_url={url}", *args], capfd)


def test_server_down_exits_2_with_one_line_naming_the_url(cli):
    url = refused_url()
    p = cli(url, "limit=4", "model.backend.max_consecutive_failures=3", "model.backend.down_after_s=0.2")
    assert p.code == 2, p.err
    assert url.split("/v1")[0] in p.one_error_line()


def test_abandoned_examples_exit_3_and_the_same_command_retries_them(tmp_path, cli):
    failing: list[str] = []  # the first 3 distinct prompts the server sees always fail

    def schedule(key: str, attempt: int):
        if key not in failing and len(failing) < 3:
            failing.append(key)
        return "500" if key in failing else None

    with StubServer(latency_s=0.0, schedule=schedule) as stub:
        args = ["limit=8", "model.backend.max_retries=1", "model.backend.backoff_initial_s=0.01"]
        p = cli(stub.base_url, *args)
        assert p.code == 3, p.err
        last = [ln for ln in p.err.splitlines() if ln.strip()][-1]
        assert "3 example(s) abandoned" in last and "same command retries them" in last
        answered = stub.answered
        stub.schedule = lambda key, attempt: None  # the server recovers
        p2 = cli(stub.base_url, *args)  # the same command
        assert p2.code == 0, p2.err
        assert stub.answered - answered == 3  # only the abandoned examples were asked again
    m = json.loads(next((tmp_path / "runs").rglob("metrics.json")).read_text())
    assert m["complete"] and m["counts"]["examples"] == 8


def _hashed_answer(req) -> str:
    """A deterministic answer per prompt (a hash picks the script), so only the arrival order can differ."""
    return (reverse if hashlib.sha256(req.messages[-1][1].encode()).digest()[0] % 2 else first_shown)(req)


class _ShuffledBackend(ScriptedBackend):
    """Answers every pulled batch in a random order (as an API backend's answers arrive)."""

    def __init__(self, seed: int):
        super().__init__(_hashed_answer, batch_size=7)
        self.rng = random.Random(seed)

    def stream(self, next_requests, on_response) -> None:
        pending = []
        while True:
            pending += next_requests(self.batch_size)
            if not pending:
                return
            self.rng.shuffle(pending)
            req = pending.pop()
            on_response(req, self.generate([req])[0])


def test_results_do_not_depend_on_arrival_order(tmp_path):
    """A two-round method (each example's second request waits for its first answer), answers arriving shuffled."""
    outs = []
    for seed in (0, 1, 2):
        cfg = toy_cfg(["method.rounds=2", "limit=30", f"cache.path={tmp_path / f'c{seed}.sqlite'}"])
        m = run_from_config(cfg, tmp_path / f"run{seed}", backend=_ShuffledBackend(seed)).to_dict()
        outs.append(json.dumps({k: m[k] for k in ("metrics", "breakdown", "counts", "extra")}, sort_keys=True))
        order = [json.loads(x)["id"] for x in (tmp_path / f"run{seed}" / "samples.jsonl").read_text().splitlines()]
        assert len(order) == 30
    assert outs[0] == outs[1] == outs[2]
    assert json.loads(outs[0])["counts"]["model_calls"] == 60


@pytest.mark.full  # SIGKILL to second interpreters, a stub server in a third
@pytest.mark.parametrize("http_process", [False, True], ids=["one-process", "http-process"])
def test_kills_lose_at_most_the_requests_in_flight(tmp_path, http_process):
    """Each SIGKILL loses at most `concurrency` paid answers and the resumed run's metrics equal an uninterrupted
    run's; with the HTTP side in a child (http_process), the child does not outlive the run for long."""
    args = ["method.rounds=2", "model=smollm2-openai", "model.backend.concurrency=8"]
    args += ["+model.backend.http_process=true"] if http_process else []
    (tmp_path / "ref").mkdir()
    (tmp_path / "k").mkdir()
    with start_stub_process(latency_s=0.2) as stub:
        url = f"model.backend.base_url={stub.base_url}"
        ref = toy_cli(tmp_path / "ref", *args, url)
        assert ref.returncode == 0, ref.stderr
        fault_free = get_stats(stub.base_url)["paid"]
        before = get_stats(stub.base_url)["paid"]
        rng = random.Random(7)
        kills = 3
        for _ in range(kills):
            start = get_stats(stub.base_url)["paid"]
            proc = toy_cli(tmp_path / "k", *args, url, popen=True)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None and get_stats(stub.base_url)["paid"] == start:
                time.sleep(0.05)  # start-up is a few seconds: kill once this run is asking, somewhere in it
            time.sleep(rng.uniform(0.0, 1.0))
            os.kill(proc.pid, signal.SIGKILL)
            proc.communicate()
            if http_process:
                time.sleep(0.5)  # the orphaned child stops at its next write to the closed pipe
        if http_process:
            settled = get_stats(stub.base_url)["paid"]
            time.sleep(0.5)
            assert get_stats(stub.base_url)["paid"] == settled  # no child is still sending
        fin = toy_cli(tmp_path / "k", *args, url)
        assert fin.returncode == 0, fin.stderr
        paid = get_stats(stub.base_url)["paid"] - before
    assert paid <= fault_free + kills * 8
    m_ref = json.loads(next((tmp_path / "ref" / "runs").rglob("metrics.json")).read_text())
    m_k = json.loads(next((tmp_path / "k" / "runs").rglob("metrics.json")).read_text())
    assert m_k["metrics"] == m_ref["metrics"] and m_k["counts"]["examples"] == 36
