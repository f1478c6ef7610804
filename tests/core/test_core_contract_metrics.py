"""Issue 24, item 4: a metric is declared once, where it is computed (Task.metric_specs, beside score()), the loop
holds a task to its declarations, and corpus metrics have one mechanism (MetricSpec.corpus, computed by the
aggregation). A tiny task of this file carries the core checks; the bundled LLMRec rating sample checks that the
declared corpus statistics are what the per-example records say."""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from omegaconf import OmegaConf

from recbench.api.metrics import MetricSpec, UndeclaredMetric, corpus_values, declare, find_spec, register
from recbench.api.task import ReferenceMethod, Task, TaskView
from recbench.api.types import Example, Outcome
from recbench.run.loop import EvalLoop, aggregate
from recbench.store.response_cache import ResponseCache
from recbench.store.runstore import RunStore
from recbench.store.schema import Aggregate, SampleRecord

pytestmark = pytest.mark.fast

#: (id, guess, truth, group): four examples, hand-checked below
ROWS = [("a", 3.0, 4.0, "x"), ("b", 5.0, 5.0, "x"), ("c", 1.0, 4.0, "y"), ("d", 2.0, 2.0, "y")]


class Guess(ReferenceMethod[TaskView]):
    """The row's guess, without a model."""

    name = "guess"

    def predict(self, example: Example) -> Outcome:
        """The stored guess."""
        return Outcome(example.data["guess"])


def _spread(records: list[SampleRecord], task: Any) -> float | None:
    """max minus min of the guesses (None without records): a corpus statistic of the records."""
    guesses = [r.prediction for r in records]
    return max(guesses) - min(guesses) if guesses else None


class Contract(Task):
    """Guess a number; per example the squared error and a hit; over the run the RMSE and the spread of the guesses."""

    name = "contract"
    methods = {"guess": Guess}
    headline_metric = "c_hit"
    metric_specs = (
        MetricSpec("c_hit", binary=True, doc="1 when the guess is the truth"),
        MetricSpec("c_sq", higher_is_better=False, doc="squared error"),
        MetricSpec("c_rmse", higher_is_better=False, aggregation="corpus", per_example_name="c_sq",
                   corpus=lambda values: math.sqrt(sum(values) / len(values)), doc="RMSE"),
        MetricSpec("c_spread", higher_is_better=None, corpus=_spread, doc="max - min guess (a count-like fact)"),
        MetricSpec("c_never", higher_is_better=None, corpus=lambda records, task: None, doc="never applies"),
    )
    extra_key: str = ""  # a key score() adds besides the declared ones (set by the tests)

    def load(self) -> list[Example]:
        """The four rows."""
        return [Example(i, {"guess": g, "truth": t}, {"group": grp}) for i, g, t, grp in ROWS]

    def score(self, example: Example, outcome: Outcome) -> dict[str, float]:
        """c_hit, c_sq (and the extra key, if any)."""
        err = outcome.prediction - example.data["truth"]
        out = {"c_hit": float(err == 0), "c_sq": err * err}
        if self.extra_key:
            out[self.extra_key] = 1.0
        return out

    def run_facts(self, records: Any) -> dict[str, Any]:
        """What the guesses are (text)."""
        return {"about": "guesses of a number"}


def _run(tmp_path, task: Task) -> Aggregate:
    """Run the guess method over the task into tmp_path, then aggregate: metrics.json's blocks, typed."""
    store = RunStore(tmp_path / "run")
    cache = ResponseCache(tmp_path / "cache.sqlite")
    try:
        method = task.make_method(OmegaConf.create({"name": "guess"}))
        EvalLoop(task, method, None, cache, store, progress=False).run(task.load())
        return aggregate(task, store.records(), n_boot=50)
    finally:
        store.close()
        cache.close()


def test_declared_metrics_are_scored_and_corpus_values_computed_from_the_declarations(tmp_path):
    agg = _run(tmp_path, Contract({"name": "contract"}))
    assert agg.metrics["c_hit"].mean == 0.5  # b and d are exact
    assert agg.metrics["c_sq"].mean == pytest.approx((1 + 0 + 9 + 0) / 4)
    # facts first, then the corpus values in declaration order; c_never (None) is left out
    assert list(agg.extra) == ["about", "c_rmse", "c_spread"]
    assert agg.extra["c_rmse"] == pytest.approx(math.sqrt(10 / 4)) and agg.extra["c_spread"] == 4.0
    info = agg.metric_info
    assert info["c_rmse"].to_dict() == {"higher_is_better": False, "direction": "lower", "binary": False,
                                        "aggregation": "corpus"}
    assert (info["c_rmse"].direction, info["c_rmse"].aggregation) == ("lower", "corpus")
    assert info["c_spread"].direction == "none" and info["c_hit"].binary is True
    assert "c_never" not in info and "about" not in info
    assert find_spec("c_rmse").aggregation == "corpus"  # the class declaration reached the registry


