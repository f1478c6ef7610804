"""Published RecBench+ numbers in the report (issue 13): a '<model> (published)' row under the measured row only for
runs of the released query files of the published domain, cut-off, method and model, and a mark on each measured cell whose
published value lies outside its 95% CI."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from recbench.run.construct import bundled_data

from recbench.run.evaluate import run_from_config
from recbench.report.published import load_benchmark, load_file, outside_ci, published_dir
from recbench.report import build_report, write_report
from recbench.report.published_rows import OUTSIDE_MARK
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast

SAMPLE = Path(bundled_data("recbench_plus_sample"))


def _answer_fn(qfile: Path):
    """Even-numbered queries get their ground-truth titles (plus one miss), odd ones two wrong titles."""
    recs = json.loads(qfile.read_text())
    by_query = {r["situational_description_query"]: (i, r["movieSubset"]) for i, r in enumerate(recs)}

    def answer(req) -> str:
        text = req.messages[-1][1]
        i, gt = next(v for q, v in by_query.items() if q in text)
        return " [SEP] ".join(gt + ["Nowhere Film (1990)"]) if i % 2 == 0 else "Nowhere Film [SEP] Other Film"
    return answer


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pubrb")
    movie = root / "movie-ExplicitQuery.json"
    shutil.copy(SAMPLE / "movie-ExplicitQuery.json", movie)
    book = root / "book-ExplicitQuery.json"  # same queries; the file name makes the loader call them books
    shutil.copy(SAMPLE / "movie-ExplicitQuery.json", book)
    jobs = {"released_movie": ("recbench_plus_released", "deepseek-r1", [f"task.data.path={movie}"]),
            "released_movie_k5": ("recbench_plus_released", "deepseek-r1", [f"task.data.path={movie}", "method.k=5"]),
            "released_movie_other_model": ("recbench_plus_released", "gpt4o", [f"task.data.path={movie}"]),
            "released_book": ("recbench_plus_released", "deepseek-r1", [f"task.data.path={book}"]),
            "bundle": ("recbench_plus", "deepseek-r1", ["task.types=[explicit]"])}
    for name, (task, model, extra) in jobs.items():
        cfg = compose_cfg([f"cache.path={root / 'c.sqlite'}", "run.progress=false", "run.bootstrap_resamples=200",
                           f"task={task}", f"model={model}", "method=assistant", *extra])
        run_from_config(cfg, root / "runs" / name, backend=ScriptedBackend(_answer_fn(movie), name="scripted"))
    return root / "runs"


def _table(dirs):
    return next(t for t in build_report(dirs).tables if t.id == "recbench-plus")


def test_the_file_holds_the_release_numbers_digit_for_digit():
    cells = {(c.model, c.method, c.value, c.metric): c.published for c in load_benchmark("recbench_plus")}
    assert cells[("deepseek-r1", "assistant", "explicit", "recall")] == 0.4467789161981536
    assert cells[("deepseek-r1", "assistant", "explicit", "ftr")] == 0.0008004802881729037
    assert cells[("deepseek-r1", "assistant", "explicit", "cmr")] == 0.6508981436837104
    assert {c.applies_to for c in load_benchmark("recbench_plus")} == {("released:movie",)}


def test_published_row_sits_under_the_released_movie_row_and_marks_cells_outside_the_ci(runs, tmp_path):
    t = _table([runs / "released_movie"])
    labels = [lbl for lbl, _ in t.rows]
    assert labels == [["deepseek-r1", "without history"], ["deepseek-r1 (published)", "without history"]]
    measured, published = (dict(zip(t.columns, cells)) for _, cells in t.rows)
    pub = {c.metric: c for c in load_benchmark("recbench_plus")}
    flagged = 0
    for (qtype, metric), cell in measured.items():
        if qtype != "explicit" or metric not in pub:
            assert published[(qtype, metric)].missing  # nothing published for the overall columns
            continue
        p = pub[metric]
        assert published[(qtype, metric)].mean == p.published
        out = outside_ci(p.published, p.rounding, cell.ci_low, cell.ci_high)
        assert (OUTSIDE_MARK in cell.ref_mark) == bool(out), (metric, cell.ci_low, cell.ci_high, p.published)
        flagged += bool(out)
    # every scripted answer has [SEP]: measured FTR is 0 with CI [0, 0], the release's 0.0008 lies outside
    assert OUTSIDE_MARK in measured[("explicit", "ftr")].ref_mark
    # half the answers hold every ground-truth title: recall's CI covers the release's 0.447
    r = measured[("explicit", "recall")]
    assert r.ci_low <= pub["recall"].published <= r.ci_high and OUTSIDE_MARK not in r.ref_mark
    assert flagged >= 1 and f"({flagged} cell(s))" in t.caption
    md = write_report([runs / "released_movie"], tmp_path / "r", formats=("md",))["md"].read_text()
    assert "| deepseek-r1 (published) | without history |" in md


@pytest.mark.parametrize("run", ["released_movie_k5", "released_movie_other_model", "released_book", "bundle"])
def test_no_published_row_for_other_data_domain_cutoff_or_model(runs, run):
    t = _table([runs / run])
    assert all("published" not in lbl[0] for lbl, _ in t.rows) and "published" not in t.caption
    assert all(OUTSIDE_MARK not in c.ref_mark for _, cells in t.rows for c in cells)


def test_a_multi_metric_cell_must_map_the_files_metrics(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("benchmark: b\nslice: query_type\nmetrics: [recall]\napplies_to: [t]\nsource: s\n"
                 "models:\n  m: {assistant: {explicit: {precision: 0.1}}}\n")
    with pytest.raises(ValueError, match=r"x.yaml: models.m.assistant.explicit.precision is not one of the file's"):
        load_file(p)
    p.write_text("benchmark: b\nslice: query_type\nmetrics: [recall]\napplies_to: [t]\nsource: s\n"
                 "models:\n  m: {assistant: {explicit: 0.1}}\n")
    with pytest.raises(ValueError, match=r"models.m.assistant.explicit must map metric names"):
        load_file(p)
    assert (published_dir() / "recbench_plus.yaml").exists()
