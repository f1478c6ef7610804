"""The typed run schema: version-1 run dirs are read, unknown versions refused naming the file; the registry's
metric directions reach the report (a new lower-is-better metric is never treated as higher-is-better)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from recbench.api.metrics import MetricSpec, metric_spec, register
from recbench.store.schema import SCHEMA_VERSION, SchemaError, read_run

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


def test_report_builds_from_a_version_1_run_dir(tmp_path):
    from recbench.report import build_report

    shutil.copytree(V1, tmp_path / "v1")
    rep = build_report([tmp_path / "v1"])
    t1 = next(t for t in rep.tables if t.id == "perrec-table1")
    cell = dict(zip(t1.columns, t1.rows[0][1]))[("listwise", "easy")]
    assert cell.mean == pytest.approx(0.25)


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
    from tests.helpers import compose_cfg

    run_from_config(compose_cfg(["method=user_avg", "limit=6", f"cache.path={tmp_path / 'c.sqlite'}",
                                 "run.progress=false"]), tmp_path / "run")
    r = read_run(tmp_path / "run").result
    assert r.schema_version == SCHEMA_VERSION
    assert r.metric_info["ptc"] == {"higher_is_better": True, "direction": "higher", "binary": False,
                                    "aggregation": "mean"}
    assert r.metric_info["rating_rmse"]["higher_is_better"] is False


def test_registered_direction_reaches_the_report_best_marks(tmp_path):
    from recbench.report.layouts import Layouts

    register(MetricSpec("test_regret_at_3", higher_is_better=False))
    lay = Layouts.load()
    assert lay.higher_is_better("test_regret_at_3") is False and lay.higher_is_better("ptc") is True
    assert metric_spec("hr@7").binary and metric_spec("hr@7").higher_is_better  # family lookup
    # a metric only a run recorded (e.g. a user's YAML task) takes its recorded direction
    lay.note_metrics({"my_loss": {"higher_is_better": False, "binary": False, "aggregation": "mean"}})
    assert lay.higher_is_better("my_loss") is False
    with pytest.raises(ValueError, match="registered twice"):
        register(MetricSpec("test_regret_at_3", higher_is_better=True))
