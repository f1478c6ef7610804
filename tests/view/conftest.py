"""Run dirs for the sample-viewer tests: a model-free run, and a scripted-model run with failures, hostile answers
and backend errors (real task data, real loop; only the model is a test double)."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from recbench.app import run_from_config
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg

#: an answer that would run script if the page inserted model text as HTML (also closes the data <script> element)
HOSTILE = '</script><script>window.__pwned = "script"</script><img src=x onerror="window.__pwned = \'img\'">'


def _bucket(req) -> int:
    return int(hashlib.sha256(req.messages[-1][1].encode()).hexdigest(), 16) % 10


def scripted_answer(req) -> str:
    """Pointwise answers: mostly a rating, sometimes hostile markup (unparseable), sometimes a backend error."""
    b = _bucket(req)
    if b == 0:
        raise RuntimeError("HTTP 503 <b>overloaded</b>")
    if b == 1:
        return HOSTILE
    return "The rating is 4 stars" if b == 2 else str(1 + b % 5)


def _run(root: Path, name: str, overrides: list[str], backend=None) -> Path:
    cfg = compose_cfg([f"cache.path={root / 'cache.sqlite'}", "run.progress=false", "run.bootstrap_resamples=50",
                       *overrides])
    run_dir = root / name
    run_from_config(cfg, run_dir, backend=backend)
    return run_dir


@pytest.fixture(scope="session")
def model_free_run(tmp_path_factory) -> Path:
    """perrec bm25_history on easy and hard groups: no model calls."""
    root = tmp_path_factory.mktemp("view-free")
    return _run(root, "bm25", ["method=bm25_history", "task.difficulties=[easy,hard]", "limit=60"])


@pytest.fixture(scope="session")
def scripted_run(tmp_path_factory) -> Path:
    """perrec pointwise on easy + hard groups answered by a scripted backend: ok, repaired, failed and error rows."""
    root = tmp_path_factory.mktemp("view-scripted")
    return _run(root, "pointwise", ["method=pointwise", "task.difficulties=[easy,hard]"],
                ScriptedBackend(scripted_answer, batch_size=16))
