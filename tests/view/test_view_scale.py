"""The sample viewer on a listwise run: prediction and truth shown in the answer's own names (User A, ...), and a
large run (20,000 examples) opening with one page of rows in the DOM, counts and filters over all of them."""
from __future__ import annotations

import json

import pytest

from recbench.cli import view
from tests.report.report_cdp import Chromium, find_chromium
from tests.view.scale import listwise_run, scaled_run

pytestmark = [pytest.mark.skipif(find_chromium() is None, reason="chromium not installed (apt-get install -y "
                                                                 "chromium)"), pytest.mark.full]

CELLS_JS = """Array.from(document.querySelectorAll('#rows tr.row')).map(tr => ({id: tr.dataset.id,
  pred: tr.querySelector('td.pred').textContent, truth: tr.querySelector('td.truth').textContent,
  title: tr.querySelector('td.pred').title}))"""


@pytest.fixture(scope="module")
def listwise(tmp_path_factory):
    return listwise_run(tmp_path_factory.mktemp("view-listwise"))


def test_prediction_and_truth_read_in_the_answers_names(listwise, tmp_path):
    html = view.write_view(listwise, tmp_path / "listwise.html")
    samples = [json.loads(x) for x in (listwise / "samples.jsonl").read_text().splitlines()]
    with Chromium(find_chromium()) as c:
        s = c.open(html)
        cells = c.evaluate(s, CELLS_JS)
        errors = c.console_errors()
    assert errors == [] and len(cells) == 50
    by_id = {x["id"]: x for x in samples}
    for cell in cells:
        rec = by_id[cell["id"]]
        name = {uid: lab for lab, uid in rec["prediction"]["labels"].items()}
        assert cell["pred"] == " > ".join(name[u] for u in rec["prediction"]["order"])
        assert cell["truth"] == " > ".join(name[u] for u in rec["truth"]["order"])
        assert cell["title"].endswith("(ids: " + " > ".join(rec["prediction"]["order"]) + ")")
    assert any(len(by_id[c["id"]]["truth"]["order"]) > 1 for c in cells)


def test_a_large_run_opens_with_one_page_of_rows(listwise, tmp_path):
    big = scaled_run(listwise, tmp_path / "big", 20000)
    html = view.write_view(big, tmp_path / "big.html")
    with Chromium(find_chromium(), timeout_s=300) as c:
        s = c.open(html)
        facts = c.evaluate(s, "({rows: document.querySelectorAll('#rows tr').length,"
                              " n: Number(document.getElementById('match').dataset.n),"
                              " page: document.getElementById('page').textContent,"
                              " first: window.recbenchView.firstRowsMs})")
        c.evaluate(s, "(() => { const f = document.getElementById('f-slice-difficulty'); f.value = 'hard';"
                      " f.dispatchEvent(new Event('change')); return true; })()")
        hard = c.evaluate(s, "Number(document.getElementById('match').dataset.n)")
        errors = c.console_errors()
    n_hard = sum('"difficulty": "hard"' in x for x in (big / "samples.jsonl").read_text().splitlines())
    assert errors == [] and facts["rows"] == 50 and facts["n"] == 20000 and facts["page"] == "page 1 / 400"
    assert facts["first"] > 0 and hard == n_hard > 0
