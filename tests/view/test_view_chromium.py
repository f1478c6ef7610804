"""The sample viewer in a real browser (Debian's headless Chromium over the DevTools pipe): no console errors,
one row per example, the parse-status and slice filters, search, paging, and hostile model text shown as text."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from recbench.cli import view
from tests.view.view_doubles import HOSTILE
from tests.report.report_cdp import Chromium, find_chromium

pytestmark = [pytest.mark.skipif(find_chromium() is None, reason="chromium not installed (apt-get install -y chromium)"),
              pytest.mark.full]

FACTS_JS = """(() => ({
  n: Number(document.getElementById('match').dataset.n),
  ids: Array.from(document.querySelectorAll('#rows tr.row')).map(tr => tr.dataset.id),
  statuses: Array.from(document.querySelectorAll('#rows tr.row')).map(tr => tr.dataset.status),
  external: Array.from(document.querySelectorAll('[src],[href]')).map(e => e.getAttribute('src') || e.getAttribute('href')),
  scripts: document.scripts.length,
  pwned: window.__pwned === undefined ? null : window.__pwned,
}))()"""


def _set(select_id: str, value: str) -> str:
    return (f"(() => {{ const s = document.getElementById('{select_id}'); s.value = '{value}';"
            " s.dispatchEvent(new Event('change')); return true; })()")


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_model_free_run_page(model_free_run, tmp_path):
    html = view.write_view(model_free_run, tmp_path / "free.html")
    samples = _lines(model_free_run / "samples.jsonl")
    with Chromium(find_chromium()) as c:
        s = c.open(html)
        c.evaluate(s, _set("per-page", "500"))
        facts = c.evaluate(s, FACTS_JS)
        assert facts["n"] == len(samples) == 60 and facts["ids"] == [x["id"] for x in samples]
        c.evaluate(s, _set("f-slice-difficulty", "hard"))
        hard = c.evaluate(s, FACTS_JS)
        errors = c.console_errors()
    assert errors == [], errors
    assert facts["external"] == [] and facts["scripts"] == 3
    assert hard["ids"] == [x["id"] for x in samples if x["meta"]["difficulty"] == "hard"] and hard["ids"]


def test_scripted_run_page_filters_and_escapes(scripted_run, tmp_path):
    html = view.write_view(scripted_run, tmp_path / "scripted.html")
    samples = _lines(scripted_run / "samples.jsonl")
    error_ids = list(dict.fromkeys(e["id"] for e in _lines(scripted_run / "errors.jsonl")))
    failed = [x["id"] for x in samples if x["parse_status"] == "failed"]
    hostile = next(x["id"] for x in samples if any(cl["response"] == HOSTILE for cl in x["calls"]))
    assert failed and error_ids and len(samples) > 50
    with Chromium(find_chromium()) as c:
        s = c.open(html)
        first = c.evaluate(s, FACTS_JS)  # default: 50 rows per page
        c.evaluate(s, _set("per-page", "500"))
        everything = c.evaluate(s, FACTS_JS)
        c.evaluate(s, _set("f-status", "failed"))
        only_failed = c.evaluate(s, FACTS_JS)
        c.evaluate(s, _set("f-status", "error"))
        only_errors = c.evaluate(s, FACTS_JS)
        c.evaluate(s, _set("f-status", "all"))
        # search: the example whose answer is the hostile markup, found by a piece of it; open its details
        c.evaluate(s, "(() => { const i = document.getElementById('f-text'); i.value = 'window.__pwned = \"script\"';"
                      " i.dispatchEvent(new Event('input')); return true; })()")
        c.evaluate(s, "new Promise(r => setTimeout(r, 400))")
        found = c.evaluate(s, FACTS_JS)
        c.evaluate(s, f"document.querySelector('#rows tr.row[data-id=\"{hostile}\"]').click()")
        shown = c.evaluate(s, "Array.from(document.querySelectorAll('#rows pre.response')).map(p => p.textContent)")
        answer_cell = c.evaluate(s, f"document.querySelector('#rows tr.row[data-id=\"{hostile}\"] td.answer').textContent")
        prompts = c.evaluate(s, "document.querySelectorAll('#rows pre.msg').length")
        facts = c.evaluate(s, FACTS_JS)
        errors = c.console_errors()
    assert errors == [], errors
    assert first["n"] == len(samples) + len(error_ids) and len(first["ids"]) == 50
    assert everything["ids"] == [x["id"] for x in samples] + error_ids
    assert only_failed["ids"] == failed and set(only_failed["statuses"]) == {"failed"}
    assert only_errors["ids"] == error_ids
    errors_by_id = {e["id"]: e for e in _lines(scripted_run / "errors.jsonl")}
    with_hostile = [x["id"] for x in [*samples, *(errors_by_id[i] for i in error_ids)]
                    if any('window.__pwned = "script"' in (cl.get("response") or "") for cl in x["calls"])]
    assert hostile in found["ids"] and found["ids"] == with_hostile
    assert HOSTILE in shown and HOSTILE in answer_cell  # the markup is visible as text
    assert prompts >= 2  # system + user message of the opened example
    assert facts["pwned"] is None and facts["scripts"] == 3 and facts["external"] == []
