"""The sample viewer's data and page text: every example and abandoned example listed, prompts resolved from
prompts.jsonl, parse reasons, and model text that can never break out of the embedded JSON."""
from __future__ import annotations

import json
import re
from pathlib import Path


from recbench.cli import view
from tests.view.view_doubles import HOSTILE

import pytest

pytestmark = pytest.mark.fast


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_model_free_run_lists_every_sample_without_calls(model_free_run):
    data = view.load_run(model_free_run)
    samples = _lines(model_free_run / "samples.jsonl")
    assert len(data["rows"]) == len(samples) == 60 and data["n_errors"] == 0
    assert [r["id"] for r in data["rows"]] == [s["id"] for s in samples]
    assert all(r["calls"] == [] for r in data["rows"]) and data["prompts"] == {}
    # the task's breakdown keys, from metrics.json: difficulty, then the popularity and history strata
    assert data["slices"]["difficulty"] == ["easy", "hard"] and list(data["slices"]) == ["difficulty", "popularity", "history"]
    assert data["rows"][0]["metrics"] == samples[0]["metrics"]


def test_scripted_run_rows_statuses_reasons_and_prompts(scripted_run):
    data = view.load_run(scripted_run)
    samples = _lines(scripted_run / "samples.jsonl")
    errors = _lines(scripted_run / "errors.jsonl")
    assert samples and errors, "the fixture must produce both finished and abandoned examples"
    rows = {r["id"]: r for r in data["rows"]}
    assert len(data["rows"]) == len(samples) + len({e["id"] for e in errors})
    for s in samples:
        r = rows[s["id"]]
        assert r["status"] == s["parse_status"] and r["prediction"] == s["prediction"]
        for c in r["calls"]:  # every call's prompt is in the page's prompt table, as stored in prompts.jsonl
            assert data["prompts"][c["prompt"]][-1]["role"] == "user"
    failed = [r for r in data["rows"] if r["status"] == "failed"]
    assert failed and all("no number found" in r["reason"] for r in failed)
    assert any(c["response"] == HOSTILE for r in failed for c in r["calls"])
    repaired = [r for r in data["rows"] if r["status"] == "repaired"]
    assert repaired and all("number extracted from text" in r["reason"] for r in repaired)
    errs = [r for r in data["rows"] if r["status"] == "error"]
    assert {r["id"] for r in errs} == {e["id"] for e in errors}
    assert all(r["reason"] == "HTTP 503 <b>overloaded</b>" for r in errs)


def test_page_embeds_no_raw_markup_from_model_text(scripted_run, tmp_path):
    out = view.write_view(scripted_run, tmp_path / "page.html")
    html = out.read_text()
    # exactly the three script elements of the template: the rows as JSON, the viewer code, the prompt table as JSON
    assert len(re.findall(r"<script\b", html)) == 3
    assert "window.__pwned" in html and "<img src=x" not in html and "<b>overloaded" not in html
    blob = re.search(r'<script type="application/json" id="run-data">(.*?)</script>', html, re.S).group(1)
    data = json.loads(blob)
    assert any(c["response"] == HOSTILE for r in data["rows"] for c in r["calls"])
    table = re.search(r'<script type="application/json" id="run-prompts">(.*?)</script>', html, re.S).group(1)
    assert json.loads(table) == view.load_run(scripted_run)["prompts"] and "prompts" not in data
    assert html.index('id="run-prompts"') > html.index("window.recbenchView")  # after the code that draws the rows


def test_errors_of_examples_finished_later_are_not_listed(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    rec = {"id": "a", "meta": {}, "prediction": 1, "parse_status": "ok", "details": {}, "metrics": {"m": 1.0}, "calls": []}
    (d / "samples.jsonl").write_text(json.dumps(rec) + "\n")
    (d / "errors.jsonl").write_text(json.dumps({"id": "a", "error": "timeout", "calls": []}) + "\n"
                                    + json.dumps({"id": "b", "error": "timeout", "calls": []}) + "\n")
    data = view.load_run(d)
    assert [(r["id"], r["status"]) for r in data["rows"]] == [("a", "ok"), ("b", "error")]
    assert data["n_samples"] == 1 and data["n_errors"] == 1


def test_cli_writes_beside_the_run_and_reports_a_bad_dir(model_free_run, tmp_path, capsys):
    assert view.main([str(model_free_run)]) == 0
    assert (model_free_run / "samples.html").is_file()
    assert "60 examples" in capsys.readouterr().out
    assert view.main([str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("recbench: error: ") and "nope: no such folder" in err and len(err.splitlines()) == 1
    assert view.main([str(tmp_path)]) == 2  # a folder that is no run dir
    err = capsys.readouterr().err.strip()
    assert err.startswith("recbench: error: ") and "no samples.jsonl" in err and len(err.splitlines()) == 1
