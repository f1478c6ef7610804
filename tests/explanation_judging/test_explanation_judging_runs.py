"""Explanation judging end to end through the real loop: every correlation in metrics.json recomputed with scipy
from samples.jsonl (random judge), a constant judge's undefined correlations, and a scripted judge whose answers pin
the parsing (a malformed answer kept, scored with the fallback and counted)."""
from __future__ import annotations

import math

import pytest
from tests.explanation_judging.ej_helpers import recompute, same
from tests.helpers import assert_generator_rewrites_sample, compose_cfg, run_scripted

from recbench.run.evaluate import run_from_config
from recbench.tasks.explanation_judging import synth
from recbench.tasks.explanation_judging.correlations import metric_names
from recbench.tasks.explanation_judging.settings import ASPECTS

pytestmark = pytest.mark.fast


def _run(tmp_path, *overrides, name="run"):
    cfg = compose_cfg(["task=explanation_judging", "run.progress=false", f"cache.path={tmp_path / 'c.sqlite'}",
                       *overrides])
    return run_from_config(cfg, tmp_path / name).to_dict(), tmp_path / name


def assert_recomputed(metrics: dict, recs: list[dict], fallback: float = 3.0) -> dict:
    """Every per-aspect value (extra.by_aspect) and every run value (the mean over the aspects) equals scipy's."""
    mine = recompute(recs, fallback)
    by_aspect = metrics["extra"]["by_aspect"]
    assert list(by_aspect) == [a for a in ASPECTS if a in mine]
    for aspect, v in mine.items():
        for name, value in v.items():
            assert same(by_aspect[aspect][name], value), (aspect, name, by_aspect[aspect][name], value)
    for name in metric_names():
        vals = [v[name] for v in mine.values()]
        expected = math.nan if any(math.isnan(x) for x in vals) else sum(vals) / len(vals)
        assert same(metrics["extra"][name], expected), name
        assert metrics["metric_info"][name]["aggregation"] == "corpus"
    assert metrics["extra"]["n_pair_skipped"] == sum(v["pairs_skipped"] for v in mine.values())
    return mine


def test_random_judge_every_correlation_recomputed_from_samples(tmp_path):
    from tests.explanation_judging.ej_helpers import samples

    metrics, run_dir = _run(tmp_path, "method=random_judge")
    recs = samples(run_dir)
    assert len(recs) == metrics["counts"]["examples"] == 604
    assert all(r["prediction"] in (1.0, 2.0, 3.0, 4.0, 5.0) for r in recs)
    assert {tuple(sorted(r["meta"])) for r in recs} == {("aspect", "explanation_type", "movie_id", "user_id")}
    assert metrics["cluster_by"] == "user_id" and set(metrics["breakdown"]["aspect"]) == set(ASPECTS)
    mine = assert_recomputed(metrics, recs)
    assert all(abs(v["pearson_dataset"]) < 0.3 for v in mine.values())  # chance level 0
    assert metrics["metrics"]["abs_error"]["mean"] == pytest.approx(
        sum(abs(r["prediction"] - r["truth"]["rating"]) for r in recs) / len(recs))
    again, _ = _run(tmp_path, "method=random_judge", name="again")
    assert again["extra"]["by_aspect"] == metrics["extra"]["by_aspect"]  # seeded


def test_constant_judge_has_no_correlation_and_says_why(tmp_path):
    metrics, run_dir = _run(tmp_path, "method=constant_judge", "task.aspects=[transparency]")
    x = metrics["extra"]
    assert list(x["by_aspect"]) == ["transparency"] and metrics["counts"]["examples"] == 151
    assert all(same(x[name], None) for name in metric_names())  # NaN (null in metrics.json)
    assert x["n_user_skipped"] == 5 and x["n_pair_skipped"] == 20
    assert any(line.startswith("NaN: undefined") for line in x["summary"])
    assert metrics["metrics"]["abs_error"]["mean"] > 0


def test_scripted_judge_parsing_and_fallback(tmp_path):
    answers = ["4", "Score: 2", "banana", "On a scale of 1 to 5, I give it 5", "7", "", "3.", "1"]
    it = iter(answers * 40)
    seen_aspects = []

    def answer(req):
        seen_aspects.append(req.messages[-1][1])
        return next(it)

    metrics, recs, _ = run_scripted(tmp_path, ["task=explanation_judging", "method=judge_score", "model=smollm2",
                                                  "limit=40", "run.chunk_size=1", "run.progress=false"], answer)
    c = metrics["counts"]
    assert (c["examples"], c["parse_ok"], c["parse_repaired"], c["parse_failed"]) == (40, 10, 20, 10)
    assert {r["prediction"] for r in recs} == {1.0, 2.0, 3.0, 4.0, 5.0, None}
    failed = [r for r in recs if r["parse_status"] == "failed"]
    assert len(failed) == 10 and all(r["prediction"] is None and r["metrics"]["parsed"] == 0.0 for r in failed)
    assert all(r["metrics"]["abs_error"] == abs(3.0 - r["truth"]["rating"]) for r in failed)  # the fallback rating
    assert all(r["calls"][0]["response"] in answers for r in recs)  # the raw answer kept
    assert metrics["extra"]["n_fallback"] == 10 and metrics["extra"]["fallback_rating"] == 3.0
    assert_recomputed(metrics, recs)
    echo = [r for r in recs if r["calls"][0]["response"].startswith("On a scale")]
    assert all(r["prediction"] == 5.0 and r["parse_status"] == "repaired" for r in echo)
    assert all("(strongly disagree)" in m for m in seen_aspects)


def test_the_sample_is_what_its_generator_writes(tmp_path):
    assert_generator_rewrites_sample(synth.main, "explanation_judging_sample", tmp_path / "out")
