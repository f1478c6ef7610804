"""LLMRec strata on the bundled P5 sample, checked against counts made here from sequential_data.txt (popularity
tercile of the target item among training interactions, history buckets) and the random ranker's exact expectation."""
from __future__ import annotations

import math
import statistics
from collections import Counter
from pathlib import Path

import pytest

from recbench.run.construct import bundled_data

from recbench.run.evaluate import run_from_config
from tests.llmrec.llmrec_helpers import compose_cfg

pytestmark = pytest.mark.fast


def _sequences():
    lines = Path(bundled_data("llmrec_sample/p5/sequential_data.txt")).read_text().split("\n")
    return {p[0]: p[1:] for p in (ln.split() for ln in lines if ln.strip())}


@pytest.mark.parametrize("task", ["llmrec_sequential", "llmrec_direct"])
def test_popularity_tercile_of_target_in_training_interactions(task):
    from recbench.run.construct import build_task

    seqs = _sequences()
    counts = Counter(i for s in seqs.values() for i in s[:-1])  # the held-out last item is not training data
    cuts = statistics.quantiles([counts[s[-1]] for s in seqs.values()], n=3, method="inclusive")
    t = build_task(compose_cfg(f"task={task}"))
    ex = t.load()
    assert t.strata["popularity"]["cuts"] == pytest.approx(cuts)
    assert len(ex) == len(seqs)
    for e in ex:
        n = counts[seqs[e.id][-1]]
        assert e.meta["target_interactions"] == n
        assert e.meta["popularity"] == ("low" if n <= cuts[0] else "mid" if n <= cuts[1] else "high")
        h = len(seqs[e.id]) - 1
        assert e.meta["history"] == ("<=4" if h <= 4 else "5-9" if h <= 9 else "10+")
    assert t.breakdown_by[0] == "history" and "popularity" in t.breakdown_by


def test_random_expectation_beside_sampled_metrics(tmp_path):
    cfg = compose_cfg("task=llmrec_sequential", "method=random", f"cache.path={tmp_path / 'c.sqlite'}")
    m = run_from_config(cfg, tmp_path / "run").to_dict()
    rnd = m["extra"]["random_expectation"]
    assert m["extra"]["random_expectation_candidates"] == [100]
    # by hand: 1 positive among 100: HR@k = k/100, NDCG@k = (1/100) * sum_{r<=k} 1/log2(r+1)
    assert rnd["hr@1"] == pytest.approx(0.01) and rnd["ndcg@1"] == pytest.approx(0.01)
    assert rnd["hr@10"] == pytest.approx(0.10)
    assert rnd["ndcg@5"] == pytest.approx((1 + 0.6309298 + 0.5 + 0.4306766 + 0.3868528) / 100, abs=1e-8)
    assert rnd["ndcg@10"] == pytest.approx(0.045435594, abs=1e-8)
    assert not math.isnan(m["metrics"]["hr@10"]["mean"])
    assert set(m["breakdown"]) == {"history", "popularity", "activity"}  # activity: the fairness groups (issue 41)


def test_rating_history_buckets():
    from recbench.run.construct import build_task

    t = build_task(compose_cfg("task=llmrec_rating"))
    train, test = t.split()
    n_train = train.groupby("user_id").size().to_dict()
    for e in t.load():
        n = n_train.get(e.data["user_id"], 0)
        assert e.meta["history"] == ("<=4" if n <= 4 else "5-9" if n <= 9 else "10+")
    assert t.breakdown_by == ("rating", "history")