def test_a_metric_declared_nowhere_stops_the_run_naming_it(tmp_path):
    task = Contract({"name": "contract"})
    task.extra_key = "c_typo"
    with pytest.raises(UndeclaredMetric, match=r"returned metric 'c_typo'.*Contract\.metric_specs.*c_hit"):
        _run(tmp_path, task)


def test_standard_metrics_need_no_declaration(tmp_path):
    for key in ("mae", "hr@7"):  # registered by name (recbench.api.metrics), 'hr@7' through its family 'hr'
        task = Contract({"name": "contract"})
        task.extra_key = key
        assert key in _run(tmp_path / key, task).metrics


def test_a_task_with_unknown_undeclared_metrics_records_them_with_direction_unknown(tmp_path, caplog):
    task = Contract({"name": "contract"})
    task.extra_key, task.undeclared_metrics = "c_adhoc_issue24", "unknown"
    agg = _run(tmp_path, task)
    assert agg.metric_info["c_adhoc_issue24"].direction == "unknown"
    assert any("c_adhoc_issue24" in r.getMessage() and "direction unknown" in r.getMessage() for r in caplog.records)


def test_corpus_value_of_a_per_example_form_is_null_when_no_example_defines_it():
    recs = [SampleRecord("a", metrics={"c_sq": math.nan}, prediction=1.0)]
    out = corpus_values(Contract({"name": "contract"}), recs)
    assert out == {"c_rmse": None, "c_spread": 0.0}  # written as null, as the YAML tasks' rmse always was


def test_run_facts_may_not_hold_a_bare_number(tmp_path):
    class Counting(Contract):
        def run_facts(self, records):
            return {"n_guesses": 4}

    with pytest.raises(TypeError, match="run_facts returned the number 'n_guesses'.*declare MetricSpec"):
        _run(tmp_path, Counting({"name": "contract"}))


def test_the_old_second_mechanism_is_refused_when_the_class_is_defined():
    with pytest.raises(TypeError, match="extra_aggregates is no longer called"):
        class Old(Contract):  # noqa: F841
            def extra_aggregates(self, records):
                return {"rmse": 1.0}


def test_one_name_has_one_direction_across_tasks_and_the_registry():
    with pytest.raises(ValueError, match="'mae' declared by x.Y.*already declared"):
        declare("x.Y", [MetricSpec("mae", higher_is_better=True)])  # the registry's mae is lower-is-better
    with pytest.raises(ValueError, match="'c_hit' registered twice"):
        register(MetricSpec("c_hit", binary=False))


def test_shipped_benchmarks_declare_their_metrics_in_their_task_classes():
    from recbench.tasks.llmrec.task import RatingTask, SequentialTask, SummaryTask
    from recbench.tasks.perrec.task import PerRecTask
    from recbench.tasks.recbench_plus.task import RecBenchPlusTask

    names = {cls.__name__: [s.name for s in cls.metric_specs]
             for cls in (PerRecTask, RecBenchPlusTask, RatingTask, SummaryTask, SequentialTask)}
    assert names["PerRecTask"][:2] == ["ptc", "ptc_parsed"] and "rating_rmse" in names["PerRecTask"]
    assert "n_recommended" in names["RecBenchPlusTask"]
    assert names["SummaryTask"] == ["bleu4", "corpus_bleu4", "empty_predictions"]
    assert "share_in_candidates" in names["SequentialTask"] and "rmse_parsed" in names["RatingTask"]
    corpus = [s.name for s in RatingTask.metric_specs if s.corpus is not None]
    assert corpus == ["rmse", "mae", "rmse_parsed", "mae_parsed", "n_fallback", "fallback_rating"]


def test_llmrec_rating_corpus_values_match_the_records_of_a_run_on_the_bundled_sample(tmp_path):
    """The corpus RMSE / MAE a rating run writes are the root mean / mean of its per-example squared / absolute
    errors (fallback rating for failures), recomputed here with numpy from samples.jsonl."""
    from recbench.run.evaluate import run_from_config
    from tests.helpers import compose_cfg

    cfg = compose_cfg(["task=llmrec_rating", "method=item_mean", "limit=40", "run.progress=false",
                       "run.bootstrap_resamples=50", f"cache.path={tmp_path / 'c.sqlite'}"])
    m = run_from_config(cfg, tmp_path / "run").to_dict()
    recs = [json.loads(x) for x in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    sq = np.array([r["metrics"]["mse"] for r in recs])
    err = np.array([r["prediction"] - r["truth"]["rating"] for r in recs])
    assert len(recs) == 40 and np.allclose(sq, err ** 2)
    assert m["extra"]["rmse"] == pytest.approx(float(np.sqrt(np.mean(err ** 2))), abs=1e-12)
    assert m["extra"]["mae"] == pytest.approx(float(np.mean(np.abs(err))), abs=1e-12)
    assert m["extra"]["rmse_parsed"] == m["extra"]["rmse"] and m["extra"]["n_fallback"] == 0
    assert m["metric_info"]["rmse"]["aggregation"] == "corpus" and m["metric_info"]["mae"]["aggregation"] == "mean"
