"""Honest reports (issue 16): a run with most answers unparsed is never a summary's best method, the chosen method is
named in Markdown and CSV, ties are ties, missing slices say why, fallback-scored metrics say so (report and terminal),
`limit` keeps PerRecBench's difficulty shape, and the predictions model reads answers instead of calling a backend."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from recbench.cli.summary import print_summary
from recbench.store.schema import RunResult

from recbench.run.evaluate import run_from_config
from recbench.report import build_report, write_report
from recbench.report.directions import Directions
from recbench.report.tables import Cell, Table, mark_best
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg

pytestmark = pytest.mark.full

REPO = Path(__file__).resolve().parents[2]


def _run(root: Path, name: str, overrides: list[str], backend=None) -> dict:
    cfg = compose_cfg([f"cache.path={root / 'cache.sqlite'}", "run.progress=false", "run.bootstrap_resamples=200",
                       *overrides])
    return run_from_config(cfg, root / name, backend=backend).to_dict()


def forward_listwise(req) -> str:
    """Users in label order A, B, C...: parses on every example."""
    text = req.messages[-1][1]
    n = int(text.split(" users all rated")[0].strip().split()[-1])
    return '{"ranking": [' + ", ".join(f'"User {chr(65 + i)}"' for i in range(n)) + "]}"


def _garbage(req) -> str:
    return "I cannot tell."


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """PerRecBench: model smollm2 (scripted) pointwise (every answer unparsed, PTC 0) and listwise (parsed, negative
    PTC); gpt35-turbo (scripted) pointwise only (unparsed); random reference. LLMRec rating: zero_shot of smollm2 with
    unparsed answers. The scripted backend stands in for the configured model (metrics.json names the config's)."""
    root = tmp_path_factory.mktemp("honest")
    _run(root, "perrec/lm/pointwise", ["method=pointwise", "limit=12"], ScriptedBackend(_garbage, name="lm"))
    _run(root, "perrec/lm/listwise", ["method=listwise", "limit=12"], ScriptedBackend(forward_listwise, name="lm"))
    _run(root, "perrec/dead/pointwise", ["method=pointwise", "limit=12", "model=gpt35-turbo"], ScriptedBackend(_garbage, name="dead-lm"))
    _run(root, "perrec/none/random", ["method=random", "limit=12"])
    _run(root, "rating/lm/zero_shot", ["task=llmrec_rating", "method=zero_shot", "limit=3"],
         ScriptedBackend(_garbage, name="lm"))
    return root


def _m(d: Path) -> dict:
    return json.loads((d / "metrics.json").read_text())


def test_limit_is_stratified_by_difficulty_by_default(runs):
    recs = [json.loads(x) for x in (runs / "perrec/lm/listwise/samples.jsonl").read_text().splitlines()]
    assert sorted(pd.Series([r["meta"]["difficulty"] for r in recs]).value_counts().items()) == \
        [("easy", 4), ("hard", 4), ("medium", 4)]


def test_failed_run_is_not_best_method_and_the_method_is_named(runs, tmp_path):
    pw, lw = _m(runs / "perrec/lm/pointwise"), _m(runs / "perrec/lm/listwise")
    assert pw["counts"]["parse_failed"] == 12 and lw["counts"]["parse_failed"] == 0
    assert pw["metrics"]["ptc"]["mean"] > lw["metrics"]["ptc"]["mean"]  # the failed run would win on value
    rep = build_report([runs])
    summ = next(t for t in rep.tables if t.id == "summary")
    rows = {lbl[0]: cells for lbl, cells in summ.rows}
    cell = rows["smollm2"][0]
    assert cell.chosen == "listwise" and cell.mean == lw["metrics"]["ptc"]["mean"]
    dead = rows["gpt35-turbo"][0]
    assert dead.shown == "no valid run" and dead.mark is None
    assert "smollm2 · perrec · pointwise (100% parse failures)" in summ.caption
    # Markdown and CSV name the method too
    out = write_report([runs], tmp_path / "rep", formats=("md", "csv"))
    md = out["md"].read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("| smollm2 | best per task"))
    assert "· listwise" in line.split("|")[3]
    assert "no valid run" in next(ln for ln in md.splitlines() if ln.startswith("| gpt35-turbo |"))
    tables = pd.read_csv(out["tables_csv"])
    s = tables[tables["table"] == "summary"].set_index("model / baseline")
    col = next(c for c in s.columns if c.startswith("PerRecBench") and c.endswith("· method"))
    assert s.loc["smollm2", col] == "listwise" and s.loc["gpt35-turbo", col] == "no valid run"
    # with the bound at 100% every run is eligible: the value decides
    rep1 = build_report([runs], max_parse_failure_rate=1.0)
    s1 = next(t for t in rep1.tables if t.id == "summary")
    assert next(c for lbl, c in s1.rows if lbl[0] == "smollm2")[0].chosen == "pointwise"


