"""Every sample record carries what its answer is scored against (`truth`), the viewer shows it beside the
prediction, and run dirs written before the field existed still read and render."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy.stats import kendalltau

from recbench.cli import view
from recbench.run.evaluate import run_from_config
from recbench.store.schema import SampleRecord, read_run
from tests.helpers import compose_cfg, run_scripted

pytestmark = pytest.mark.fast

FIXTURE_V1 = Path(__file__).resolve().parents[1] / "fixtures" / "run_v1_perrec_listwise"


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines() if x.strip()]


def test_perrec_truth_is_the_order_the_ptc_was_computed_against(model_free_run):
    recs = _records(model_free_run)
    assert len(recs) == 60
    for r in recs:
        t = r["truth"]
        rel = t["relative_rating"]
        # the order is by relative rating, highest first; relative = rating - the user's own average
        assert [rel[u] for u in t["order"]] == sorted(rel.values(), reverse=True)
        for u in t["order"]:
            assert rel[u] == pytest.approx(t["rating"][u] - t["avg_rating"][u], abs=1e-3)
        # PTC recomputed with scipy from the stored truth and prediction equals the stored metric
        pred = r["prediction"]["order"]
        assert sorted(pred) == sorted(t["order"])
        tau = kendalltau(range(len(pred)), [pred.index(u) for u in t["order"]]).statistic
        assert r["metrics"]["ptc"] == pytest.approx(tau, abs=1e-12), r["id"]


def test_llmrec_and_recbench_plus_and_generic_truths(tmp_path):
    def run(name: str, overrides: list[str]) -> list[dict]:
        cfg = compose_cfg([*overrides, f"cache.path={tmp_path / 'c.sqlite'}", "run.progress=false",
                           "run.bootstrap_resamples=20"])
        run_from_config(cfg, tmp_path / name)
        return _records(tmp_path / name)

    for r in run("rating", ["task=llmrec_rating", "method=global_mean", "limit=5"]):
        assert r["metrics"]["mae"] == pytest.approx(abs(r["prediction"] - r["truth"]["rating"]))
    for r in run("seq", ["task=llmrec_sequential", "method=popularity", "limit=5"]):
        hit = r["truth"]["target"] in r["prediction"][:10]
        assert r["metrics"]["hr@10"] == float(hit) and r["truth"]["title"]
    released = Path(compose_cfg(["task=recbench_plus"]).task.data.path) / "movie-ExplicitQuery.json"
    queries = {f"explicit:{q['data_idx']}": q for q in json.loads(released.read_text())}
    explicit = [r for r in run("rp", ["task=recbench_plus", "method=bm25_items"]) if r["id"].startswith("explicit:")]
    assert explicit and all(r["truth"]["titles"] == queries[r["id"]]["movieSubset"] for r in explicit)
    for r in run("yesno", ["task=generic_yesno", "method=random"]):
        assert r["truth"] in ("yes", "no") and r["metrics"]["accuracy"] == float(r["prediction"] == r["truth"])


def test_scripted_answers_keep_the_truth_of_failed_parses(tmp_path):
    """A failed answer still stores the truth: the page shows what it should have said."""
    _, recs, _ = run_scripted(tmp_path, ["method=listwise", "limit=4", "run.progress=false"], lambda r: "no idea")
    assert [r["parse_status"] for r in recs] == ["failed"] * 4
    assert all(r["truth"]["order"] and r["metrics"]["ptc"] == 0.0 for r in recs)


def test_viewer_shows_truth_beside_the_prediction(model_free_run, tmp_path):
    data = view.load_run(model_free_run)
    assert data["has_truth"] and all(r["truth"] == s["truth"] for r, s in zip(data["rows"], _records(model_free_run)))
    html = view.write_view(model_free_run, tmp_path / "page.html").read_text()
    assert '<th id="truth-head"' in html and "truth (scored against)" in html


def test_run_dirs_without_truth_still_read_and_render(tmp_path):
    recs = read_run(FIXTURE_V1).samples()
    assert recs and all(r.truth is None for r in recs)
    assert "truth" not in recs[0].to_dict()  # written back as before: no empty field
    data = view.load_run(FIXTURE_V1)
    assert not data["has_truth"] and all(r["truth"] is None for r in data["rows"])
    assert view.write_view(FIXTURE_V1, tmp_path / "old.html").is_file()
    # and a record with a truth round-trips through the schema
    r = SampleRecord(id="x", truth={"order": ["a", "b"]}, metrics={"ptc": math.nan})
    assert SampleRecord.from_dict(json.loads(json.dumps(r.to_dict()))).truth == {"order": ["a", "b"]}


def test_truth_cell_in_chromium(model_free_run, tmp_path):
    from tests.report.report_cdp import Chromium, find_chromium

    if find_chromium() is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    html = view.write_view(model_free_run, tmp_path / "free.html")
    first = _records(model_free_run)[0]
    js = """(() => { const tr = document.querySelector('#rows tr.row'); tr.click();
      return {cell: tr.querySelector('td.truth').textContent, pre: document.querySelector('pre.truth').textContent,
              pred: document.querySelector('pre.prediction').textContent}; })()"""
    with Chromium(find_chromium()) as c:
        s = c.open(html)
        facts = c.evaluate(s, js)
    # the cell: the order in full, readably (a reference row names no labels, so the ids); the detail: the JSON
    assert facts["cell"] == " > ".join(first["truth"]["order"]) and json.loads(facts["pre"]) == first["truth"]
    assert json.loads(facts["pred"]) == first["prediction"]
