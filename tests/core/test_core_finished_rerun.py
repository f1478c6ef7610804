"""Finished reruns reuse metrics.json (no data load, no model, no re-aggregation) only while nothing it was
computed from changed; the answer is the one a full re-aggregation gives."""
from __future__ import annotations

import json
import os

import pytest

from recbench.run.evaluate import run_from_config
from recbench.store.finished import FINISHED_NAME
from recbench.store.runstore import dumps_line
from tests.toy import toy_cfg
from tests.toy.scripted import ToyBackend

pytestmark = pytest.mark.fast


def _cfg(tmp_path, *extra):
    return toy_cfg(["limit=6", *extra], tmp_path)


def _without_invocation(m: dict) -> dict:
    """metrics as metrics.json holds them (NaN -> null, tuples -> lists), this_invocation left out."""
    return {k: v for k, v in json.loads(dumps_line(m)).items() if k != "this_invocation"}


def test_finished_rerun_reuses_metrics_equal_to_a_full_reaggregation(tmp_path, monkeypatch):
    cfg = _cfg(tmp_path)
    d = tmp_path / "run"
    m1 = run_from_config(cfg, d).to_dict()
    assert m1["complete"] and (d / FINISHED_NAME).is_file()
    text1 = (d / "metrics.json").read_text()

    import recbench.run.evaluate as app

    built = []
    monkeypatch.setattr(app, "build_task", lambda c: built.append(1))  # the fast path must not build the task
    m2 = run_from_config(cfg, d).to_dict()
    monkeypatch.undo()
    assert built == [] and _without_invocation(m2) == _without_invocation(m1)
    inv = m2["this_invocation"]
    assert inv["examples_skipped"] == inv["examples_total"] == 6 and inv["backend_calls"] == 0
    assert not inv["model_loaded"] and set(inv) == set(m1["this_invocation"])

    # the same rerun through the full path (marker removed) writes the same bytes apart from this_invocation
    (d / FINISHED_NAME).unlink()
    m3 = run_from_config(cfg, d).to_dict()
    assert m3["this_invocation"]["examples_skipped"] == 6 and set(m3["this_invocation"]) == set(inv)
    assert {k: v for k, v in m3["this_invocation"].items() if "wall" not in k} == \
        {k: v for k, v in inv.items() if "wall" not in k}
    strip = lambda t: {k: v for k, v in json.loads(t).items() if k != "this_invocation"}  # noqa: E731
    assert strip((d / "metrics.json").read_text()) == strip(text1)
    assert (d / FINISHED_NAME).is_file()  # the full path marks it again


def test_changed_samples_or_config_take_the_full_path(tmp_path, monkeypatch):
    cfg = _cfg(tmp_path)
    d = tmp_path / "run"
    run_from_config(cfg, d)
    lines = (d / "samples.jsonl").read_text().splitlines(keepends=True)
    (d / "samples.jsonl").write_text("".join(lines[:-1]))  # one finished example lost: it must run again
    ToyBackend.built = 0
    m = run_from_config(cfg, d).to_dict()
    assert m["this_invocation"]["examples_skipped"] == 5 and m["this_invocation"]["examples_finished"] == 1
    assert m["counts"]["examples"] == 6

    # another bootstrap setting changes the config: re-aggregated, not reused
    m_b = run_from_config(_cfg(tmp_path, "run.bootstrap_resamples=200"), d).to_dict()
    assert m_b["this_invocation"]["examples_skipped"] == 6
    # an edited metrics.json is never trusted
    p = d / "metrics.json"
    p.write_text(p.read_text().replace('"complete": true', '"complete": true '))
    os.utime(p)
    m_c = run_from_config(_cfg(tmp_path, "run.bootstrap_resamples=200"), d).to_dict()
    assert _without_invocation(m_c) == _without_invocation(m_b)
