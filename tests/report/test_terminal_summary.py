"""The terminal summary a person reads (issue 23, item 4), pinned on real runs of model-free methods: the headline
first and marked, slices in the task's own order, repeated or empty metric rows folded into one line, every table at
most 120 columns, a sweep's one side-by-side table, and the `compare` table within 120 columns."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recbench.run.evaluate import run_from_config
from recbench.store.schema import RunResult
from recbench.cli.summary import MAX_WIDTH, fold, print_summary, run_tables, slice_rows
from recbench.cli.terminal import iter_lines
from recbench.api.task import Task
from tests.helpers import compose_cfg

pytestmark = pytest.mark.full

REPO = Path(__file__).resolve().parents[2]
BOX = set("┏┃┡│├└")  # first characters of rich table lines (default box)


def _run(tmp_path: Path, name: str, overrides: list[str]) -> RunResult:
    cfg = compose_cfg([f"cache.path={tmp_path / 'cache.sqlite'}", "run.progress=false", "run.bootstrap_resamples=200",
                       *overrides])
    return run_from_config(cfg, tmp_path / name)


def _table_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln[:1] in BOX]


def _rows(text: str) -> list[str]:
    """Data rows of the printed tables (lines starting with '│' whose first cell is not empty)."""
    return [ln for ln in text.splitlines() if ln.startswith("│") and ln[1:].split("│")[0].strip()]


@pytest.fixture(scope="module")
def perrec(tmp_path_factory) -> dict:
    return _run(tmp_path_factory.mktemp("perrec"), "bm25", ["method=bm25_history"])


@pytest.fixture(scope="module")
def sequential(tmp_path_factory) -> dict:
    return _run(tmp_path_factory.mktemp("seq"), "pop", ["task=llmrec_sequential", "method=popularity"])


@pytest.fixture(scope="module")
def recbench_plus(tmp_path_factory) -> dict:
    """RecBench+ on 4 bundled queries, every answer empty (the predictions model replays a file with no match)."""
    d = tmp_path_factory.mktemp("rbp")
    f = d / "none.jsonl"
    f.write_text(json.dumps({"id": "none", "response": ""}) + "\n")
    return _run(d, "rbp", ["task=recbench_plus", "method=assistant", "model=predictions", f"model.backend.path={f}",
                           "model.backend.on_missing=empty", "limit=4"])


def test_perrec_headline_marked_slices_in_task_order_parsed_folded(perrec, capsys):
    assert list(perrec.breakdown["difficulty"]) == ["easy", "medium", "hard"]  # metrics.json in the task's order
    assert list(perrec.breakdown["history"]) == ["short", "mid", "long"]
    print_summary(perrec)
    out = capsys.readouterr().out
    header = next(ln for ln in out.splitlines() if ln.startswith("┃"))
    assert [c.strip() for c in header.strip("┃").split("┃")] == ["slice", "n", "★ ptc"]  # one metric column
    labels = [ln[1:].split("│")[0].strip() for ln in _rows(out)]
    assert labels == ["all", "difficulty=easy", "difficulty=medium", "difficulty=hard", "popularity=low",
                      "popularity=high", "history=short", "history=mid", "history=long"]
    m = perrec.metrics["ptc"]
    assert f"│ all               │ 120 │ {m.mean:.3f} [{m.ci_low:.3f}, {m.ci_high:.3f}] │" in out
    assert "folded (all values in metrics.json): ptc_parsed = ptc on every slice" in out
    assert "repaired = " not in out  # nothing repaired or failed: no legend


def test_parse_failures_keep_ptc_parsed_as_its_own_column(tmp_path):
    """ptc_parsed differs from ptc once a group fails: both are shown, the failed group is counted in n."""
    metrics = RunResult.from_dict({
        "schema_version": 2, "task": {"name": "perrec"}, "model": "m", "method": "listwise", "headline_metric": "ptc",
        "counts": {"examples": 3},
        "metrics": {"ptc": {"mean": 0.0, "ci_low": -1.0, "ci_high": 1.0, "n": 3},
                    "ptc_parsed": {"mean": 0.5, "ci_low": 0.0, "ci_high": 1.0, "n": 2},
                    "parsed": {"mean": 2 / 3, "ci_low": 0.0, "ci_high": 1.0, "n": 3}},
        "breakdown": {}})
    f = fold(metrics)
    assert f.shown == ["ptc", "ptc_parsed"] and f.notes() == []
    tables, _, with_ci = run_tables(metrics)
    assert with_ci
    text = "\n".join(iter_lines(tables))
    assert "0.500 [0.000, 1.000] (n=2)" in text and "parsed │" not in text


def test_llmrec_sequential_ndcg1_folds_into_hr1_and_fits_one_table(sequential, capsys):
    assert list(sequential.breakdown["history"]) == ["<=4", "5-9", "10+"]
    assert list(sequential.breakdown["popularity"]) == ["low", "mid", "high"]
    f = fold(sequential)
    assert f.shown[0] == "ndcg@10" and "ndcg@1" not in f.shown and f.same_as["hr@1"] == ["ndcg@1"]
    print_summary(sequential)
    out = capsys.readouterr().out
    lines = _table_lines(out)
    assert lines and max(len(ln) for ln in lines) <= MAX_WIDTH
    assert "ndcg@1 = hr@1 on every slice" in out
    header = next(ln for ln in out.splitlines() if ln.startswith("┃"))
    assert [c.strip() for c in header.strip("┃").split("┃")][:7] == ["slice", "n", "★ ndcg@10", "hr@1", "hr@5",
                                                                     "ndcg@5", "hr@10"]
    assert "arp@10" in header  # the list metrics (issue 41) follow the accuracy metrics
    # the metrics with their CIs do not fit 120 columns: the headline keeps its CI, the others show means
    m = sequential.metrics
    row = next(ln for ln in _rows(out) if ln.startswith("│ all "))
    assert f"{m['ndcg@10'].mean:.3f} [{m['ndcg@10'].ci_low:.3f}, {m['ndcg@10'].ci_high:.3f}]" in row
    assert f"│ {m['hr@10'].mean:.3f} │" in row and "other metrics: mean (CIs in metrics.json)" in out
    # 10 slices (all, 3 history, 3 popularity, 3 activity) in each of two tables: was 42 rows in one per metric
    assert len(_rows(out)) == 20 and out.count("┏") == 2


def test_recbench_plus_empty_and_equal_metrics_are_one_line(recbench_plus, capsys):
    assert list(recbench_plus.breakdown["query_type"]) == ["explicit", "implicit", "misinformed", "interest"]
    f = fold(recbench_plus)
    assert f.shown[0] == "recall"
    assert {"invalid_rate", "duplicate_rate"} <= set(f.empty)  # "—" on every slice (no answer parsed)
    assert "precision" in f.same_as["recall"]  # every answer empty: 0 everywhere, like recall
    print_summary(recbench_plus)
    out = capsys.readouterr().out
    assert max(len(ln) for ln in _table_lines(out)) <= MAX_WIDTH
    assert "no value on any slice: invalid_rate, duplicate_rate" in out
    assert "(n=3)" in out  # cmr is defined on 3 of the 4 queries
    # 15 slices (query type, conditions, and the user groups of issue 41: activity, gender, age, occupation), one
    # table: was 70 rows
    assert len(_rows(out)) == 15 and out.count("┏") == 1


def test_slice_values_declared_order_then_natural():
    class T(Task):
        breakdown_order = {"difficulty": ("easy", "medium", "hard")}

        def load(self):
            return []

        def score(self, example, outcome):
            return {}

    t = T({})
    assert t.slice_values("difficulty", {"hard", "easy", "medium", "extra"}) == ["easy", "medium", "hard", "extra"]
    assert t.slice_values("condition_num", {"10", "2", "1", "None"}) == ["1", "2", "10", "None"]


def test_narrow_widths_split_columns_and_rows_stay_whole(sequential):
    for width in (80, MAX_WIDTH):
        tables, folded, _ = run_tables(sequential, width)
        lines = list(iter_lines(tables, width))
        assert max(len(ln) for ln in lines) <= width
        assert sum(len(t.columns) - 2 for t in tables) == len(folded.shown)  # every shown metric once
        assert all(len(t.rows) == len(slice_rows(sequential)) for t in tables)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    root = tmp_path_factory.mktemp("sweep")
    env = {**os.environ, "RECBENCH_RUNS_DIR": str(root / "runs"), "RECBENCH_CACHE_DIR": str(root / "cache"),
           "COLUMNS": "200"}
    r = subprocess.run([sys.executable, "-m", "recbench", "-m", "method=random,bm25_history,user_avg", "limit=12",
                        "run.progress=false"], capture_output=True, text=True, timeout=600, cwd=REPO, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return root, r


def test_sweep_ends_with_one_side_by_side_table_and_the_report_path(sweep):
    root, r = sweep
    out = r.stdout
    assert out.count("┏") == 1  # one table: no per-job tables
    assert sum(1 for ln in out.splitlines() if "| method=" in ln and "★ ptc" in ln) == 3  # one line per job
    rows = _rows(out)
    assert [ln.split("│")[1].strip() for ln in rows] == ["none · bm25_history · limit=12", "none · random · limit=12",
                                                          "none · user_avg · limit=12"]  # best headline first
    header = next(ln for ln in out.splitlines() if ln.startswith("┃"))
    assert [c.strip() for c in header.strip("┃").split("┃")] == ["run", "n", "parse fail", "★ ptc", "mae", "mse"]
    assert max(len(ln) for ln in _table_lines(out)) <= MAX_WIDTH
    report = next(ln for ln in out.splitlines() if ln.startswith("sweep report: "))
    assert Path(report.split(": ", 1)[1]).is_file() and out.count("sweep report: ") == 1
    bm25 = json.loads(next((root / "runs/sweeps").rglob("bm25_history/limit=12/metrics.json")).read_text())
    m = bm25["metrics"]["ptc"]
    assert f"{m['mean']:.3f} [{m['ci_low']:.3f}, {m['ci_high']:.3f}]" in rows[0]


def test_compare_table_fits_120_columns(sweep):
    root, _ = sweep
    sweep_dir = next((root / "runs/sweeps").iterdir())
    r = subprocess.run([sys.executable, "-m", "recbench.compare", str(sweep_dir), "--metric", "ptc",
                        "--resamples", "999"], capture_output=True, text=True, timeout=600, cwd=REPO,
                       env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr[-3000:]
    lines = _table_lines(r.stdout)
    assert lines and max(len(ln) for ln in lines) <= MAX_WIDTH  # was about 180
    assert r.stdout.count("┏") == 3  # one table per pair of runs, each named in its title
    assert "bm25_history/limit=12  vs  random/limit=12" in r.stdout  # by their labels, never a/b (the letters')
    header = next(ln for ln in r.stdout.splitlines() if ln.startswith("┃"))
    # the mean columns carry what tells the two runs apart (limit=12 is shared)
    assert [c.strip() for c in header.strip("┃").split("┃")] == ["slice", "n", "bm25_history", "random", "diff",
                                                                 "95% CI", "p", "p adj", "verdict"]
    assert "bm25_history better" in r.stdout or "user_avg better" in r.stdout
    text = " ".join(r.stdout.split())
    assert "paired comparisons of ptc" in text and "; test: permutation" in text  # shared by every row: said once


def test_sweep_table_lists_a_failed_job_last(perrec, tmp_path):
    root = tmp_path / "sweep"
    ok = root / "perrec/none/bm25_history/default"
    ok.mkdir(parents=True)
    (ok / "metrics.json").write_text(json.dumps(perrec.to_dict()))
    bad = root / "perrec/gpt4o/listwise/default"
    bad.mkdir(parents=True)
    (bad / "job_failed.json").write_text(json.dumps({"error": "BackendUnavailable: server down", "exit_code": 2}))
    from recbench.cli.sweep_table import sweep_table

    text = "\n".join(iter_lines([sweep_table(root)]))
    rows = _rows(text)
    assert len(rows) == 2 and "bm25_history" in rows[0]
    assert "│ gpt4o · listwise " in rows[1] and "│ failed: BackendUnavailable: server down" in rows[1]
