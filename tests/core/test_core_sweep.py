"""Sweeps checked before launch, and a job failing at run time sparing its siblings (issue 16, item 4), on the toy
task: every combination is composed and checked first (method for task, data, `???`, API-key variable); a bad one
stops the sweep with one message; a run-time failure leaves job_failed.json, the report lists it, the exit code says
so."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from recbench.cli.sweep import check_sweep, combinations, problems
from recbench.report.results import load_results
from recbench.store.result import Counts
from recbench.run.construct import register_resolvers
from tests.helpers import run_cli
from tests.toy import SEARCHPATH, TOY, isolate, toy_cfg, toy_cli
from tests.toy.task import DATA, ToyTask

pytestmark = pytest.mark.fast


def test_combinations_fan_out_sweeps_only():
    combos = combinations(["task=toy", "method=toy_popular,toy_rank", "seed=0,1", "limit=3"])
    assert combos == [["task=toy", "method=toy_popular", "seed=0", "limit=3"],
                      ["task=toy", "method=toy_popular", "seed=1", "limit=3"],
                      ["task=toy", "method=toy_rank", "seed=0", "limit=3"],
                      ["task=toy", "method=toy_rank", "seed=1", "limit=3"]]


def test_wrong_method_stops_the_sweep_before_any_job(tmp_path, monkeypatch, capfd):
    isolate(monkeypatch, tmp_path)
    r = run_cli(["-m", *TOY, "method=toy_popular,toy_rank,toy_foreign"], capfd)
    assert r.code == 2
    assert "sweep not started: 1 of 3 combination(s) cannot run" in r.err
    assert "method=toy_foreign: method 'toy_foreign' is not a method of task toy; valid: toy_popular, toy_rank" in r.err
    assert "Traceback" not in r.err and "Error executing job" not in r.err
    assert not (tmp_path / "runs").exists()  # nothing ran


def test_every_bad_combination_is_listed(monkeypatch, tmp_path):
    register_resolvers()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    bad, total = check_sweep(["-m", SEARCHPATH, "task=toy", "method=toy_popular,toy_rank", "model=gpt4o",
                              f"task.data_dir={tmp_path / 'nope'},{DATA.parent}"])
    assert total == 4 and len(bad) == 3
    nope = f"task.data_dir={tmp_path / 'nope'}: no such folder"
    key = "model gpt4o: environment variable OPENAI_API_KEY is not set"
    assert bad[0].startswith(f"method=toy_popular task.data_dir={tmp_path / 'nope'}:") and nope in bad[0] \
        and key not in bad[0]  # toy_popular calls no model: no key needed
    assert nope in bad[1] and key in bad[1]
    assert bad[2].startswith("method=toy_rank task.data_dir=") and key in bad[2] and "no such folder" not in bad[2]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert check_sweep(["-m", SEARCHPATH, "task=toy", "method=toy_popular,toy_rank", "model=gpt4o"]) == ([], 2)


def test_problems_name_required_keys_and_ranges():
    cfg = toy_cfg(["method=toy_popular", "run.ci_level=1.5"])
    assert problems(cfg) == ["run.ci_level=1.5: must be in (0, 1)"]
    cfg = toy_cfg(["method=toy_popular", "+task.needed=???"])
    assert problems(cfg) == ["required key(s) not set: task.needed=??? (give them on the command line)"]


class ScoreBoom(ToyTask):
    """The toy task whose scoring raises: an unexpected exception inside one sweep job (imported by the job)."""

    def score(self, example, outcome):
        """Raise a ValueError (a bug, not a user error)."""
        raise ValueError("boom while scoring")


@pytest.fixture(scope="module")
def failing_sweep(tmp_path_factory) -> tuple:
    """4 jobs: data present or an empty folder (an error at load) x the toy task or one whose scoring raises a
    ValueError (an unexpected exception); only (data, toy task) can finish. (A setting out of range is refused as a
    user error before the job loads anything: not an unexpected one.)"""
    tmp = tmp_path_factory.mktemp("sweep")
    (tmp / "empty").mkdir()
    sweep = tmp / "sweep"
    r = toy_cli(tmp, "-m", "method=toy_popular", "limit=5", f"task.data_dir={DATA.parent},{tmp / 'empty'}",
                "task._target_=tests.toy.task.ToyTask,tests.core.test_core_sweep.ScoreBoom",
                f"hydra.sweep.dir={sweep}")
    return r, sweep


@pytest.mark.full  # a sweep end to end in its own interpreter: 4 jobs and the report
def test_failed_jobs_spare_their_siblings_and_set_the_exit_code(failing_sweep):
    r, sweep = failing_sweep
    assert r.returncode == 2, r.stderr[-2000:]
    assert "sweep finished with 3 failed or incomplete job(s)" in r.stderr
    failed = sorted(sweep.rglob("job_failed.json"))
    assert len(failed) == 3
    info = [json.loads(f.read_text()) for f in failed]
    assert sum("ValueError" in i["error"] for i in info) == 1  # the unexpected exception is recorded, not raised
    assert sum("no file examples.jsonl" in i["error"] for i in info) == 2
    assert all(i["exit_code"] == 2 and i["traceback_tail"] for i in info)
    ok = [f for f in sweep.rglob("metrics.json") if not (f.parent / "job_failed.json").exists()]
    assert len(ok) == 1 and json.loads(ok[0].read_text())["complete"]  # the sibling finished


@pytest.mark.full
def test_sweep_report_lists_failed_jobs_and_results_json_loads(failing_sweep):
    _, sweep = failing_sweep
    md = (sweep / "report" / "report.md").read_text()
    assert "## Failed jobs (3)" in md and md.count("(exit 2)") == 3
    assert "Failed jobs (3)" in (sweep / "report" / "report.html").read_text()
    res = load_results(sweep / "report" / "results.json")
    assert res.schema_version == 1 and len(res.runs) == 1 and len(res.failed_jobs) == 3
    run = res.runs[0]
    m = json.loads((Path(run.run_dir) / "metrics.json").read_text())
    assert (run.task, run.model, run.method, run.complete) == ("toy", "none", "toy_popular", True)
    assert run.metrics["toy_tau"].mean == m["metrics"]["toy_tau"]["mean"]
    assert (run.metrics["toy_tau"].ci_low, run.metrics["toy_tau"].ci_high, run.metrics["toy_tau"].n) == \
        (m["metrics"]["toy_tau"]["ci_low"], m["metrics"]["toy_tau"]["ci_high"], 5)
    assert run.counts.examples == 5 and run.counts == Counts.from_dict(m["counts"])
