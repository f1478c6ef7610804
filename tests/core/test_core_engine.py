"""The engine against a local OpenAI-compatible stub: honest exit codes, results independent of arrival order,
and a killed run that resumes paying only for what was in flight."""
from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from recbench.run.evaluate import run_from_config
from recbench.testing.openai_stub import StubServer, get_stats, refused_url, start_stub_process
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg

REPO = Path(__file__).resolve().parents[2]


def _cli(tmp: Path, base_url: str, *args: str, **popen) -> subprocess.CompletedProcess | subprocess.Popen:
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp / "runs"), "RECBENCH_CACHE_DIR": str(tmp / "cache")}
    cmd = [sys.executable, "-m", "recbench", "task=perrec", "model=smollm2-openai", f"model.backend.base_url={base_url}",
           "run.progress=false", *args]
    if popen:
        return subprocess.Popen(cmd, cwd=tmp, env=env, **popen)
    return subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=600)


def test_server_down_exits_2_with_one_line_naming_the_url(tmp_path):
    url = refused_url()
    p = _cli(tmp_path, url, "method=listwise", "limit=4", "model.backend.max_consecutive_failures=3")
    assert p.returncode == 2, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("recbench") and " ready in " not in ln]
    assert len(lines) == 1 and url.split("/v1")[0] in lines[0] and "Traceback" not in p.stderr


def test_abandoned_examples_exit_3_and_the_same_command_retries_them(tmp_path):
    failing: list[str] = []  # the first 3 distinct prompts the server sees always fail

    def schedule(key: str, attempt: int):
        if key not in failing and len(failing) < 3:
            failing.append(key)
        return "500" if key in failing else None

    with StubServer(latency_s=0.0, schedule=schedule) as stub:
        args = ["method=listwise", "limit=8", "model.backend.max_retries=1", "model.backend.backoff_initial_s=0.01"]
        p = _cli(tmp_path, stub.base_url, *args)
        assert p.returncode == 3, p.stderr
        last = [ln for ln in p.stderr.splitlines() if ln.strip()][-1]
        assert "3 example(s) abandoned" in last and "same command retries them" in last
        answered = stub.answered
        stub.schedule = lambda key, attempt: None  # the server recovers
        p2 = _cli(tmp_path, stub.base_url, *args)  # the same command
        assert p2.returncode == 0, p2.stderr
        assert stub.answered - answered == 3  # only the abandoned examples were asked again
    m = json.loads(next((tmp_path / "runs").rglob("metrics.json")).read_text())
    assert m["complete"] and m["counts"]["examples"] == 8


def _pairwise_answer(req) -> str:
    """A deterministic answer per prompt (a hash picks the user), so only the arrival order can differ."""
    return "[User A]" if hashlib.sha256(req.messages[-1][1].encode()).digest()[0] % 2 else "[User B]"


class _ShuffledBackend(ScriptedBackend):
    """Answers every pulled batch in a random order (as an API backend's answers arrive)."""

    def __init__(self, seed: int):
        super().__init__(_pairwise_answer, batch_size=7)
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
    outs = []
    for seed in (0, 1, 2):
        cfg = compose_cfg(["method=pairwise", "limit=30", f"cache.path={tmp_path / f'c{seed}.sqlite'}",
                           "run.progress=false", "method.constrained=false"])
        m = run_from_config(cfg, tmp_path / f"run{seed}", backend=_ShuffledBackend(seed))
        outs.append(json.dumps({k: m[k] for k in ("metrics", "breakdown", "counts", "extra")}, sort_keys=True))
        order = [json.loads(x)["id"] for x in (tmp_path / f"run{seed}" / "samples.jsonl").read_text().splitlines()]
        assert len(order) == 30
    assert outs[0] == outs[1] == outs[2]


def test_kills_lose_at_most_the_requests_in_flight(tmp_path):
    args = ["method=pairwise", "limit=24", "model.backend.concurrency=8", "method.constrained=false"]
    (tmp_path / "ref").mkdir()
    (tmp_path / "k").mkdir()
    with start_stub_process(latency_s=0.05) as stub:
        ref = _cli(tmp_path / "ref", stub.base_url, *args)
        assert ref.returncode == 0, ref.stderr
        fault_free = get_stats(stub.base_url)["paid"]
        before = get_stats(stub.base_url)["paid"]
        rng = random.Random(7)
        kills = 3
        for _ in range(kills):
            proc = _cli(tmp_path / "k", stub.base_url, *args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(4.0, 7.0))  # start-up is a few seconds; kill somewhere in the run
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        fin = _cli(tmp_path / "k", stub.base_url, *args)
        assert fin.returncode == 0, fin.stderr
        paid = get_stats(stub.base_url)["paid"] - before
    assert paid <= fault_free + kills * 8
    m_ref = json.loads(next((tmp_path / "ref" / "runs").rglob("metrics.json")).read_text())
    m_k = json.loads(next((tmp_path / "k" / "runs").rglob("metrics.json")).read_text())
    assert m_k["metrics"] == m_ref["metrics"] and m_k["counts"]["examples"] == 24
