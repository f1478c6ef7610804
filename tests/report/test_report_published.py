"""Published PerRecBench Table 1 rows in the report (issue 13): '<model> (published)' beside the measured row for
perrec_released runs only, and a mark on each measured cell whose published value lies outside its 95% CI."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from recbench.run.construct import bundled_data

from recbench.run.evaluate import run_from_config
from recbench.report.published import load_published, outside_ci
from recbench.report import build_report, write_report
from recbench.tasks.perrec.data import load_examples
from recbench.tasks.perrec.released import write_released
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg, listwise_answer

pytestmark = pytest.mark.full


def _released(dst: Path) -> Path:
    """The bundled sample written in the released PerRecBench file layout."""
    src = Path(bundled_data("perrec_sample"))
    test = list(load_examples(str(src), 4, 200))
    ratings = pd.read_csv(next(p for p in (src / "ratings.csv.gz", src / "ratings.csv") if p.exists()))
    items = pd.read_json(src / "items.jsonl", lines=True, dtype=False)
    write_released(dst, test, [], ratings, items, profiles={})
    return dst


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pub")
    data = _released(root / "released")
    for task, extra in (("perrec_released", [f"task.data_dir={data}"]), ("perrec", [])):
        cfg = compose_cfg([f"cache.path={root / 'c.sqlite'}", "run.progress=false", "run.bootstrap_resamples=200",
                           f"task={task}", "model=llama8b", "method=listwise", "limit=150", *extra])
        run_from_config(cfg, root / "runs" / task, backend=ScriptedBackend(listwise_answer, name="scripted"))
    return root / "runs"


def test_published_rows_sit_under_the_measured_row_and_flag_cells_outside_the_ci(runs, tmp_path):
    rep = build_report([runs])
    t1 = next(t for t in rep.tables if t.id == "perrec-table1")
    labels = [lbl for lbl, _ in t1.rows]
    assert sorted(lbl[0] for lbl in labels) == ["llama8b", "llama8b", "llama8b (published)"]
    i = next(i for i, lbl in enumerate(labels) if "format=released" in lbl[1])
    assert labels[i + 1] == ["llama8b (published)", labels[i][1]]  # right under the released-files row
    measured = dict(zip(t1.columns, t1.rows[i][1]))
    published = dict(zip(t1.columns, t1.rows[i + 1][1]))
    pub = {(c.method, c.value): c for c in load_published() if c.model == "llama8b"}
    flagged = 0
    for (method, diff), cell in measured.items():
        if method == "average":
            continue
        p = pub[(method, diff)]
        assert published[(method, diff)].mean == p.published  # Table 1's value, digit for digit
        out = outside_ci(p.published, p.rounding, cell.ci_low, cell.ci_high)
        assert ("‡" in cell.ref_mark) == bool(out), (method, diff, cell.ci_low, cell.ci_high, p.published)
        flagged += bool(out)
    # the listwise columns only were measured: the published row has no cells elsewhere
    assert all(m == "listwise" or m == "average" for m, _ in t1.columns)
    assert published[("average", "")].mean == pytest.approx(
        sum(pub[("listwise", d)].published for d in ("easy", "medium", "hard")) / 3)
    assert flagged >= 1  # the scripted answers are far from the paper on some column
    assert f"({flagged} cell(s))" in t1.caption and "Tan et al. 2025" in t1.caption
    # the bundled sample's row (not the released files) gets no published row and no mark
    other = next(cells for lbl, cells in t1.rows if "format=released" not in lbl[1] and "published" not in lbl[0])
    assert all("‡" not in c.ref_mark for c in other)
    md = write_report([runs], tmp_path / "r", formats=("md",))["md"].read_text()
    assert "| llama8b (published) | " in md


def test_no_published_rows_without_a_released_run(runs):
    rep = build_report([runs / "perrec"])
    t1 = next(t for t in rep.tables if t.id == "perrec-table1")
    assert [lbl for lbl, _ in t1.rows] == [["llama8b"]] and "published" not in t1.caption
