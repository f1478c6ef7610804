"""The list metrics of LLMRec sequential on the real Beauty P5 data: the popularity, item-kNN and random reference rows
run through the app, each list metric recomputed from samples.jsonl by RecBole 1.2.1's formulas
(tests/core/test_core_list_metrics.py) on the same lists, equal to 1e-9; and the activity-level fairness gaps."""
from __future__ import annotations

import math

import numpy as np
import pytest
from tests.core.test_core_list_metrics import (
    recbole_average_popularity,
    recbole_coverage,
    recbole_entropy,
    recbole_gini,
)
from tests.doubles import ScriptedBackend
from tests.llmrec.test_llmrec_tasks import make_task, prompt_candidates

from recbench.api.item_lists import ItemCatalogue


def _check_against_recbole(metrics: dict, recs: list[dict], cat: ItemCatalogue) -> None:
    k = cat.k
    matrix = np.array([[cat.index[i] for i in r["items"]] for r in recs])  # every reference answer lists k items
    count = {j: c for j, c in enumerate(cat.pop) if c > 0}
    m = metrics["metrics"]
    assert m[f"arp@{k}"]["mean"] == pytest.approx(recbole_average_popularity(matrix, count, k), abs=1e-9)
    assert m[f"coverage@{k}"]["mean"] == pytest.approx(recbole_coverage(matrix, len(cat.items)), abs=1e-9)
    assert m[f"gini@{k}"]["mean"] == pytest.approx(recbole_gini(matrix, len(cat.items)), abs=1e-9)
    distinct = len(np.unique(matrix))
    assert m[f"entropy@{k}"]["mean"] / distinct == pytest.approx(recbole_entropy(matrix), abs=1e-9)
    tail = {j for j in range(len(cat.items)) if cat.tail[j]}
    aplt = np.mean([[j in tail for j in row] for row in matrix])
    assert m[f"aplt@{k}"]["mean"] == pytest.approx(aplt, abs=1e-9)
    for name in (f"arp@{k}", f"coverage@{k}", f"gini@{k}", f"entropy@{k}", f"novelty@{k}", f"aplt@{k}"):
        s = m[name]
        assert s["ci_low"] <= s["mean"] <= s["ci_high"], name


@pytest.mark.full
def test_beauty_p5_reference_rows_match_recbole(p5_dir, run_cfg, tmp_path):
    """22,363 users, three reference rows: popularity's arp@10 near the top of the catalogue's, random's near the
    mean popularity of a candidate; each metric equal to RecBole's formulas on the same lists."""
    data = f"task.data_dir={p5_dir}"
    cands = f"task.candidates.path={tmp_path / 'cands.jsonl.gz'}"
    task = make_task("task=llmrec_sequential_p5", data)
    cat = task.item_catalogue()
    arp = {}
    for method in ("popularity", "item_knn", "random"):
        metrics, recs = run_cfg(None, "task=llmrec_sequential_p5", data, cands, f"method={method}", name=method)
        assert metrics["counts"]["examples"] == len(recs) == 22363
        _check_against_recbole(metrics, recs, cat)
        arp[method] = metrics["metrics"]["arp@10"]["mean"]
        fair = metrics["extra"]["fairness"]["activity"]["arp@10"]
        assert set(fair["groups"]) == {"cold", "warm", "heavy"} and fair["test"] == "welch"
    assert arp["popularity"] > arp["item_knn"] > arp["random"]


@pytest.mark.fast
def test_sample_answers_with_errors_and_reference_rows(run_cfg):
    """Model answers naming hallucinated, repeated, out-of-candidate and history items are counted under the one set
    of names; the reference rows recomputed by RecBole's formulas."""
    task = make_task("task=llmrec_sequential")
    ex = {e.id: e for e in task.load()}

    def answer(r):
        c = prompt_candidates(r)
        hist = ex[r.example_id].data["history"]
        return str([int(c[0]), int(c[0]), "Glitter Unicorn Hair Dust", int(hist[-1]), int(c[1])])

    metrics, recs = run_cfg(ScriptedBackend(answer), "task=llmrec_sequential", "method=zero_shot", "model=smollm2",
                            "limit=20")
    m = metrics["metrics"]
    assert m["invalid_rate"]["mean"] == pytest.approx(0.2) and m["duplicate_rate"]["mean"] == pytest.approx(0.2)
    assert m["history_copy_rate"]["mean"] == pytest.approx(0.2)
    assert m["out_of_candidates_rate"]["mean"] == pytest.approx(0.2)  # the history item is not a candidate
    assert all(len(r["items"]) == 3 for r in recs)  # c0, the history item, c1: the first k catalogue items
    for method in ("popularity", "random"):
        metrics, recs = run_cfg(None, "task=llmrec_sequential", f"method={method}", name=method)
        _check_against_recbole(metrics, recs, task.item_catalogue())
        assert not math.isnan(metrics["metrics"]["pop_miscalibration@10"]["mean"])
