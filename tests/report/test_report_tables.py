"""Report writer on real run dirs (reference baselines + a scripted model on PerRecBench, RecBench+, LLMRec):
table layouts, seed aggregation, missing cells, pooled subset runs, Markdown/CSV/HTML agree with metrics.json."""
from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from tests.doubles import ScriptedBackend

from recbench.run.evaluate import run_from_config
from recbench.stats.bootstrap import summarize
from recbench.report import build_report, write_report
from recbench.report.numbers import MISSING
from tests.helpers import compose_cfg, listwise_answer

pytestmark = pytest.mark.full

REPO = Path(__file__).resolve().parents[2]


def _run(root: Path, name: str, overrides: list[str], backend=None) -> dict:
    cfg = compose_cfg([f"cache.path={root / 'cache.sqlite'}", "run.progress=false", *overrides])
    return run_from_config(cfg, root / name, backend=backend).to_dict()


def _pointwise_answer(req) -> str:
    return "4" if "User A" in req.messages[-1][1][:400] else "3"


def _titles_answer(req) -> str:
    return "Toy Story [SEP] Heat [SEP] Casino"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """A small 'sweep': PerRecBench (scripted model x 2 methods, 2 seeds of random, bm25), RecBench+ (scripted,
    with/without history), LLMRec rating + direct baselines."""
    root = tmp_path_factory.mktemp("runs")
    diffs = "task.difficulties=[easy,medium]"
    m = ScriptedBackend(listwise_answer, name="scripted-lm")
    _run(root, "perrec/scripted/listwise", ["method=listwise", diffs, "limit=50"], m)
    _run(root, "perrec/scripted/pointwise", ["method=pointwise", diffs, "limit=50"],
         ScriptedBackend(_pointwise_answer, name="scripted-lm"))
    for seed in (0, 1):
        _run(root, f"perrec/none/random/seed={seed}", ["method=random", diffs, f"seed={seed}", "limit=50"])
    _run(root, "perrec/none/bm25_history", ["method=bm25_history", diffs, "limit=50"])
    rb = ScriptedBackend(_titles_answer, name="scripted-lm")
    _run(root, "recbench_plus/scripted/assistant", ["task=recbench_plus", "method=assistant", "limit=15"], rb)
    _run(root, "recbench_plus/scripted/assistant_history", ["task=recbench_plus", "method=assistant_history",
                                                            "limit=15"], rb)
    _run(root, "llmrec_rating/none/user_mean", ["task=llmrec_rating", "method=user_mean"])
    _run(root, "llmrec_direct/none/popularity", ["task=llmrec_direct", "method=popularity"])
    return root


def _metrics(d: Path) -> dict:
    return json.loads((d / "metrics.json").read_text())


def _get(m: dict, path: str):
    node = m
    parts = path.split(".")
    i = 0
    while i < len(parts):  # metric names may contain dots? they do not; breakdown values are plain strings
        node = node[parts[i]]
        i += 1
    return node


def test_perrec_table1_layout_marks_and_values(runs):
    rep = build_report([runs])
    t1 = next(t for t in rep.tables if t.id == "perrec-table1")
    assert t1.columns[:2] == [("pointwise", "easy"), ("pointwise", "medium")]
    assert ("listwise", "easy") in t1.columns and t1.columns[-1] == ("average", "")
    assert [lbl for lbl, _ in t1.rows] == [["smollm2"]]  # metrics.json names the configured model
    cells = dict(zip(t1.columns, t1.rows[0][1]))
    m = _metrics(runs / "perrec/scripted/listwise")
    assert cells[("listwise", "easy")].mean == m["breakdown"]["difficulty"]["easy"]["metrics"]["ptc"]["mean"]
    assert cells[("listwise", "medium")].n == m["breakdown"]["difficulty"]["medium"]["metrics"]["ptc"]["n"]
    vals = [c.mean for c in t1.rows[0][1][:-1]]
    assert cells[("average", "")].mean == pytest.approx(sum(vals) / len(vals))
    # reference rows: random over two seeds is one row, mean and sd over the seeds
    ref = next(t for t in rep.tables if t.id == "perrec-reference")
    rows = {lbl[0]: cells for lbl, cells in ref.rows}
    assert set(rows) == {"bm25_history", "random", "random (expected)"}  # + the exact expectation (PTC 0)
    per_seed = [_metrics(runs / f"perrec/none/random/seed={s}")["metrics"]["ptc"]["mean"] for s in (0, 1)]
    overall = rows["random"][-1]
    assert overall.n_seeds == 2
    assert overall.mean == pytest.approx(statistics.mean(per_seed))
    assert overall.sd == pytest.approx(statistics.stdev(per_seed))
    # best / second best per column among the model rows of the summary
    summ = next(t for t in rep.tables if t.id == "summary")
    marks = [cells[0].mark for _, cells in summ.rows if not cells[0].missing]
    assert marks.count("best") >= 1 and "second" in marks


def test_recbench_plus_by_query_type_and_history(runs):
    rep = build_report([runs])
    t = next(t for t in rep.tables if t.id == "recbench-plus")
    types = [c[0] for c in t.columns]
    assert types[0] == "explicit" and "all" in types
    assert {c[1] for c in t.columns} >= {"recall", "precision", "ftr"}
    assert sorted(lbl[1] for lbl, _ in t.rows) == ["with history", "without history"]
    row = next(cells for lbl, cells in t.rows if lbl[1] == "without history")
    cell = row[t.columns.index(("explicit", "recall"))]
    m = _metrics(runs / "recbench_plus/scripted/assistant")
    assert cell.mean == m["breakdown"]["query_type"]["explicit"]["metrics"]["recall"]["mean"]


