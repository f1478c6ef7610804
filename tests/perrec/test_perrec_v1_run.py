"""A version-1 PerRecBench run dir (tests/fixtures/run_v1_perrec_listwise) still builds the PerRecBench report."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast
V1 = Path(__file__).resolve().parents[1] / "fixtures" / "run_v1_perrec_listwise"


def test_report_builds_from_a_version_1_run_dir(tmp_path):
    from recbench.report import build_report

    shutil.copytree(V1, tmp_path / "v1")
    rep = build_report([tmp_path / "v1"])
    t1 = next(t for t in rep.tables if t.id == "perrec-table1")
    cell = dict(zip(t1.columns, t1.rows[0][1]))[("listwise", "easy")]
    assert cell.mean == pytest.approx(0.25)
    assert "perrec-domains" not in {t.id for t in rep.tables}  # no domains: the per-domain table is left out
