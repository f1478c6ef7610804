"""metrics.json's facts besides the metrics are typed records (store/facts.py, api/facts.py): `this_invocation`,
`cost`, `task` and each `metric_info` entry read as fields, and written back as exactly the JSON they were read from
(keys, values and order), an old run dir's keys included."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from recbench.api.facts import MetricInfo
from recbench.api.metrics import metric_spec
from recbench.store.facts import Cost, Invocation, TaskInfo
from recbench.store.result import RunResult

pytestmark = pytest.mark.fast
V1 = Path(__file__).resolve().parents[1] / "fixtures" / "run_v1_perrec_listwise" / "metrics.json"


def test_a_version_1_result_reads_typed_and_writes_the_same_facts():
    raw = json.loads(V1.read_text())
    r = RunResult.from_dict(raw)
    assert isinstance(r.this_invocation, Invocation) and r.this_invocation.backend_calls == 8
    assert r.this_invocation.total_wall_time_s == raw["this_invocation"]["total_wall_time_s"]
    assert r.this_invocation.model_loaded is None  # not said by that recbench
    assert r.this_invocation.other == {"backend_batches": 1, "backend_time_s": raw["this_invocation"]["backend_time_s"]}
    assert isinstance(r.task, TaskInfo) and r.task.name == "perrec" and r.task.settings["retrieval_k"] == 4
    assert r.cost is None
    out = r.to_dict()
    for key in ("task", "this_invocation", "cost"):
        assert json.dumps(out[key]) == json.dumps(raw[key]), key  # same keys, values and order


def test_cost_and_metric_info_round_trip_typed():
    cost = {"currency": "USD", "prompt_per_1m": 1.0, "completion_per_1m": 2.0, "prompt_tokens": 10,
            "completion_tokens": 5, "prompt_cost": 1e-05, "completion_cost": 1e-05, "total": 2e-05, "source": "x",
            "this_invocation": 0.0}
    c = Cost.from_dict(cost)
    assert (c.total, c.currency, c.this_invocation) == (2e-05, "USD", 0.0)
    assert json.dumps(c.to_dict()) == json.dumps(cost)
    info = {"higher_is_better": False, "direction": "lower", "binary": False, "aggregation": "corpus"}
    m = MetricInfo.from_dict(info)
    assert (m.direction, m.aggregation, m.higher_is_better) == ("lower", "corpus", False)
    assert json.dumps(m.to_dict()) == json.dumps(info)
    old = MetricInfo.from_dict({"higher_is_better": True})  # written before directions were named
    assert old.to_dict() == {"higher_is_better": True}
    assert metric_spec("an_unregistered_metric_of_facts", old).higher_is_better is True


def test_counters_in_the_loops_order_and_typed():
    inv = Invocation.of({"examples_total": 2, "cache_hits": 1, "wall_time_s": 1, "total_wall_time_s": 2.5,
                         "model_loaded": True})
    assert isinstance(inv.wall_time_s, float) and inv.cache_hits == 1 and inv.backend_calls == 0
    assert list(inv.to_dict()) == ["examples_total", "cache_hits", "wall_time_s", "total_wall_time_s", "model_loaded"]


def test_the_task_facts_the_core_reads_are_typed():
    from recbench.store.facts import RunFacts

    extra = {"summary": ["a verdict", 3], "random_expectation": {"ptc": 0.5, "flag": True, "n": 2},
             "n_fallback": 2, "fallback_rating": 3.0, "memorization": {"recalled": 1}, "about": "x"}
    f = RunFacts.of(extra)
    assert f.summary == ("a verdict", "3") and f.random_expectation == {"ptc": 0.5, "n": 2.0}
    assert (f.fallback_count, f.fallback_value, f.probe_verdict) == (2, 3.0, {"recalled": 1})
    # a value of another shape reads as absent, never as a wrong fact
    bad = RunFacts.of({"summary": "one text", "random_expectation": [1], "n_fallback": "2", "memorization": 1})
    assert bad == RunFacts()
    r = RunResult.from_dict({**json.loads(V1.read_text()), "extra": extra})
    assert r.facts == f and r.to_dict()["extra"] == extra  # the file keeps the task's keys as written


def test_a_results_json_row_has_the_report_identity_and_typed_counts(tmp_path):
    from recbench.report.collect import ReportedRun, RunIdentity
    from recbench.report.results import MetricValue, Results, ResultsRow, load_results, write_results
    from recbench.store.result import Counts

    row = ResultsRow(task="toy", model="none", method="pop", seed=0, run_dir="r", variant="", complete=True,
                     counts=Counts(examples=5, parsed=5), metrics={"m": MetricValue(0.5, 0.4, 0.6, 5)})
    assert issubclass(ReportedRun, RunIdentity) and row.identity() == RunIdentity("toy", "none", "pop", 0)
    path = write_results(Results(1, [row]), tmp_path / "results.json")
    raw = json.loads(path.read_text())["runs"][0]
    assert list(raw) == ["run_dir", "task", "model", "method", "variant", "seed", "complete", "counts", "metrics"]
    assert raw["counts"]["examples"] == 5 and raw["counts"]["parse_failure_rate"] is None
    back = load_results(path).runs[0]
    assert back == row and isinstance(back.counts, Counts)