def test_llmrec_tables_per_task(runs):
    rep = build_report([runs])
    rating = next(t for t in rep.tables if t.id == "llmrec-llmrec_rating")
    assert [c[0] for c in rating.columns] == ["rmse", "mae"]
    m = _metrics(runs / "llmrec_rating/none/user_mean")
    assert rating.rows[0][1][0].mean == m["extra"]["rmse"]  # corpus RMSE from extra
    direct = next(t for t in rep.tables if t.id == "llmrec-llmrec_direct")
    assert [c[0] for c in direct.columns] == ["hr@1", "hr@5", "ndcg@5", "hr@10", "ndcg@10"]


def test_summary_missing_cells_are_missing_not_zero(runs, tmp_path):
    out = write_report([runs], tmp_path / "rep")
    rep = build_report([runs])
    summ = next(t for t in rep.tables if t.id == "summary")
    tasks = [c[1].split(":")[0] for c in summ.columns]
    assert tasks[0] == "perrec" and "recbench_plus" in tasks and "llmrec_rating" in tasks
    random_row = next(cells for lbl, cells in summ.rows if lbl[0] == "random")
    assert random_row[0].n == 50 and not random_row[0].missing
    assert all(c.missing for c in random_row[1:])  # random was never run on RecBench+ / LLMRec
    md = out["md"].read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("| random | reference"))
    assert line.count(MISSING) == len(tasks) - 1 and "0.000 " not in line.split("|", 4)[-1]
    # CSV: the missing cells are absent / NaN, never 0
    tables = pd.read_csv(out["tables_csv"])
    srow = tables[(tables["table"] == "summary") & (tables["model / baseline"] == "random")].iloc[0]
    assert math.isnan(srow[[c for c in tables.columns if c.startswith("RecBench+")][0]])
    cells = pd.read_csv(out["csv"])
    m = _metrics(runs / "perrec/none/bm25_history")
    got = cells[(cells["method"] == "bm25_history") & (cells["slice"] == "difficulty") & (cells["value"] == "easy")
                & (cells["metric"] == "ptc")].iloc[0]
    assert got["mean"] == m["breakdown"]["difficulty"]["easy"]["metrics"]["ptc"]["mean"]
    assert got["ci_low"] == m["breakdown"]["difficulty"]["easy"]["metrics"]["ptc"]["ci_low"]


def test_subset_runs_are_combined_and_overall_pooled(tmp_path):
    """task.difficulties=[easy] and [medium] runs are one configuration: slices side by side, overall pooled."""
    for d in ("easy", "medium"):
        _run(tmp_path, f"bm25/{d}", ["method=bm25_history", f"task.difficulties=[{d}]", "limit=30"])
    rep = build_report([tmp_path])
    ref = next(t for t in rep.tables if t.id == "perrec-reference")
    assert len(ref.rows) == 2 and [c[0] for c in ref.columns] == ["easy", "medium", "all"]
    assert ref.rows[1][0] == ["random (expected)"]  # the exact expectation row comes last
    easy, medium, overall = ref.rows[0][1]
    assert easy.mean == _metrics(tmp_path / "bm25/easy")["breakdown"]["difficulty"]["easy"]["metrics"]["ptc"]["mean"]
    assert overall.pooled and overall.n == 60
    vals = [json.loads(line)["metrics"]["ptc"] for d in ("easy", "medium")
            for line in (tmp_path / f"bm25/{d}/samples.jsonl").read_text().splitlines()]
    assert overall.mean == pytest.approx(summarize(vals)["mean"])


def test_cli_writes_every_format_and_fails_cleanly_on_a_missing_dir(runs, tmp_path):
    r = subprocess.run([sys.executable, "-m", "recbench.report", str(runs), "-o", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for f in ("report.md", "report.html", "cells.csv", "runs.csv", "tables.csv"):
        assert (tmp_path / "out" / f).stat().st_size > 0
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<script" not in html and "http://" not in html and "https://" not in html  # self-contained
    assert html.count("data:image/png;base64,") >= 3
    bad = subprocess.run([sys.executable, "-m", "recbench.report", str(tmp_path / "nope")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("recbench: error: ") and "nope: no such folder" in bad.stderr


def test_tables_carry_a_legend_and_no_empty_parse_failure_chart(runs, tmp_path):
    from recbench.report.legends import legend_lines, table_metrics

    out = write_report([runs], tmp_path / "rep")
    rep = build_report([runs])
    html, md = out["html"].read_text(), out["md"].read_text()
    rb = next(t for t in rep.tables if "cmr" in table_metrics(t))
    cmr = next(x for x in legend_lines(table_metrics(rb)) if x.startswith("cmr:"))
    assert "defined on condition queries only (explicit, implicit, misinformed)" in cmr
    assert f'data-legend="{rb.id}"' in html and cmr.replace("'", "&#39;") in html and f"- {cmr}" in md
    ptc = next(x for x in legend_lines(["ptc"]))
    assert ptc.startswith("ptc: personalization tau correlation") and ptc in md
    failed = sum(_metrics(d.parent).get("counts", {}).get("parse_failed", 0) or 0 for d in runs.rglob("metrics.json")
                 if "/scripted/" in d.as_posix())  # model runs: the chart leaves reference rows out
    assert (failed == 0) == ('id="parse-failures"' not in html)
