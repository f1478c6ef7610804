"""The fuzz suite (docs/fuzz.md): every case of tests/fuzz/cases.py through the real command line, in this process.
Each asserts the exit code, exactly one `recbench:` line holding the expected message for a failure, no traceback,
and that a refused input changed no file (data copy, runs dir and cache dir: names, sizes, sha256); a run that goes
on is checked for its documented recovery."""
from __future__ import annotations

import json
import os

import pytest

from tests.fuzz import runner
from tests.fuzz.cases import CASES, CATEGORIES, Case

pytestmark = pytest.mark.full


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(reason=c.xfail, strict=True)) if c.xfail
                                  else c for c in CASES], ids=[c.id for c in CASES])
def test_fuzz_case(case: Case, tmp_path, capfd, monkeypatch):
    runner.isolate(monkeypatch, tmp_path)
    for k, v in case.env:
        monkeypatch.setenv(k, v.format(tmp=tmp_path))
    ctx = runner.Ctx(tmp_path, invoke=lambda args: runner.invoke(args, capfd))
    stub = runner.start_server(case.server)
    if stub is not None:
        ctx.stub, ctx.url = stub, stub.base_url
    elif case.server == "down":
        from recbench.testing.openai_stub import refused_url

        ctx.url = refused_url()
    try:
        if case.data:
            runner.copy_data(case.data, ctx.data)
        if case.first:
            first = ctx.invoke(ctx.expand(case.args))
            assert first.code == 0, first.err[-3000:]
        if case.plant:
            case.plant(ctx)
        before = runner.snapshot(tmp_path)
        r = ctx.invoke(ctx.expand(case.args))
        after = runner.snapshot(tmp_path)
    finally:
        for fn in ctx.cleanup:
            fn()
        if stub is not None:
            stub.stop()
    _log(case, r)
    shown = f"exit {r.code}\n--- stderr\n{r.err[-4000:]}\n--- stdout\n{r.out[-2000:]}"
    assert "Traceback" not in r.out + r.err, shown
    assert r.code == case.exit, shown
    lines = r.recbench_lines()
    if case.exit != 0:
        assert len(lines) == 1, shown
        assert case.message in lines[0], shown
    else:
        assert not lines, shown
        assert case.message in r.err, shown
    if case.refused:  # nothing new, gone or changed (beyond what the case allows: the derived cache of clean files)
        changes = [d for d in runner.diff(before, after) if not d.startswith(tuple(f"new {p}" for p in case.may_add))]
        assert not changes, changes
    if case.check:
        case.check(ctx, r)


def _log(case: Case, r: runner.Result) -> None:
    """With RECBENCH_FUZZ_LOG=<file>: one JSON line per case (id, category, exit, its recbench: lines, traceback?,
    seconds), for the counts of a closing note."""
    path = os.environ.get("RECBENCH_FUZZ_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"id": case.id, "category": case.category, "expected": case.exit, "exit": r.code,
                                "lines": r.recbench_lines(), "traceback": "Traceback" in r.out + r.err,
                                "wall_s": round(r.wall, 2)}) + "\n")


def test_the_doc_shows_this_table():
    """docs/fuzz.md's case table is the one cases.py holds (regenerate: python -m tests.fuzz.make_doc)."""
    from tests.fuzz import make_doc

    doc = make_doc.DOC.read_text(encoding="utf-8")
    assert make_doc.render(doc) == doc, "docs/fuzz.md is out of date: run python -m tests.fuzz.make_doc"


def test_the_table_has_enough_cases_of_every_kind():
    """At least 80 bad inputs, every category present, ids unique."""
    ids = [c.id for c in CASES]
    assert len(ids) >= 80 and len(set(ids)) == len(ids)
    assert {c.category for c in CASES} == set(CATEGORIES)
    unchecked = [c.id for c in CASES if not c.refused and not c.xfail and c.check is None]
    assert not unchecked, f"a run that goes on (or fails mid-run) needs its documented recovery checked: {unchecked}"
