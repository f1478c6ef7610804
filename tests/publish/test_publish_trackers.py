"""Trackers (issue 43): a 3-job sweep logged to a local MLflow store (a parent run, three children FINISHED with every
metric of every slice and its CI bounds, the redacted config as params, metrics.json, samples.jsonl and report.html)
and to W&B offline (read back from its run files); `recbench.track` re-logs without duplicates; a crash ends the
tracker run FAILED (Ctrl-C: KILLED); a tracker that cannot be reached costs the run nothing and says so in one line;
no tracker is imported unless chosen."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from recbench.publish.content import metrics_of, params_of, run_content
from recbench.publish.tracked_run import run_tracked
from recbench.store.schema import find_run_dirs, read_result

pytestmark = pytest.mark.full  # each command starts an interpreter; MLflow makes its database (seconds)

REPO = Path(__file__).resolve().parents[2]
SWEEP = ["-m", "task=perrec", "method=bm25_history,random,user_avg", "limit=8", "run.progress=false"]


def _recbench(args: list[str], root: Path, module: str = "recbench") -> subprocess.CompletedProcess:
    env = {**__import__("os").environ, "RECBENCH_RUNS_DIR": str(root), "WANDB_MODE": "offline"}
    return subprocess.run([sys.executable, "-m", module, *args, f"cache.path={root / 'c.sqlite'}"] if module == "recbench"
                          else [sys.executable, "-m", module, *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)


def _mlflow_runs(uri: str):
    from mlflow.tracking import MlflowClient

    c = MlflowClient(uri)
    exp = c.get_experiment_by_name("recbench")
    return c, c.search_runs([exp.experiment_id], max_results=1000)


@pytest.fixture(scope="module")
def mlflow_sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root / 'ml' / 'mlflow.db'}"
    p = _recbench([*SWEEP, "+tracking=mlflow", f"tracking.uri={uri}"], root)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "recbench: tracking" not in p.stderr
    return root, uri, next((root / "sweeps").iterdir())


def test_a_sweep_is_a_parent_run_with_three_finished_children(mlflow_sweep):
    root, uri, sweep = mlflow_sweep
    client, runs = _mlflow_runs(uri)
    parents = [r for r in runs if r.data.tags.get("recbench.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("recbench.kind") == "run"]
    assert len(parents) == 1 and len(children) == 3
    assert parents[0].info.status == "FINISHED"
    assert [a.path for a in client.list_artifacts(parents[0].info.run_id)] == ["report.html"]
    by_dir = {r.data.tags["recbench.run_dir"]: r for r in children}
    assert set(by_dir) == {str(d) for d in find_run_dirs([sweep])}
    for d, r in by_dir.items():
        assert r.info.status == "FINISHED" and r.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        result = read_result(d)
        assert r.data.metrics == pytest.approx(metrics_of(result))
        assert "history:long/ptc.ci_low" in r.data.metrics and "ptc.ci_high" in r.data.metrics
        assert r.data.params["method.name"] == result.method and r.data.params["limit"] == "8"
        assert sorted(a.path for a in client.list_artifacts(r.info.run_id)) == ["metrics.json", "report.html",
                                                                                  "samples.jsonl"]
        assert r.data.tags["recbench.metrics_sha256"] == run_content(d).sha
    # the tracker is where results go, not what they are: no run-dir name and no config.yaml holds it
    assert all("tracking" not in str(d) and "tracking" not in (Path(d) / "config.yaml").read_text() for d in by_dir)


def test_relogging_the_sweep_makes_no_duplicates(mlflow_sweep, tmp_path):
    root, uri, sweep = mlflow_sweep
    p = _recbench([str(sweep), "--uri", uri, "--no-report"], root, module="recbench.track")
    assert p.returncode == 0, p.stderr
    assert sum(ln.startswith("already logged") for ln in p.stdout.splitlines()) == 3
    assert "0 logged, 3 already logged" in p.stdout
    assert len(_mlflow_runs(uri)[1]) == 4
    fresh = f"sqlite:///{tmp_path / 'mlflow.db'}"  # a store that has never seen them: logged once, then skipped
    for expected in ("3 logged, 0 already logged", "0 logged, 3 already logged"):
        p = _recbench([str(sweep), "--uri", fresh, "--no-report"], root, module="recbench.track")
        assert p.returncode == 0 and expected in p.stdout, p.stdout + p.stderr
    runs = _mlflow_runs(fresh)[1]
    assert len(runs) == 4 and len({r.info.run_id for r in runs if r.data.tags.get("recbench.kind") == "sweep"}) == 1


def test_a_changed_run_dir_replaces_its_logged_run(mlflow_sweep, tmp_path):
    from recbench.publish.relog import relog
    from recbench.publish.tracked_run import open_tracker

    root, _, sweep = mlflow_sweep
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    node = {"name": "mlflow", "uri": uri, "report": False}
    d = find_run_dirs([sweep])[0]
    assert len(relog([str(d)], open_tracker(node), node, say=lambda s: None).logged) == 1
    m = d / "metrics.json"
    kept = m.read_bytes()
    try:
        m.write_bytes(kept.replace(b'"complete": true', b'"complete": true '))  # same content, other bytes
        assert len(relog([str(d)], open_tracker(node), node, say=lambda s: None).logged) == 1
    finally:
        m.write_bytes(kept)
    runs = _mlflow_runs(uri)[1]  # one live run for the run dir: the older one is deleted
    assert len([r for r in runs if r.data.tags.get("recbench.run_dir") == str(d)]) == 1


@pytest.mark.parametrize("raised, status", [(RuntimeError("boom"), "FAILED"), (KeyboardInterrupt(), "KILLED")])
def test_a_crash_mid_run_ends_the_tracker_run_failed(tmp_path, raised, status):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    def crash():
        raise raised

    with pytest.raises(type(raised)):
        run_tracked(crash, {"name": "mlflow", "uri": uri}, tmp_path / "perrec" / "none" / "random" / "limit=8",
                    lambda: "task:\n  name: toy\n")
    (run,) = _mlflow_runs(uri)[1]
    assert run.info.status == status and run.data.params["task.name"] == "toy" and not run.data.metrics


def test_an_unreachable_tracker_is_one_line_and_the_run_finishes(tmp_path):
    p = _recbench(["task=perrec", "method=random", "limit=4", "run.progress=false", "+tracking=mlflow",
                   "tracking.uri=http://127.0.0.1:9", "tracking.timeout_s=3"], tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("recbench:")]
    assert len(lines) == 1 and lines[0].startswith("recbench: tracking: mlflow at http://127.0.0.1:9 cannot be "
                                                   "reached (connection refused); the run goes on untracked"), lines
    assert (tmp_path / "perrec" / "none" / "random" / "limit=4" / "metrics.json").is_file()


def test_an_unreachable_tracker_is_one_line_for_a_whole_sweep(tmp_path):
    p = _recbench(["-m", "task=perrec", "method=random,user_avg", "limit=4", "run.progress=false", "+tracking=mlflow",
                   "tracking.uri=http://127.0.0.1:9", "tracking.timeout_s=3"], tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("recbench:")]
    assert len(lines) == 1 and "cannot be reached (connection refused)" in lines[0], lines
    assert len(find_run_dirs([tmp_path / "sweeps"])) == 2


def test_wandb_offline_holds_the_same_content_and_relogs_without_duplicates(tmp_path):
    from recbench.publish.wandb_offline import read_offline_run

    p = _recbench([*SWEEP, "+tracking=wandb", f"tracking.dir={tmp_path / 'wb'}"], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    files = sorted((tmp_path / "wb" / "wandb").glob("offline-run-*/run-*.wandb"))
    seen = [read_offline_run(f) for f in files]
    runs = [s for s in seen if "recbench.run_dir" in s["config"]]
    assert len(files) == 4 and len(runs) == 3  # three jobs and the sweep's run of its group
    for s in runs:
        result = read_result(s["config"]["recbench.run_dir"])
        assert s["exit_code"] == 0 and s["config"]["method.name"] == result.method
        assert {k: s["summary"][k] for k in metrics_of(result)} == pytest.approx(metrics_of(result))
        assert {"samples", "report"} <= {k.split("/")[0] for k in s["history_keys"]}  # a Table and the report page
    sweep = next((tmp_path / "sweeps").iterdir())
    p = _recbench([str(sweep), "--tracker", "wandb", "--dir", str(tmp_path / "wb")], tmp_path, module="recbench.track")
    assert p.returncode == 0 and "0 logged, 3 already logged" in p.stdout, p.stdout + p.stderr


def test_params_hold_the_config_with_secrets_masked():
    params = params_of({"model": {"backend": {"base_url": "http://alice:pw@host:8000/v1?key=K", "api_key": "sk-1",
                                              "max_tokens": 5}}, "task": {"name": "toy", "items": [1, 2]}})
    assert params == {"model.backend.base_url": "http://***@host:8000/v1?key=***", "model.backend.api_key": "***",
                      "model.backend.max_tokens": "5", "task.name": "toy", "task.items": "[1, 2]"}


def test_no_tracker_is_imported_unless_chosen():
    code = ("import sys, recbench.cli.app, recbench.publish.tracked_run, recbench.cli.tracking_callback; "
            "print(sorted(m for m in ('mlflow', 'wandb', 'huggingface_hub', 'duckdb') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "[]", p.stdout + p.stderr
