"""Parallel local sweep through the joblib launcher preset; the report callback still runs once at the end."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.full

REPO = Path(__file__).resolve().parents[2]

pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason='pip install "recbench[joblib]"')


def test_joblib_sweep_runs_jobs_in_parallel_processes_and_writes_one_report(tmp_path):
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp_path / "runs"), "RECBENCH_CACHE_DIR": str(tmp_path / "c"),
           "OMP_NUM_THREADS": "1"}
    sweep = tmp_path / "sweep"
    r = subprocess.run([sys.executable, "-m", "recbench", "-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                        "method=random,bm25_history", "task.difficulties=[easy],[hard]", "limit=10",
                        "run.progress=false", f"hydra.sweep.dir={sweep}"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Joblib.Parallel" in r.stdout + r.stderr  # the joblib launcher ran the jobs
    metrics = [json.loads(p.read_text()) for p in sweep.rglob("metrics.json")]
    assert len(metrics) == 4 and all(m["complete"] for m in metrics)
    md = (sweep / "report" / "report.md").read_text()
    assert "| bm25_history | " in md and "| random | " in md
    assert "| baseline | easy | hard | all |" in md  # the [easy] and [hard] runs are one configuration
