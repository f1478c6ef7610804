"""Issue 39, must-show: a SIGKILL during judging resumes with identical results, paying only the judge calls that
were not answered before the kill. The model and the judge are the stub OpenAI-compatible server (two served names,
so their answers never share a cache key); the run is `python -m recbench` in a process of its own."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recbench.testing.openai_stub import StubServer
from recbench.testing.stub_judges import judge_prefers_longer

pytestmark = pytest.mark.full

N = 16  # examples: 16 model calls, then 16 judge calls


def _args(url: str) -> list[str]:
    return [sys.executable, "-m", "recbench", "task=llmrec_explanation", "method=zero_shot", "model=openai-server",
            f"model.backend.base_url={url}", "model.backend.model=stub-writer", "judge=openai-server",
            f"judge.backend.base_url={url}", "judge.backend.model=stub-judge", "judge.backend.concurrency=2",
            f"limit={N}", "run.progress=false"]


def _env(root: Path) -> dict[str, str]:
    return {**os.environ, "RECBENCH_RUNS_DIR": str(root / "runs"), "RECBENCH_CACHE_DIR": str(root / "cache")}


def _judged(root: Path) -> Path:
    """The judge records of the one run under root (its dir name carries the judge.* and model.* overrides)."""
    found = sorted(root.glob("runs/llmrec_explanation/openai-server/zero_shot/*/judge/openai-server-pointwise"))
    return (found[0] if found else root / "none") / "samples.jsonl"


def _records(path: Path) -> list[dict]:
    """The judge records without their timings (latency differs between runs)."""
    out = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        for call in rec.get("calls", []):
            call.pop("latency_s", None)
        out.append({k: v for k, v in rec.items() if k not in ("wall_s", "created")})
    return sorted(out, key=lambda r: r["id"])


def test_a_sigkill_while_judging_resumes_identically(tmp_path):
    with StubServer(answer_fn=judge_prefers_longer, latency_s=0.25) as stub:
        clean, killed = tmp_path / "clean", tmp_path / "killed"
        for root in (clean, killed):
            root.mkdir()
        r = subprocess.run(_args(stub.base_url), cwd=clean, env=_env(clean), capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        paid_clean = stub.answered
        assert paid_clean == 2 * N
        proc = subprocess.Popen(_args(stub.base_url), cwd=killed, env=_env(killed), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 300:  # kill once a few judge records are written, the rest not yet
            path = _judged(killed)
            if path.exists() and len(path.read_text().splitlines()) >= 4:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        before = len(_judged(killed).read_text().splitlines())
        assert 4 <= before < N, before
        paid_first = stub.answered - paid_clean
        r = subprocess.run(_args(stub.base_url), cwd=killed, env=_env(killed), capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        paid_rerun = stub.answered - paid_clean - paid_first
    print(f"judge records at the kill: {before} of {N}; paid before the kill {paid_first}, by the rerun {paid_rerun}")
    assert _records(_judged(killed)) == _records(_judged(clean))
    # the rerun paid no model call and only the judge calls whose answers had not reached the cache (at most the
    # two in flight at the kill were paid twice)
    assert paid_first + paid_rerun <= 2 * N + 2, (paid_first, paid_rerun)
    assert paid_rerun <= N - before + 2, (paid_rerun, before)
