"""Sweeps checked before launch, and a job failing at run time sparing its siblings (issue 16, item 4): every
combination is composed and checked first (method for task, data, `???`, API-key variable); a bad one stops the
sweep with one message; a run-time failure leaves job_failed.json, the report lists it, the exit code says so."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recbench.run.construct import bundled_data, register_resolvers
from recbench.report.results import load_results
from recbench.cli.sweep import check_sweep, combinations, problems
from recbench.tasks.llmrec.task import RatingTask
from tests.helpers import compose_cfg

REPO = Path(__file__).resolve().parents[2]


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(tmp_path / "runs"), "RECBENCH_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-m", "recbench", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)


def test_combinations_fan_out_sweeps_only():
    combos = combinations(["task=llmrec_rating", "method=user_mean,mf", "seed=0,1", "limit=3"])
    assert combos == [["task=llmrec_rating", "method=user_mean", "seed=0", "limit=3"],
                      ["task=llmrec_rating", "method=user_mean", "seed=1", "limit=3"],
                      ["task=llmrec_rating", "method=mf", "seed=0", "limit=3"],
                      ["task=llmrec_rating", "method=mf", "seed=1", "limit=3"]]


def test_wrong_method_stops_the_sweep_before_any_job(tmp_path):
    r = _cli(tmp_path, "-m", "task=llmrec_rating", "method=user_mean,item_mean,global_mean,mf")
    assert r.returncode == 2
    assert "sweep not started: 1 of 4 combination(s) cannot run" in r.stderr
    assert "method=mf: method 'mf' is not a method of task llmrec_rating; valid: global_mean, item_mean, random, " \
           "user_mean, zero_shot" in r.stderr
    assert "Traceback" not in r.stderr and "Error executing job" not in r.stderr
    assert not (tmp_path / "runs").exists()  # nothing ran


def test_every_bad_combination_is_listed(monkeypatch, tmp_path):
    register_resolvers()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    bad, total = check_sweep(["-m", "task=perrec", "method=random,listwise", "model=gpt4o",
                              f"task.data_dir={tmp_path / 'nope'},{bundled_data('perrec_sample')}"])
    assert total == 4 and len(bad) == 3
    nope = f"task.data_dir={tmp_path / 'nope'}: no such folder"
    key = "model gpt4o: environment variable OPENAI_API_KEY is not set"
    assert bad[0].startswith(f"method=random task.data_dir={tmp_path / 'nope'}:") and nope in bad[0] \
        and key not in bad[0]  # random calls no model: no key needed
    assert nope in bad[1] and key in bad[1]
    assert bad[2].startswith("method=listwise task.data_dir=") and key in bad[2] and "no such folder" not in bad[2]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert check_sweep(["-m", "task=perrec", "method=random,listwise", "model=gpt4o"]) == ([], 2)


def test_problems_name_required_keys_and_ranges():
    cfg = compose_cfg(["task=perrec", "method=random", "run.ci_level=1.5"])
    assert problems(cfg) == ["run.ci_level=1.5: must be in (0, 1)"]
    cfg = compose_cfg(["task=perrec", "method=random", "+task.needed=???"])
    assert problems(cfg) == ["required key(s) not set: task.needed=??? (give them on the command line)"]


class ScoreBoom(RatingTask):
    """llmrec_rating whose scoring raises: an unexpected exception inside one sweep job (imported by the job: the
    sweep runs from the repo root)."""

    def score(self, example, outcome):
        """Raise a ValueError (a bug, not a user error)."""
        raise ValueError("boom while scoring")


@pytest.fixture(scope="module")
def failing_sweep(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """4 jobs: data present or an empty folder (a DataError at load) x the rating task or one whose scoring raises a
    ValueError (an unexpected exception); only (data, rating task) can finish. (A setting out of range, such as
    task.fallback_rating=abc, is refused as a user error before the job loads anything: not an unexpected one.)"""
    tmp = tmp_path_factory.mktemp("sweep")
    (tmp / "empty").mkdir()
    sweep = tmp / "sweep"
    r = _cli(tmp, "-m", "task=llmrec_rating", "method=user_mean", "limit=5", "run.progress=false",
             f"task.data_dir={bundled_data('llmrec_sample/reviews')},{tmp / 'empty'}",
             "task._target_=recbench.tasks.llmrec.task.RatingTask,tests.core.test_core_sweep_checks.ScoreBoom",
             f"hydra.sweep.dir={sweep}")
    return r, sweep


def test_failed_jobs_spare_their_siblings_and_set_the_exit_code(failing_sweep):
    r, sweep = failing_sweep
    assert r.returncode == 2, r.stderr[-2000:]
    assert "sweep finished with 3 failed or incomplete job(s)" in r.stderr
    failed = sorted(sweep.rglob("job_failed.json"))
    assert len(failed) == 3
    info = [json.loads(f.read_text()) for f in failed]
    assert sum("ValueError" in i["error"] for i in info) == 1  # the unexpected exception is recorded, not raised
    assert sum("reviews not found" in i["error"] for i in info) == 2
    assert all(i["exit_code"] == 2 and i["traceback_tail"] for i in info)
    ok = [f for f in sweep.rglob("metrics.json") if not (f.parent / "job_failed.json").exists()]
    assert len(ok) == 1 and json.loads(ok[0].read_text())["complete"]  # the sibling finished


def test_sweep_report_lists_failed_jobs_and_results_json_loads(failing_sweep):
    _, sweep = failing_sweep
    md = (sweep / "report" / "report.md").read_text()
    assert "## Failed jobs (3)" in md and md.count("(exit 2)") == 3
    assert "Failed jobs (3)" in (sweep / "report" / "report.html").read_text()
    res = load_results(sweep / "report" / "results.json")
    assert res.schema_version == 1 and len(res.runs) == 1 and len(res.failed_jobs) == 3
    run = res.runs[0]
    m = json.loads((Path(run.run_dir) / "metrics.json").read_text())
    assert (run.task, run.model, run.method, run.complete) == ("llmrec_rating", "none", "user_mean", True)
    assert run.metrics["mae"].mean == m["metrics"]["mae"]["mean"]
    assert (run.metrics["mae"].ci_low, run.metrics["mae"].ci_high, run.metrics["mae"].n) == \
        (m["metrics"]["mae"]["ci_low"], m["metrics"]["mae"]["ci_high"], 5)
    assert run.counts["examples"] == 5
