"""A real multirun through submitit's local executor: separate processes, one sweep dir, per-job caches merged into
the shared cache, the sweep report at the end; a second sweep is served from the merged cache. SLURM = same preset."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install -e '.[dev]' (hydra-submitit-launcher)")

from recbench.store.cache_tools import stats  # noqa: E402

pytestmark = pytest.mark.full

REPO = Path(__file__).resolve().parents[2]
LIMIT = 3


def sweep(tmp: Path, name: str, methods: str, preds: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp / "runs"), "RECBENCH_CACHE_DIR": str(tmp / "shared")}
    cmd = [sys.executable, "-m", "recbench", "-m", "hydra/launcher=submitit_local", "task=generic_yesno",
           "model=predictions", f"model.backend.path={preds}", f"method={methods}", f"limit={LIMIT}",
           f"hydra.sweep.dir={tmp / 'runs' / name}"]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=540)


@pytest.fixture
def preds(tmp_path) -> Path:
    """Recorded answers for the bundled yes/no sample, as a JSON array (the `predictions` model: no model is loaded)."""
    rows = [json.loads(ln) for ln in (REPO / "data" / "generic_sample" / "yesno.jsonl").read_text().splitlines()]
    p = tmp_path / "answers.json"
    p.write_text(json.dumps([{"id": r["id"], "response": "yes"} for r in rows]))
    return p


def test_submitit_local_sweep_per_job_caches_and_report(tmp_path, preds):
    r = sweep(tmp_path, "s1", "random,zero_shot", preds)
    assert r.returncode == 0, r.stderr[-3000:]
    s1 = tmp_path / "runs" / "s1"
    metrics = {p.parent.parent.name: json.loads(p.read_text()) for p in s1.rglob("metrics.json")}
    assert set(metrics) == {"random", "zero_shot"} and all(m["complete"] for m in metrics.values())
    # separate processes: submitit's local executor names each job's folder by the job's process id
    jobs = [d.name for d in (s1 / ".submitit").iterdir() if d.name.isdigit()]
    assert len(jobs) == 2 and str(os.getpid()) not in jobs
    # one cache file per job under the sweep dir; the zero_shot job's answers were merged into the shared cache
    per_job = sorted((s1 / "caches").glob("job*/responses.sqlite"))
    assert len(per_job) == 2
    assert sorted(stats(p)["rows"] for p in per_job) == [0, LIMIT]
    assert stats(tmp_path / "shared" / "responses.sqlite")["rows"] == LIMIT
    assert metrics["zero_shot"]["this_invocation"]["backend_calls"] == LIMIT
    # the sweep report, written once at the end
    report = (s1 / "report" / "report.md").read_text()
    assert "zero_shot" in report and "random" in report

    # the next sweep: the job's own cache starts as a copy of the shared one, so nothing is asked again
    r = sweep(tmp_path, "s2", "zero_shot", preds)
    assert r.returncode == 0, r.stderr[-3000:]
    m2 = json.loads(next((tmp_path / "runs" / "s2").rglob("metrics.json")).read_text())
    assert m2["this_invocation"]["backend_calls"] == 0 and m2["this_invocation"]["cache_hits"] == LIMIT


def test_slurm_preset_differs_from_the_local_one_only_in_the_executor():
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from recbench.run.construct import CONFIG_MODULE, register_resolvers

    register_resolvers()
    cfgs = {}
    for launcher in ("submitit_local", "slurm"):
        GlobalHydra.instance().clear()
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
            cfgs[launcher] = compose(config_name="config", overrides=[f"hydra/launcher={launcher}"],
                                     return_hydra_config=True).hydra
    local, slurm = cfgs["submitit_local"], cfgs["slurm"]
    assert local.launcher._target_.endswith("LocalLauncher") and slurm.launcher._target_.endswith("SlurmLauncher")
    assert local.job.env_set == slurm.job.env_set and "RECBENCH_JOB_CACHE_DIR" in local.job.env_set
    assert local.callbacks == slurm.callbacks and "per_job_cache" in local.callbacks and "report" in local.callbacks
    shared = {k: v for k, v in local.launcher.items() if k != "_target_"}
    differing = {k for k in shared if k in slurm.launcher and slurm.launcher[k] != local.launcher[k]}
    assert differing <= {"timeout_min", "cpus_per_task", "gpus_per_node", "mem_gb"}  # resources, not behaviour
    assert local.sweep == slurm.sweep
