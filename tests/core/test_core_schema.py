"""The typed run schema: version-1 run dirs are read, unknown versions refused naming the file; the registry's
metric directions reach the report (a new lower-is-better metric is never treated as higher-is-better)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from recbench.api.metrics import MetricSpec, metric_spec, register
from recbench.store.schema import SCHEMA_VERSION, SchemaError, read_run

pytestmark = pytest.mark.fast
V1 = Path(__file__).resolve().parents[1] / "fixtures" / "run_v1_perrec_listwise"


def test_reads_a_version_1_run_dir():
    run = read_run(V1)
    r = run.result
    assert r.schema_version == 1 and r.task_name == "perrec" and r.method == "listwise"
    assert r.metrics["ptc"].mean == 0.25 and r.metrics["ptc"].n == 8 and r.counts.parse_failed == 2
    assert r.metric_info == {} and r.cluster_by is None  # added in version 2
    samples = run.samples(with_prompts=True)
    assert len(samples) == 8 and sum(s.parse_status == "failed" for s in samples) == 2
    assert all(c.messages and c.messages[-1]["role"] == "user" for s in samples for c in s.calls)
    assert sum(s.value("ptc") for s in samples) / 8 == pytest.approx(r.metrics["ptc"].mean)
    assert run.config["method"]["name"] == "listwise"


@pytest.mark.parametrize("version", [99, None, "2"])
def test_unknown_schema_version_is_refused_naming_the_file(tmp_path, version):
    shutil.copytree(V1, tmp_path / "r")
    m = json.loads((tmp_path / "r" / "metrics.json").read_text())
    m["schema_version"] = version
    (tmp_path / "r" / "metrics.json").write_text(json.dumps(m))
    with pytest.raises(SchemaError, match=r"metrics\.json: schema_version .* is not readable"):
        read_run(tmp_path / "r")


def test_current_runs_write_the_current_version_with_metric_info(tmp_path):
    from recbench.run.evaluate import run_from_config
    from tests.toy import toy_cfg

    run_from_config(toy_cfg(["method=toy_popular", "limit=6"], tmp_path), tmp_path / "run")
    r = read_run(tmp_path / "run").result
    assert r.schema_version == SCHEMA_VERSION and r.task_name == "toy" and r.cluster_by == "user"
    assert r.metric_info["toy_tau"].to_dict() == {"higher_is_better": True, "direction": "higher", "binary": False,
                                                  "aggregation": "mean"}
    assert r.metric_info["toy_miss"].higher_is_better is False and r.metric_info["toy_hit"].binary is True


def test_registered_direction_reaches_the_report_best_marks(tmp_path):
    from recbench.report.directions import Directions

    import tests.toy.task  # noqa: F401 - registers the toy metrics

    register(MetricSpec("test_regret_at_3", higher_is_better=False))
    lay = Directions()
    assert lay.higher_is_better("test_regret_at_3") is False and lay.higher_is_better("toy_tau") is True
    assert lay.higher_is_better("toy_miss") is False
    assert metric_spec("hr@7").binary and metric_spec("hr@7").higher_is_better  # family lookup
    # a metric only a run recorded (e.g. a user's YAML task) takes its recorded direction
    lay.note_metrics({"my_loss": {"higher_is_better": False, "binary": False, "aggregation": "mean"}})
    assert lay.higher_is_better("my_loss") is False
    with pytest.raises(ValueError, match="registered twice"):
        register(MetricSpec("test_regret_at_3", higher_is_better=True))


@pytest.mark.parametrize("enabled", [True, False])
def test_reading_records_pauses_the_gc_and_restores_it_even_on_a_bad_line(tmp_path, enabled):
    """load_jsonl turns automatic collections off while it reads (records hold no cycles) and leaves the GC as it
    found it, whether the file reads or a line is refused."""
    import gc

    from recbench.store.schema import load_jsonl

    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_text('{"a": 1}\n{"a": 2}\n')
    bad.write_text('{"a": 1}\nnot json\n')
    seen = []
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        assert load_jsonl(good, lambda d: seen.append(gc.isenabled()) or d["a"]) == [1, 2]
        assert seen == [False, False] and gc.isenabled() is enabled
        with pytest.raises(SchemaError, match=r"bad\.jsonl:2: not valid JSON"):
            load_jsonl(bad, lambda d: d)
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
