"""Presentation is declared data read by one builder: the Task class carries no report code, each benchmark package
declares its PRESENTATION, the builder draws a declared table from hand-made cells exactly, a missing breakdown
value is explained from the declared subset key, and one number formatter serves the report and the terminal."""
from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from recbench.api.task import Task
from recbench.report.builder import declared_table, slices_not_run
from recbench.report.directions import Directions
from recbench.report.numbers import MISSING, fmt, number
from recbench.report.presentation import GENERIC, Breakdown, Presentation, TableSpec, presentation_of
from recbench.report.tables import Index, ReportView

pytestmark = pytest.mark.fast

REPO = Path(__file__).resolve().parents[2]


# ---- the Task class has no report code ---------------------------------------------------------------------------
def test_task_module_imports_nothing_from_the_report():
    tree = ast.parse((REPO / "recbench" / "api" / "task.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | \
               {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not [m for m in imported if m and m.startswith("recbench.report")], imported
    hooks = ("benchmark_title", "report_order", "report_metrics", "report_tables", "report_plots", "benchmark_id")
    assert [h for h in hooks if hasattr(Task, h)] == []


@pytest.mark.parametrize("target, key, title, tables", [
    ("recbench.tasks.perrec.task.PerRecTask", "perrec", "PerRecBench",
     ["perrec-table1", "perrec-reference", "perrec-domains"]),
    ("recbench.tasks.recbench_plus.task.RecBenchPlusTask", "recbench_plus", "RecBench+",
     ["recbench-plus", "recbench-plus-reference"]),
    ("recbench.tasks.llmrec.task.RatingTask", "llmrec", "LLMRec", ["{benchmark}-{task}"]),
    ("recbench.tasks.generic.task.GenericTask", "generic", "Config-only benchmarks", ["{benchmark}-{task}"]),
])
def test_each_benchmark_declares_its_presentation(target, key, title, tables):
    from hydra.utils import get_class

    cls = get_class(target)
    shown = presentation_of(cls)
    assert (shown.benchmark, shown.title, [t.id for t in shown.tables]) == (key, title, tables)
    # a subclass elsewhere (a user's module) is shown as its base class's benchmark; the base Task generically
    assert presentation_of(type("Mine", (cls,), {"__module__": "my_tasks"})) is shown
    assert presentation_of(Task) is GENERIC


def test_llmrec_declares_metrics_per_task_class():
    from recbench.tasks.llmrec.task import DirectTask, RatingTask, SummaryTask

    spec = presentation_of(RatingTask).tables[0]
    assert spec.metrics_of(RatingTask) == ("rmse", "mae")
    # the text metrics, then the judged ones (a column shows only where some run was judged: docs/judges.md)
    assert spec.metrics_of(SummaryTask)[:4] == ("bleu4", "rouge1", "rouge2", "rougeL")
    assert {"judge_win_rate", "judge_faithfulness"} <= set(spec.metrics_of(SummaryTask)[4:])
    assert spec.metrics_of(type("MyDirect", (DirectTask,), {}))[-1] == "ndcg@10"  # subclasses inherit
    assert spec.metrics_of(Task) == ()  # every metric


@pytest.mark.parametrize("kwargs, words", [
    ({"rows": "baselines"}, "rows='baselines': must be one of models, references, all"),
    ({"columns": ("value",)}, "columns has 'value' but no breakdown is declared"),
    ({"columns": ("method",), "metrics": ("a", "b")}, "declare metrics=(name,)"),
    ({"columns": ("method", "metric"), "rows": "references"}, "'method' cannot be a column level"),
    ({"columns": ("metric", "metric")}, "distinct levels"),
])
def test_a_wrong_table_declaration_names_the_field(kwargs, words):
    with pytest.raises(ValueError, match="TableSpec 't': .*" + words.replace("(", r"\(").replace(")", r"\)")):
        TableSpec(id="t", **kwargs)


# ---- the one builder, on hand-made cells ---------------------------------------------------------------------------
def _cell(task, model, method, slice_, value, metric, mean, variant="", run_dir="/nowhere"):
    return {"benchmark": "toy", "task": task, "model": model, "method": method, "variant": variant, "slice": slice_,
            "value": value, "metric": metric, "mean": mean, "sd": math.nan, "n_seeds": 1, "ci_low": math.nan,
            "ci_high": math.nan, "n": 4, "examples": 4, "parse_failed": 0, "pooled": False,
            "sources": json.dumps([{"run_dir": run_dir, "path": f"metrics.{metric}.mean"}]), "seeds": '["0"]'}


SIZE = Breakdown("size", order=("small", "large"), subset_key="task.sizes")


def _view(agg):
    shown = Presentation("toy", "Toy")
    return ReportView(Directions(), {"t": "accuracy"}, {"t": Task}, {"t": shown}), shown


def test_method_by_value_table_with_average_from_declared_data():
    agg = pd.DataFrame([
        _cell("t", "m1", "ask", "size", "small", "accuracy", 0.5),
        _cell("t", "m1", "ask", "size", "large", "accuracy", 0.25),
        _cell("t", "m1", "ask_cot", "size", "small", "accuracy", 1.0),
        _cell("t", "m1", "ask_cot", "size", "large", "accuracy", 0.0),
        _cell("t", "m1", "guess", "size", "small", "accuracy", 0.75),  # no 'large' run: its column is left out
        _cell("t", "m0", "ask", "size", "large", "accuracy", 0.125),  # m0 has no 'small': dashes, no average
        _cell("t", "m0", "ask", "size", "huge", "accuracy", 0.5),  # a value nobody declared: after the declared ones
        _cell("t", "none", "rand", "size", "small", "accuracy", 0.0),  # a reference row: not in a 'models' table
    ])
    view, shown = _view(agg)
    spec = TableSpec(id="toy-t1", title="Toy: accuracy", caption="c.", rows="models", columns=("method", "value"),
                     metrics=("accuracy",), breakdown=SIZE, overall=False, average=True, method_order=("guess", "ask"))
    t = declared_table(Index(agg), view, shown, spec, agg)
    assert t.columns == [("guess", "small"), ("ask", "small"), ("ask", "large"), ("ask", "huge"),
                         ("ask_cot", "small"), ("ask_cot", "large"), ("average", "")]
    assert t.row_header == ["model"] and [lbl for lbl, _ in t.rows] == [["m0"], ["m1"]]
    m0, m1 = ([c.mean for c in cells] for _, cells in t.rows)
    assert m0 == [None, None, 0.125, 0.5, None, None, None]
    assert m1 == [0.75, 0.5, 0.25, None, 1.0, 0.0, None]  # m1 has no 'huge' cell: no average either
    assert [c.mark for c in t.rows[1][1][:3]] == [None, None, "best"]  # one value per column: nothing to beat
    assert t.rows[0][1][2].mark == "second" and t.rows[1][1][2].mark == "best"


def test_reference_table_labels_methods_with_variants_and_an_all_column():
    agg = pd.DataFrame([
        _cell("t", "none", "rand", "size", "small", "accuracy", 0.5, variant="limit=4"),
        _cell("t", "none", "rand", "all", "all", "accuracy", 0.5, variant="limit=4"),
        _cell("t", "none", "pop", "size", "small", "accuracy", 0.25),
        _cell("t", "none", "pop", "all", "all", "accuracy", 0.25),
        _cell("t", "m1", "ask", "all", "all", "accuracy", 0.9),
    ])
    view, shown = _view(agg)
    spec = TableSpec(id="toy-ref", title="Toy: references", caption="refs.", rows="references",
                     columns=("value",), metrics=("accuracy",), breakdown=SIZE, marks=False)
    t = declared_table(Index(agg), view, shown, spec, agg)
    assert t.columns == [("small",), ("all",)] and t.row_header == ["baseline"]
    assert [(lbl, [c.mean for c in cells]) for lbl, cells in t.rows] == [
        (["pop"], [0.25, 0.25]), (["rand [limit=4]"], [0.5, 0.5])]
    assert not any(c.mark for _, cells in t.rows for c in cells)


def test_declared_subset_key_explains_a_value_not_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"task": {"sizes": ["small"]}, "limit": None}))
    df = pd.DataFrame([_cell("t", "m1", "ask", "size", "small", "accuracy", 0.5, run_dir=str(run))])
    assert slices_not_run(df, SIZE) == "large: not in task.sizes=[small]"
    # no plural is guessed: a breakdown without a subset key only knows the limit (here none)
    assert slices_not_run(df, Breakdown("size", order=("small", "large"))) == "large: not in the data"


# ---- one number formatter ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("v, report, terminal", [
    (0.56449, "0.564", "0.564"), (-0.0001, "0.000", "0.000"), (None, MISSING, MISSING), (math.nan, MISSING, MISSING),
    (math.inf, "inf", MISSING), (-math.inf, "-inf", MISSING), ("text", MISSING, MISSING), (True, MISSING, MISSING),
    (2, "2.000", "2.000"),
])
def test_one_formatter_for_the_report_and_the_terminal(v, report, terminal):
    assert fmt(v) == report and fmt(v, finite=True) == terminal
    assert (number(v) is None) == (report == MISSING)


@pytest.mark.full
def test_terminal_summary_imports_no_pandas():
    code = "import sys, recbench.cli.summary; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"
