"""A YAML benchmark that declares item lists (task.items): the bundled generic_topk through the app with its two
reference rows and a scripted model, the list metrics recomputed from the sample files, the activity-level fairness
gaps, and the report's fairness table."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recbench.report import build_report
from recbench.report.writer import render_markdown
from recbench.run.construct import bundled_data
from recbench.run.evaluate import run_from_config
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast

SAMPLE = Path(bundled_data("generic_sample"))


def _run(tmp_path: Path, method: str, backend=None, *extra: str) -> tuple[dict, list[dict]]:
    cfg = compose_cfg(["task=generic_topk", f"method={method}", f"cache.path={tmp_path / 'c.sqlite'}",
                       "run.progress=false", "run.bootstrap_resamples=50", *extra])
    run_from_config(cfg, tmp_path / method, backend=backend)
    m = json.loads((tmp_path / method / "metrics.json").read_text())
    return m, [json.loads(x) for x in (tmp_path / method / "samples.jsonl").read_text().splitlines()]


def test_reference_rows_get_every_list_metric_and_the_report_names_the_worst_served_group(tmp_path):
    rows = [json.loads(x) for x in (SAMPLE / "topk.jsonl").read_text().splitlines()]
    items = pd.read_csv(SAMPLE / "topk_items.csv", dtype=str)
    pop = pd.Series([i for r in rows for i in r["history"]]).value_counts()
    m, recs = _run(tmp_path, "popularity")
    by_id = {r["id"]: r for r in rows}
    for r in recs:
        row = by_id[r["id"]]
        want = sorted((c for c in row["candidates"] if c not in row["history"]),
                      key=lambda c: (-pop.get(c, 0), int(c)))[:10]
        assert r["prediction"] == r["items"] == want
        assert r["metrics"]["arp@10"] == pytest.approx(np.mean([pop.get(c, 0) for c in want]), abs=1e-9)
        assert r["metrics"]["out_of_candidates_rate"] == 0.0 == r["metrics"]["history_copy_rate"]
    for name in ("arp@10", "aplt@10", "novelty@10", "ild@10", "pop_miscalibration@10", "coverage@10", "gini@10",
                 "entropy@10", "invalid_rate", "duplicate_rate"):
        s = m["metrics"][name]
        assert s["ci_low"] <= s["mean"] <= s["ci_high"], name
    listed = {i for r in recs for i in r["items"]}
    assert m["metrics"]["coverage@10"]["mean"] == pytest.approx(len(listed) / len(items))
    assert m["metric_info"]["arp@10"]["direction"] == "lower" and m["metric_info"]["gini@10"]["aggregation"] == "corpus"
    gap = m["extra"]["fairness"]["activity"]["ndcg@10"]
    assert set(gap["groups"]) == {"cold", "warm", "heavy"}
    assert list(m["breakdown"]["activity"]) == ["cold", "warm", "heavy"]
    m2, _ = _run(tmp_path, "random_items")
    assert m2["metrics"]["arp@10"]["mean"] < m["metrics"]["arp@10"]["mean"]  # popularity recommends the popular
    assert m2["metrics"]["coverage@10"]["mean"] > m["metrics"]["coverage@10"]["mean"]
    md = render_markdown(build_report([tmp_path / "popularity", tmp_path / "random_items"]))
    assert "generic_topk: user groups (fairness)" in md and "worst-served" in md
    line = next(x for x in md.splitlines() if "| activity | ndcg@10 |" in x and "popularity" in x)
    assert f"| {gap['worst'] or 'none (equal means)'} |" in line


def test_model_answers_by_title_and_errors(tmp_path):
    items = pd.read_csv(SAMPLE / "topk_items.csv", dtype=str)
    title = dict(zip(items["id"], items["title"]))

    def answer(req):
        user = req.messages[-1][1]
        hist = user.split("watched (item ids): ")[1].split(".")[0].split(", ")
        cands = user.split("Candidates (item ids): ")[1].split(".")[0].split(", ")
        return json.dumps([cands[0], title[cands[1]], cands[0], "No Such Film", hist[0]])

    m, recs = _run(tmp_path, "zero_shot", ScriptedBackend(answer), "model=smollm2")
    mm = m["metrics"]
    assert mm["invalid_rate"]["mean"] == pytest.approx(0.2) and mm["duplicate_rate"]["mean"] == pytest.approx(0.2)
    assert mm["history_copy_rate"]["mean"] == pytest.approx(0.2)
    assert mm["out_of_candidates_rate"]["mean"] == pytest.approx(0.2)
    assert all(len(r["items"]) == 3 for r in recs)  # the id, the item named by its title, the history item
