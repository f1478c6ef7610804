"""The `predictions` backend: answers by example id, keeps identical prompts apart, reports missing ids."""
from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from recbench.backends.predictions import PredictionsBackend
from recbench.store.response_cache import ResponseCache, cache_key
from recbench.run.loop import EvalLoop
from recbench.store.runstore import RunStore
from recbench.tasks.recbench_plus.task import RecBenchPlusTask
from recbench.api.types import Request, SamplingParams

pytestmark = pytest.mark.fast


def write(tmp_path, rows):
    p = tmp_path / "preds.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def test_answers_by_example_id_and_missing_ids(tmp_path):
    b = PredictionsBackend(str(write(tmp_path, [{"id": "0-0", "response": "A [SEP] B"}, {"id": 7, "response": "C"}])))
    req = Request.chat([{"role": "user", "content": "q"}], SamplingParams())
    out = b.generate([req.__class__(**{**req.__dict__, "example_id": "7"}), Request(messages=req.messages, example_id="0-0"),
                      Request(messages=req.messages, example_id="9"), req])
    assert [o.text for o in out[:2]] == ["C", "A [SEP] B"] and out[0].ok
    assert out[2].error and "9" in out[2].error and out[3].error
    b2 = PredictionsBackend(str(tmp_path / "preds.jsonl"), on_missing="empty")
    assert b2.generate([Request(messages=req.messages, example_id="9")])[0].text == ""
    # identical prompts of two examples get different cache keys only for this backend
    r1, r2 = Request(messages=req.messages, example_id="0-0"), Request(messages=req.messages, example_id="7")
    assert cache_key(b.identity(), r1) != cache_key(b.identity(), r2)
    assert cache_key({"kind": "hf", "name": "m"}, r1) == cache_key({"kind": "hf", "name": "m"}, r2)


def test_identical_queries_are_scored_with_their_own_answers(tmp_path):
    recs = [{"data_idx": 0, "group_type": "age", "query & ground true": [
        {"reason": "", "query": "Same question?", "movie subset": ["The Princess Bride (1987)"]},
        {"reason": "", "query": "Same question?", "movie subset": ["The Princess Bride (1987)"]}]}]
    qfile = tmp_path / "movie-DemographicsBasedQuery.json"
    qfile.write_text(json.dumps(recs))
    preds = write(tmp_path, [{"id": "0-0", "response": "The Princess Bride [SEP] Heat"}, {"id": "0-1", "response": "Heat"}])
    task = RecBenchPlusTask(OmegaConf.create({"name": "recbench_plus_released", "domain": "movie", "types": None,
                                              "data": {"kind": "released", "path": str(qfile)}}))
    method = task.make_method(OmegaConf.create({"name": "assistant", "with_history": False, "k": 0, "max_tokens": 50}))
    store = RunStore(tmp_path / "run")
    loop = EvalLoop(task, method, PredictionsBackend(str(preds)), ResponseCache(tmp_path / "c.sqlite"), store, progress=False)
    loop.run(task.load())
    got = {r.id: r.to_dict() for r in store.records()}
    assert got["0-0"]["metrics"]["recall"] == 1.0 and got["0-0"]["parse_status"] == "ok"
    assert got["0-1"]["metrics"]["recall"] == 0.0 and got["0-1"]["metrics"]["ftr"] == 1.0
    assert got["0-1"]["parse_status"] == "failed"  # one title, no [SEP]: recorded, not dropped


def test_a_configured_adapter_travels_with_every_request(tmp_path):
    """method.adapter reaches each request (the vllm backend applies it as a per-request LoRA) and its cache key."""
    from tests.helpers import run_scripted

    m, recs, seen = run_scripted(tmp_path / "a", ["task=recbench_plus", "method=assistant", "method.adapter=rbp",
                                                 "limit=3"], lambda r: "Title A [SEP] Title B")
    assert len(seen) == 3 and {r.adapter for r in seen} == {"rbp"}
    _, _, plain = run_scripted(tmp_path / "b", ["task=recbench_plus", "method=assistant", "limit=3"],
                               lambda r: "Title A [SEP] Title B")
    assert {r.adapter for r in plain} == {None}
    from recbench.store.response_cache import KeyMaker

    km = KeyMaker({"kind": "scripted"})
    assert km.key(seen[0]) != km.key(next(p for p in plain if p.messages == seen[0].messages))