def test_cli_max_parse_failure_rate_option(runs, tmp_path):
    r = subprocess.run([sys.executable, "-m", "recbench.report", str(runs), "-o", str(tmp_path / "o"),
                        "--formats", "md", "--max-parse-failure-rate", "1.0"], capture_output=True, text=True,
                       timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in (tmp_path / "o/report.md").read_text().splitlines() if ln.startswith("| smollm2 |"))
    assert "· pointwise" in line
    bad = subprocess.run([sys.executable, "-m", "recbench.report", str(runs), "--max-parse-failure-rate", "0"],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert bad.returncode == 2 and "--max-parse-failure-rate=0.0: must be in (0, 1]" in bad.stderr


def test_fallback_scored_metrics_are_marked_in_the_report(runs):
    m = _m(runs / "rating/lm/zero_shot")
    assert m["extra"]["n_fallback"] == 3 and m["counts"]["parse_failed"] == 3
    rep = build_report([runs])
    t = next(t for t in rep.tables if t.id == "llmrec-llmrec_rating")
    cells = dict(zip([c[0] for c in t.columns], t.rows[0][1]))
    assert "parsed" not in cells
    assert cells["mae"].fallback == (3, 3) and "3 of 3 fallback" in cells["mae"].count_text
    assert cells["mae"].mean == m["extra"]["mae"]


def test_terminal_summary_marks_fallback_drops_parsed_and_explains(runs, capsys):
    m = _m(runs / "rating/lm/zero_shot")
    print_summary(RunResult.from_dict(m))
    out = capsys.readouterr().out
    assert "mae (3 of 3 fallback)" in out and f"│ {m['metrics']['mae']['mean']:.3f} " in out  # marked in its header
    assert "│ parsed" not in out and "parsed 0 |" in out  # the count stays, the pseudo-metric row is gone
    assert "repaired = answers parsed after a fix-up" in out
    assert "limit=3, chosen stratified by rating" in out and "backend calls 3" in out


def test_predictions_model_says_answers_read_from_file(runs, tmp_path, capsys):
    ids = [json.loads(x)["id"] for x in (runs / "rating/lm/zero_shot/samples.jsonl").read_text().splitlines()]
    f = tmp_path / "preds.jsonl"
    f.write_text("".join(json.dumps({"id": i, "response": "4 stars"}) + "\n" for i in ids))
    cfg = compose_cfg([f"cache.path={tmp_path / 'c.sqlite'}", "run.progress=false", "task=llmrec_rating",
                       "method=zero_shot", "limit=3", "model=predictions", f"model.backend.path={f}"])
    m = run_from_config(cfg, tmp_path / "run")
    print_summary(m)
    out = capsys.readouterr().out
    assert "answers read from file 3" in out and "backend calls" not in out
    assert "fallback:" not in out  # no fallback line: every answer parsed (a metric's meaning may name the fallback)


def test_missing_slices_are_named_with_the_reason(tmp_path):
    _run(tmp_path, "lw", ["method=listwise", "limit=2", "run.limit_strategy=first"],
         ScriptedBackend(forward_listwise, name="lm"))
    _run(tmp_path, "bm25", ["method=bm25_history", "task.difficulties=[easy,hard]", "limit=4"])
    rep = build_report([tmp_path])
    t1 = next(t for t in rep.tables if t.id == "perrec-table1")
    assert "Not run: medium, hard: not in limit=2 (run.limit_strategy=first)." in t1.caption
    ref = next(t for t in rep.tables if t.id == "perrec-reference")
    assert "Not run: medium: not in task.difficulties=[easy,hard]." in ref.caption


def _table(values: list[float | None], refs: int = 0) -> Table:
    rows = [([f"r{i}"], [Cell(metric="ptc", mean=v)]) for i, v in enumerate(values)]
    return Table(id="t", title="t", caption="", row_header=["row"], header=[], columns=[("ptc",)], rows=rows)


@pytest.mark.parametrize("values,refs,marks,ties", [
    # equal as displayed (3 decimals) = a tie for best: same mark, flagged
    ([0.2, 0.2004, 0.1], [], ["best", "best", "second"], [True, True, False]),
    # a model tied with the reference row (index 2) is not second best; the reference keeps its mark
    ([0.3, 0.0, 0.0], [2], ["best", None, "second"], [False, False, True]),
    ([0.3, 0.0, 0.0, -0.1], [], ["best", "second", "second", None], [False, True, True, False]),
])
def test_ties_share_the_mark_and_a_reference_tie_is_not_second(values, refs, marks, ties):
    t = _table(values)
    mark_best(t, Directions(), reference_rows=refs)
    assert [c[0].mark for _, c in t.rows] == marks
    assert [c[0].tie for _, c in t.rows] == ties
