"""`python -m recbench.export RUN_DIR... --hub OUT` (issue 43): the dataset folder of two runs reads back with
huggingface_hub's card parsers and with `datasets` offline (results with CIs equal metrics.json, details equal the
samples); each model card's model-index parses into the eval results; --push refuses in one line without a token and
uploads the folder with one (the Hub faked: tests run offline)."""
from __future__ import annotations

import math

import pytest

from recbench import export
from recbench.store.schema import read_run
from tests.publish.runs import model_free_sweep

pytestmark = pytest.mark.full  # datasets reads the parquet files (seconds)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    sweep = model_free_sweep(root, methods=("bm25_history", "user_avg"))
    assert export.main([str(sweep), "--hub", str(root / "out")]) == 0
    return sweep, root / "out"


def test_the_folder_reads_back_with_the_hubs_parsers(exported):
    from huggingface_hub import DatasetCard, ModelCard

    sweep, out = exported
    configs = {c["config_name"]: c for c in DatasetCard.load(out / "README.md").data.to_dict()["configs"]}
    assert set(configs) == {"results", "details_perrec_none_bm25_history_limit_8", "details_perrec_none_user_avg_limit_8"}
    cards = sorted(p.name for p in (out / "model_cards").iterdir())
    assert cards == ["bm25_history_model-free.md", "user_avg_model-free.md"]
    evals = ModelCard.load(out / "model_cards" / cards[1]).data.eval_results
    result = read_run(sweep / "perrec" / "none" / "user_avg" / "limit=8").result
    assert {(e.task_type, e.task_name, e.metric_type, e.metric_config): e.metric_value for e in evals} == \
        {("recommendation", "perrec", m, "user_avg"): s.mean for m, s in result.metrics.items()}


def test_datasets_loads_results_and_details_offline(exported, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from datasets import load_dataset

    sweep, out = exported
    rows = load_dataset(str(out), "results", split="latest")
    run = read_run(sweep / "perrec" / "none" / "bm25_history" / "limit=8")
    mine = {(r["slice"], r["value"], r["metric"]): r for r in rows if r["method"] == "bm25_history"}
    want = {("all", "all", m): s for m, s in run.result.metrics.items()}
    want.update({(k, v, m): s for k, vals in run.result.breakdown.items() for v, sl in vals.items()
                 for m, s in sl.metrics.items()})
    assert set(mine) == set(want)
    for key, s in want.items():
        r = mine[key]
        for field in ("mean", "ci_low", "ci_high"):
            v = getattr(s, field)
            assert (r[field] is None and math.isnan(v)) or r[field] == pytest.approx(v), (key, field)
    details = load_dataset(str(out), "details_perrec_none_bm25_history_limit_8", split="latest")
    assert sorted(details["id"]) == sorted(s.id for s in run.samples())
    assert {d["id"]: d["metric.ptc"] for d in details} == {s.id: s.metrics["ptc"] for s in run.samples()}


def test_push_refuses_without_a_token(exported, monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # no saved login either
    sweep, _ = exported
    assert export.main([str(sweep), "--hub", str(tmp_path / "o"), "--push", "me/results"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"recbench: --push me/results needs a Hugging Face token (set HF_TOKEN or run `hf auth login`); "
                   f"nothing pushed, the export is in {tmp_path / 'o'}"]


def test_push_uploads_the_folder_with_a_token(exported, monkeypatch, tmp_path, capsys):
    import huggingface_hub

    calls = []

    class FakeApi:
        def __init__(self, token):
            calls.append(("token", token))

        def create_repo(self, repo, **kw):
            calls.append(("create", repo, kw["repo_type"]))

        def upload_folder(self, **kw):
            calls.append(("upload", kw["repo_id"], kw["repo_type"], sorted(p.name for p in
                                                                           __import__("pathlib").Path(kw["folder_path"]).iterdir())))
            return type("Info", (), {"commit_url": "https://huggingface.co/datasets/me/results/commit/1"})()

    monkeypatch.setenv("HF_TOKEN", "hf_test")
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    sweep, _ = exported
    assert export.main([str(sweep), "--hub", str(tmp_path / "o"), "--push", "me/results"]) == 0
    assert calls == [("token", "hf_test"), ("create", "me/results", "dataset"),
                     ("upload", "me/results", "dataset", ["README.md", "details", "model_cards", "results"])]
    assert "pushed: https://huggingface.co/datasets/me/results/commit/1" in capsys.readouterr().out
    assert 'load_dataset("me/results", "results")' in (tmp_path / "o" / "README.md").read_text()
