"""Published PerRecBench Table 1 numbers: complete, transcribed consistently, and flagged against measured CIs."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from recbench.report.published import compare, load_file, load_published, outside_ci, published_dir

pytestmark = pytest.mark.fast

CONF_MODEL = Path(__file__).resolve().parents[2] / "conf" / "model"


def test_perrec_table1_has_every_model_method_and_difficulty():
    cells = [c for c in load_published() if c.benchmark == "perrec"]
    assert len(cells) == 19 * 3 * 3
    models = {c.model for c in cells}
    tagged = {p.stem for p in CONF_MODEL.glob("*.yaml")
              if "perrec" in (yaml.safe_load(p.read_text()).get("papers") or [])}
    assert models == tagged  # one published row per catalogue entry tagged perrec, and no other
    assert {(c.method, c.value) for c in cells} == {(m, d) for m in ("pointwise", "pairwise", "listwise")
                                                    for d in ("easy", "medium", "hard")}
    by = {(c.model, c.method, c.value): c.published for c in cells}
    # spot values read off the official table
    assert by[("llama8b", "pointwise", "easy")] == -0.27
    assert by[("gpt4o-mini", "listwise", "easy")] == 0.41
    assert by[("mistral-nemo", "listwise", "hard")] == -0.10
    assert by[("claude35-sonnet", "pairwise", "easy")] == 0.34


def test_each_row_matches_the_papers_average_column():
    """A transcription check: the mean of the 9 rounded cells is within rounding of the published Avg. column."""
    d = yaml.safe_load((published_dir() / "perrec.yaml").read_text())
    for model, e in d["models"].items():
        cells = [e[m][x] for m in ("pointwise", "pairwise", "listwise") for x in ("easy", "medium", "hard")]
        assert abs(sum(cells) / 9 - e["average"]) <= 0.01, model


@pytest.mark.parametrize("published,lo,hi,expected", [
    (-0.27, -0.20, 0.10, True),     # -0.265 < -0.20: outside
    (-0.27, -0.30, -0.10, False),   # inside
    (-0.27, -0.2649, 0.0, True),    # even -0.27 + 0.005 is below the CI
    (-0.27, -0.265, 0.0, False),    # touches the CI once rounding is allowed
    (0.41, 0.10, 0.406, False),     # 0.41 - 0.005 = 0.405 is inside
    (0.41, 0.10, 0.404, True),
])
def test_outside_ci_allows_for_the_published_rounding(published, lo, hi, expected):
    assert outside_ci(published, 0.005, lo, hi) is expected


def test_compare_returns_published_rows_and_flags_cells_outside_the_ci():
    measured = [
        {"task": "perrec_released", "model": "llama8b", "method": "pointwise", "slice": "difficulty",
         "value": "easy", "metric": "ptc", "mean": 0.05, "ci_low": -0.05, "ci_high": 0.15},
        {"task": "perrec_released", "model": "llama8b", "method": "listwise", "slice": "difficulty",
         "value": "easy", "metric": "ptc", "mean": 0.28, "ci_low": 0.20, "ci_high": 0.36},
        # a slice given directly as its value, as some callers write it
        {"task": "perrec_released", "model": "llama8b", "method": "pairwise", "slice": "hard",
         "metric": "ptc", "mean": 0.0, "ci_low": -0.01, "ci_high": 0.01},
        # the bundled synthetic sample is not the paper's data: no published rows for it
        {"task": "perrec", "model": "gpt4o", "method": "listwise", "slice": "difficulty",
         "value": "easy", "metric": "ptc", "mean": 0.3, "ci_low": 0.2, "ci_high": 0.4},
    ]
    rows = compare(measured)
    assert len(rows) == 9 and {r["model"] for r in rows} == {"llama8b"}
    by = {(r["method"], r["value"]): r for r in rows}
    assert by[("pointwise", "easy")]["outside_ci"] is True and by[("pointwise", "easy")]["published"] == -0.27
    assert by[("listwise", "easy")]["outside_ci"] is False and by[("listwise", "easy")]["measured"] == 0.28
    assert by[("pairwise", "hard")]["outside_ci"] is True  # published 0.07 vs [-0.01, 0.01]
    assert by[("pointwise", "medium")]["outside_ci"] is None and by[("pointwise", "medium")]["measured"] is None


def test_a_missing_field_is_a_one_line_error_naming_file_and_field(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("benchmark: x\nmetric: ptc\nslice: difficulty\napplies_to: [t]\nsource: s\n"
                 "models:\n  m: {pointwise: {easy: n/a}}\n")
    with pytest.raises(ValueError, match=r"bad.yaml: models.m.pointwise.easy is 'n/a', not a number"):
        load_file(p)
    p.write_text("benchmark: x\nmetric: ptc\n")
    with pytest.raises(ValueError, match=r"bad.yaml: missing field 'slice'"):
        load_file(p)
