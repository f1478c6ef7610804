"""Outcome.notes is one typed field: samples.jsonl keeps it as details.notes, SampleRecord.notes and the viewer read it
back, and a run dir written before it existed (details.note / details.parse_note) still reads the same way."""
from __future__ import annotations

from pathlib import Path

import pytest

from recbench.api.types import Display, Outcome
from recbench.cli.view import parse_reason
from recbench.store.records import SampleRecord, notes_of
from recbench.store.schema import read_run
from tests.helpers import run_scripted

pytestmark = pytest.mark.fast
V1 = Path(__file__).resolve().parents[1] / "fixtures" / "run_v1_perrec_listwise"


def test_record_details_put_notes_first_and_drop_empty_ones():
    o = Outcome("x", "repaired", {"answer": "a"}, display=Display(["i1", "i2"], ["i2", "i1"]), notes=["", "fixed"])
    assert o.record_details() == {"notes": ["fixed"], "answer": "a", "shown": ["i1", "i2"], "ranked": ["i2", "i1"]}
    assert Outcome("x", notes=["", ""]).record_details() == {}


def test_old_run_dir_notes_still_read():
    samples = read_run(V1).samples()
    failed = [s for s in samples if s.parse_status == "failed"]
    assert len(failed) == 2 and all(s.notes == ["no user label found"] for s in failed)
    assert all(s.notes == [] for s in samples if s.parse_status == "ok")  # written as {"note": ""}
    assert notes_of({"parse_note": "line list", "note": "line list", "notes": ["a"]}) == ["a", "line list"]
    assert parse_reason(failed[0].details) == "no user label found"


def test_a_run_writes_notes_and_reads_them_back(tmp_path):
    answers = iter(["4", "I would not know", "maybe 2"] * 3)
    m, recs, _ = run_scripted(tmp_path, ["task=llmrec_rating", "method=zero_shot", "model=smollm2", "limit=3",
                                         "run.progress=false", "run.bootstrap_resamples=50", "method.constrained=false"],
                              lambda r: next(answers))
    by_status = {r["parse_status"]: r for r in recs}
    assert set(by_status) == {"ok", "failed", "repaired"}
    assert "notes" not in by_status["ok"]["details"] and "note" not in by_status["ok"]["details"]
    failed = SampleRecord.from_dict(by_status["failed"])
    assert failed.notes and failed.notes == by_status["failed"]["details"]["notes"]
    assert parse_reason(failed.details) == "; ".join(failed.notes)
