"""Run dirs for the sample-viewer tests: a model-free run, and a scripted-model run with failures, hostile answers
and backend errors (real task data, real loop; only the model is a test double)."""
from __future__ import annotations

from pathlib import Path

import pytest

from recbench.run.evaluate import run_from_config
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg
from tests.view.view_doubles import scripted_answer


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
