"""Prompting variants (CoT, few-shot, self-consistency, profile file), rating metrics, reference rows and the report."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from recbench.api.errors import ConfigError
from recbench.api.metrics import corpus_values
from recbench.run.construct import bundled_data

from recbench.run.evaluate import run_from_config
from recbench.store.schema import SCHEMA_VERSION, SampleRecord
from recbench.tasks.perrec.methods import borda, majority
from recbench.tasks.perrec.report import collect, correlations, markdown
from recbench.tasks.perrec.task import PerRecTask
from recbench.api.types import Example, Outcome
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    """The bundled sample plus a held-out file (the groups of the last 30 groups' query items) for few-shot."""
    src = Path(bundled_data("perrec_sample"))
    d = tmp_path_factory.mktemp("perrec")
    for f in ("items.jsonl", "ratings.csv.gz"):
        (d / f).write_bytes((src / f).read_bytes())
    groups = [json.loads(x) for x in (src / "groups.jsonl").read_text().splitlines()]
    held_items = {g["query_item"] for g in groups[-30:]}
    (d / "groups.jsonl").write_text("".join(json.dumps(g) + "\n" for g in groups if g["query_item"] not in held_items))
    (d / "heldout.jsonl").write_text("".join(json.dumps({**g, "group_id": "ho-" + g["group_id"]}) + "\n"
                                             for g in groups if g["query_item"] in held_items))
    return str(d)


def run(tmp_path, data_dir, method, answer, extra=()):
    cfg = compose_cfg(["task=perrec_built", f"task.data_dir={data_dir}", f"method={method}", "limit=6",
                       "run.progress=false", "cache.enabled=false", *extra])
    b = ScriptedBackend(answer)
    reqs = []
    orig = b.generate
    b.generate = lambda rs: (reqs.extend(rs), orig(rs))[1]
    m = run_from_config(cfg, tmp_path / method, backend=b).to_dict()
    return m, reqs, [json.loads(x) for x in (tmp_path / method / "samples.jsonl").read_text().splitlines()]


def test_cot_answer_extraction_and_template(tmp_path, data_dir):
    m, reqs, recs = run(tmp_path, data_dir, "pointwise_cot", lambda r: "The user rates 2 on average. Answer: 4")
    assert all("step by step" in r.messages[-1][1] and r.constraint is None for r in reqs)
    assert all(v == 4.0 for rec in recs for v in rec["prediction"]["ratings"].values())
    assert m["method"] == "pointwise_cot" and m["run_dir"].endswith("pointwise_cot")
    m, _, recs = run(tmp_path, data_dir, "listwise_cot",
                     lambda r: 'User A seems best. Answer: {"ranking": ["User B", "User A", "User C", "User D"]}')
    assert m["counts"]["parse_failed"] == 0 and all(rec["parse_status"] != "failed" for rec in recs)


def test_fewshot_turns_come_from_heldout_with_gold_answers(tmp_path, data_dir):
    m, reqs, _ = run(tmp_path, data_dir, "listwise_fewshot", lambda r: '{"ranking": ["User A", "User B"]}')
    task = PerRecTask(compose_cfg(["task=perrec_built", f"task.data_dir={data_dir}"]).task)
    held: dict = {}
    for e in task.heldout():
        held.setdefault(e.data["query_title"], []).append(e)
    for r in reqs:
        roles = [role for role, _ in r.messages]
        assert roles == ["system"] + ["user", "assistant"] * 3 + ["user"]
        for (_, q), (_, a) in zip(r.messages[1:-1:2], r.messages[2:-1:2]):
            title = q.split('rated the item "')[1].split('"')[0]
            assert title in held  # (the fixture keeps held-out query items out of groups.jsonl)
            ranking = json.loads(a)["ranking"]
            shown = {lab: q.split(lab + ":\n- Average rating: ")[1][:4] for lab in ranking}
            # gold order: users sorted by relative rating, checked through the shown average of each label
            ok = False
            for ex in held[title]:
                by_avg = {f"{u['avg_rating']:.2f}": u["relative_rating"] for u in ex.data["users"]}
                if len(ex.data["users"]) == len(ranking) and all(v in by_avg for v in shown.values()):
                    rels = [by_avg[shown[lab]] for lab in ranking]
                    ok = ok or rels == sorted(rels, reverse=True)
            assert ok
    # seeded: the same run again draws the same demonstrations
    _, reqs2, _ = run(tmp_path / "again", data_dir, "listwise_fewshot", lambda r: '{"ranking": ["User A", "User B"]}')
    assert [r.messages for r in reqs] == [r.messages for r in reqs2]


def test_self_consistency_samples_and_aggregates(tmp_path, data_dir):
    answers = iter(["5", "3", "x", "4", "4"] * 1000)
    m, reqs, recs = run(tmp_path, data_dir, "pointwise_sc", lambda r: next(answers))
    assert {r.sampling.temperature for r in reqs} == {0.7}
    prompts: dict = {}
    for r in reqs:
        prompts.setdefault(r.messages, []).append(r.sampling.seed)
    assert all(sorted(s) == [0, 1, 2, 3, 4] for s in prompts.values())
    assert all(v == 4.0 for rec in recs for v in rec["prediction"]["ratings"].values())  # mean of 5, 3, 4, 4
    assert all(rec["parse_status"] == "repaired" for rec in recs)  # one sample of five unparsed
    assert borda([["a", "b", "c"], ["b", "a", "c"], ["b", "c", "a"]], ["a", "b", "c"]) == ["b", "a", "c"]
    assert majority(["[User A]", "[User B]", "[User A]", None]) == "[User A]" and majority(["x", "y"]) is None


def test_pairwise_sc_majority_then_both_orders(tmp_path, data_dir):
    def ans(r):  # order 1 says A (3 of 5), order 2 says B: consistent -> the first shown user wins
        return "[User A]" if r.sampling.seed in (0, 1, 2) else "[User B]"
    m, reqs, recs = run(tmp_path, data_dir, "pairwise_sc", ans)
    assert all(rec["details"]["consistent"] == 0 for rec in recs)  # A in both orders -> inconsistent every time
    assert len(reqs) == sum(rec["details"]["comparisons"] for rec in recs) * 2 * 5


def test_rating_metrics_hand_computed():
    task = PerRecTask(compose_cfg(["task=perrec"]).task)
    users = [{"user_id": "a", "rating": 4.0, "relative_rating": 0.5, "avg_rating": 3.5},
             {"user_id": "b", "rating": 2.0, "relative_rating": -1.0, "avg_rating": 3.0}]
    ex = Example(id="g", data={"users": users}, meta={"group_size": 2})
    s = task.score(ex, Outcome(prediction={"order": ["a", "b"], "ratings": {"a": 5.0, "b": 4.0}}))
    assert s["ptc"] == 1.0 and s["mae"] == 1.5 and s["mse"] == 2.5
    ex3 = Example(id="h", data={"users": users + [{"user_id": "c", "rating": 3.0, "relative_rating": 0.0, "avg_rating": 3.0}]},
                  meta={"group_size": 3})
    s3 = task.score(ex3, Outcome(prediction={"order": ["a", "c", "b"], "ratings": {"a": 4.0, "b": 2.0, "c": 0.0}}))
    recs = [SampleRecord(id="g", metrics=s, meta=ex.meta), SampleRecord(id="h", metrics=s3, meta=ex3.meta)]
    agg = corpus_values(task, recs)  # the corpus metrics PerRecTask declares (MetricSpec.corpus)
    errs = np.array([1, 2, 0, 0, 3.0])
    assert agg["rating_mae"] == pytest.approx(errs.mean()) and agg["rating_rmse"] == pytest.approx(math.sqrt((errs ** 2).mean()))
    assert agg["rating_n"] == 5


def test_reference_rows_predict_user_and_item_averages(tmp_path, data_dir):
    for method, key in (("user_avg", "avg_rating"), ("item_avg", None)):
        m, reqs, recs = run(tmp_path, data_dir, method, lambda r: "")
        assert not reqs and m["model"] == "none" and "rating_rmse" in m["extra"]
        task = PerRecTask(compose_cfg(["task=perrec_built", f"task.data_dir={data_dir}"]).task)
        exs = {e.id: e for e in task.load()}
        for rec in recs:
            e = exs[rec["id"]]
            for u in e.data["users"]:
                want = u["avg_rating"] if key else e.data["item_avg_rating"]
                assert rec["prediction"]["ratings"][u["user_id"]] == want


def test_profile_file_is_used_instead_of_model_profiles(tmp_path, data_dir):
    task = PerRecTask(compose_cfg(["task=perrec_built", f"task.data_dir={data_dir}"]).task)
    ex = task.load()[0]
    prof = {f"{u['user_id']}@{ex.data['query_item']}": f"PROFILE-{u['user_id']}" for u in ex.data["users"]}
    (tmp_path / "p.json").write_text(json.dumps(prof))
    m, reqs, _ = run(tmp_path, data_dir, "listwise", lambda r: '{"ranking": ["User A", "User B"]}',
                     ["task.profile=true", f"task.profile_file={tmp_path / 'p.json'}", "limit=1"])
    assert len(reqs) == 1 and all(r.purpose == "answer" for r in reqs)  # no profile requests to the evaluated model
    assert all(f"PROFILE-{u['user_id']}" in reqs[0].messages[-1][1] for u in ex.data["users"])


def test_profiles_cli_writes_a_file_with_another_backend(tmp_path, data_dir, monkeypatch, capsys):
    """python -m recbench.tool perrec.profiles ...: the core composes the config and builds the task and the backend
    (here a scripted one), the tool writes the file; without out= it says how to call it and builds nothing."""
    import recbench.cli.tool as tool

    built = []
    monkeypatch.setattr(tool, "build_backend", lambda model: built.append(model.name) or
                        ScriptedBackend(lambda r: "Likes westerns."))
    out = tmp_path / "prof.json"
    argv = ["perrec.profiles", "task=perrec_built", f"task.data_dir={data_dir}", "cache.enabled=false",
            "method=listwise"]
    tool.main([*argv, f"out={out}"])
    profiles = json.loads(out.read_text())
    cfg = compose_cfg(["task=perrec_built", f"task.data_dir={data_dir}"])
    n_members = sum(len(e.data["users"]) for e in PerRecTask(cfg.task).load() + PerRecTask(cfg.task).heldout())
    assert 0 < len(profiles) <= n_members and set(profiles.values()) == {"Likes westerns."}
    assert f"wrote {len(profiles)} profiles to {out}" in capsys.readouterr().out and len(built) == 1
    with pytest.raises(SystemExit) as stop:
        tool.main(argv)
    assert stop.value.code == 2 and "out=built/ml/profiles.json" in capsys.readouterr().out and len(built) == 1
    with pytest.raises(SystemExit) as stop:
        tool.main(["perrec.metrics", "out=x"])
    assert stop.value.code == 2 and "is not a tool" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="no tool module 'recbench.tasks.perrec.nope'"):
        tool.tool_module("perrec.nope")


def test_report_pearson_over_runs(tmp_path):
    rows = [(0.10, 1.2, 1.5), (0.20, 1.0, 1.3), (0.05, 0.9, 1.1), (0.30, 1.1, 1.4)]
    for i, (ptc, mae, rmse) in enumerate(rows):
        d = tmp_path / f"r{i}"
        d.mkdir()
        (d / "metrics.json").write_text(json.dumps({
            "schema_version": SCHEMA_VERSION, "task": {"name": "perrec", "data_dir": "x"}, "model": "m", "method": f"v{i}",
            "metrics": {"ptc": {"mean": ptc}}, "counts": {"examples": 10, "parse_failure_rate": 0.0},
            "extra": {"rating_mae": mae, "rating_rmse": rmse}}))
    df = collect([str(tmp_path)])
    c = correlations(df)
    from scipy.stats import pearsonr

    assert c["rmse"]["r"] == pytest.approx(pearsonr([r[0] for r in rows], [r[2] for r in rows]).statistic)
    assert c["mae"]["n"] == 4 and "Pearson r(PTC, RMSE)" in markdown(df, c)
