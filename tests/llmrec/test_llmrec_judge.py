"""Issue 39, items 1-2: LLM judges of LLMRec explanations on the bundled sample, with a scripted model and a scripted
judge built from the config (judge.backend._target_): pointwise parsing, the pairwise both-orders verdict (a judge
that always answers A gives only ties), bad judge answers recorded as failed, the refusals before anything runs,
the cache (a rerun pays 0 judge calls), and the judged metrics reaching metrics.json and read_run."""
from __future__ import annotations

import json
import math

import pytest
from omegaconf import OmegaConf

from recbench.api.errors import ConfigError
from recbench.backends.base import Backend
from recbench.api.types import Request, Response
from recbench.run.evaluate import run_from_config
from recbench.store.judge_records import judge_records
from recbench.store.schema import read_run
from tests.doubles import ScriptedBackend
from tests.helpers import compose_cfg

pytestmark = pytest.mark.fast

ASPECTS = ("persuasiveness", "transparency", "satisfaction", "interest_accuracy")


class ScriptedJudge(Backend):
    """A judge built from the config: answers each request with ANSWER(request), counts its calls."""

    kind = "scripted_judge"
    calls = 0
    stop_after: int | None = None  # Ctrl-C once this many requests were answered (an interrupted judge pass)
    answer = staticmethod(lambda req: json.dumps({**{a: 4 for a in ASPECTS}, "reason": "fine"}))

    def __init__(self, name: str = "judge", batch_size: int = 8, api_key_env: str | None = None):
        self.name, self.batch_size = name, batch_size

    @classmethod
    def static_identity(cls, name: str = "judge", **_) -> dict:
        return {"kind": cls.kind, "name": name}

    def identity(self) -> dict:
        return self.static_identity(self.name)

    def generate(self, requests: list[Request]) -> list[Response]:
        if self.stop_after is not None and type(self).calls >= self.stop_after:
            raise KeyboardInterrupt
        type(self).calls += len(requests)
        return [Response(text=type(self).answer(r), prompt_tokens=20, completion_tokens=5) for r in requests]


@pytest.fixture(autouse=True)
def _reset():
    ScriptedJudge.calls, ScriptedJudge.stop_after = 0, None
    ScriptedJudge.answer = staticmethod(lambda req: json.dumps({**{a: 4 for a in ASPECTS}, "reason": "fine"}))
    yield


def _cfg(tmp_path, *extra):
    """The explanation task (6 examples) judged by smollm2's config with the scripted judge as its backend
    (`judge=none` in `extra`: not judged)."""
    judge = [] if "judge=none" in extra else ["judge=smollm2"]
    cfg = compose_cfg(["task=llmrec_explanation", "method=zero_shot", "limit=6", *judge, "run.bootstrap_resamples=50",
                       "run.progress=false", f"cache.path={tmp_path / 'cache.sqlite'}", *extra])
    if judge:
        cfg.judge.backend = OmegaConf.create({"_target_": f"{__name__}.ScriptedJudge", "name": "judge"})
    return cfg


def _model(text="Because the user loves this brand."):
    """A scripted model answering `text` (its identity names the text: two models never share cached answers)."""
    return ScriptedBackend(lambda req: text, name=text)


def test_pointwise_scores_reach_metrics_json_and_read_run(tmp_path):
    scores = iter(range(10_000))
    ScriptedJudge.answer = staticmethod(lambda req: json.dumps(
        {**{a: 1 + next(scores) % 5 for a in ASPECTS}, "reason": "ok"}))
    m = run_from_config(_cfg(tmp_path), tmp_path / "run", backend=_model()).to_dict()
    assert ScriptedJudge.calls == 6 and m["complete"]
    for a in ASPECTS:
        assert 1 <= m["metrics"][f"judge_{a}"]["mean"] <= 5 and m["metrics"][f"judge_{a}"]["n"] == 6
        assert m["metric_info"][f"judge_{a}"]["direction"] == "higher"
    block = m["extra"]["judge"]
    assert block["tag"] == "smollm2-pointwise" and block["judged"] == 6 and block["parse_failed"] == 0
    assert block["this_invocation"]["backend_calls"] == 6
    recs = judge_records(tmp_path / "run")["smollm2-pointwise"]
    assert recs.role == "judge" and recs.protocol == "pointwise" and len(recs.records) == 6
    r = recs.records[0]
    assert set(r.prediction) == set(ASPECTS) and r.details["reason"] == "ok" and r.details["answer_length"] == 6
    assert r.calls[0].purpose == "judge"
    joined = {s.id: s for s in read_run(tmp_path / "run").samples()}
    assert joined[r.id].metrics["judge_persuasiveness"] == r.prediction["persuasiveness"]
    # a rerun pays 0 judge calls and gives the same numbers
    ScriptedJudge.calls = 0
    m2 = run_from_config(_cfg(tmp_path), tmp_path / "run", backend=_model()).to_dict()
    assert ScriptedJudge.calls == 0 and m2["extra"]["judge"]["this_invocation"]["backend_calls"] == 0
    assert m2["metrics"]["judge_satisfaction"] == m["metrics"]["judge_satisfaction"]


@pytest.mark.parametrize("answer, problem", [
    ("I think it is good", "not JSON"),
    (json.dumps({**{a: 4 for a in ASPECTS}, "transparency": 7, "reason": "x"}), "transparency: 7 is not a whole"),
    (json.dumps({"persuasiveness": 4, "transparency": 4, "satisfaction": 4, "reason": "x"}),
     "aspect 'interest_accuracy' missing"),
])
def test_a_malformed_judge_answer_is_recorded_failed_never_scored(tmp_path, answer, problem):
    ScriptedJudge.answer = staticmethod(lambda req: answer)
    m = run_from_config(_cfg(tmp_path), tmp_path / "run", backend=_model()).to_dict()
    assert m["extra"]["judge"]["parse_failed"] == 6
    assert m["metrics"]["judge_persuasiveness"]["n"] == 0  # undefined, never a made-up score
    r = judge_records(tmp_path / "run")["smollm2-pointwise"].records[0]
    assert r.parse_status == "failed" and any(problem in p for p in r.details["problems"])
    assert all(v is None or math.isnan(v) for v in r.metrics.values())


def test_pairwise_judge_always_answering_a_gives_only_ties(tmp_path):
    run_from_config(_cfg(tmp_path, "judge=none"), tmp_path / "ref", backend=_model("It suits the user."))
    ScriptedJudge.answer = staticmethod(lambda req: '{"winner": "A", "reason": "first"}')
    cfg = _cfg(tmp_path, "judge.protocol=pairwise", f"judge.reference={tmp_path / 'ref'}")
    m = run_from_config(cfg, tmp_path / "run", backend=_model()).to_dict()
    assert ScriptedJudge.calls == 12  # both orders of 6 pairs
    assert m["metrics"]["judge_win_rate"]["mean"] == 0.5 and m["metrics"]["judge_win_rate"]["n"] == 6
    rec = judge_records(tmp_path / "run")["smollm2-pairwise"].records[0]
    assert rec.prediction == "tie" and [o["winner"] for o in rec.details["orders"]] == ["A", "A"]
    assert [c.purpose for c in rec.calls] == ["judge_first", "judge_swapped"]
    assert rec.details["reference_answer"] == "It suits the user."


def test_pairwise_a_judge_preferring_the_run_in_both_orders_gives_wins(tmp_path):
    run_from_config(_cfg(tmp_path, "judge=none"), tmp_path / "ref", backend=_model("Meh."))
    ScriptedJudge.answer = staticmethod(lambda req: json.dumps(
        {"winner": "A" if '"""Because' in req.messages[-1][1].split("Text B")[0] else "B", "reason": "longer"}))
    cfg = _cfg(tmp_path, "judge.protocol=pairwise", f"judge.reference={tmp_path / 'ref'}")
    m = run_from_config(cfg, tmp_path / "run", backend=_model()).to_dict()
    assert m["metrics"]["judge_win_rate"]["mean"] == 1.0


def test_refusals_before_anything_runs(tmp_path):
    run_from_config(_cfg(tmp_path, "judge=none", "task=llmrec_summary"), tmp_path / "other", backend=_model())
    run_from_config(_cfg(tmp_path, "judge=none", "limit=3"), tmp_path / "fewer", backend=_model())
    bad = tmp_path / "pointwise_bad.j2"
    bad.write_text("Judge {{ answer }} in {{ context }} on persuasiveness only. JSON please.")
    cases = [
        (["judge.protocol=pairwise", f"judge.reference={tmp_path / 'other'}"], "is a run of task 'llmrec_summary'"),
        (["judge.protocol=pairwise", f"judge.reference={tmp_path / 'fewer'}"], "lacks 3 of this run's 6 examples"),
        (["judge.protocol=pairwise"], "needs judge.reference=RUN_DIR"),
        ([f"judge.template={bad}"], "does not name the rubric aspect(s) transparency, satisfaction"),
        (["judge.protocol=triwise"], "judge.protocol=triwise: unknown"),
        (["task=llmrec_rating"], "judge=smollm2: task 'llmrec_rating' declares no judge rubric"),
    ]
    for extra, message in cases:
        model = _model()
        with pytest.raises(ConfigError, match=None) as e:
            run_from_config(_cfg(tmp_path, *extra), tmp_path / "run", backend=model)
        assert message in str(e.value), (extra, str(e.value))
        assert "\n" not in str(e.value) and model.calls == 0 and ScriptedJudge.calls == 0
    assert not (tmp_path / "run" / "samples.jsonl").exists()


def test_a_judge_that_cannot_start_is_refused_before_the_model_runs(tmp_path, monkeypatch):
    """A judge whose API-key variable is unset: one line naming the judge and the variable, before the model answers
    anything or the run dir holds a record (it used to come after the whole model run)."""
    monkeypatch.delenv("RECBENCH_TEST_JUDGE_KEY", raising=False)
    cfg = _cfg(tmp_path)
    cfg.judge.backend.api_key_env = "RECBENCH_TEST_JUDGE_KEY"
    model = _model()
    with pytest.raises(ConfigError) as e:
        run_from_config(cfg, tmp_path / "run", backend=model)
    assert str(e.value).startswith("judge (judge smollm2): ") and "RECBENCH_TEST_JUDGE_KEY" in str(e.value)
    assert "(judge.backend.api_key_env) is not set" in str(e.value) and "\n" not in str(e.value)
    assert model.calls == 0 and ScriptedJudge.calls == 0
    assert not (tmp_path / "run" / "samples.jsonl").exists()
    monkeypatch.setenv("RECBENCH_TEST_JUDGE_KEY", "set")  # the same config runs once the key is there
    run_from_config(cfg, tmp_path / "run", backend=model)
    assert model.calls == 6 and ScriptedJudge.calls == 6


def _by_prompt(req) -> str:
    """A judge whose scores depend on the prompt (deterministic): a resumed pass must give the same numbers."""
    import hashlib

    h = int(hashlib.sha256(req.messages[-1][1].encode()).hexdigest(), 16)
    return json.dumps({**{a: 1 + (h >> (3 * i)) % 5 for i, a in enumerate(ASPECTS)}, "reason": "h"})


def test_an_interrupted_judge_pass_resumes_paying_only_unanswered_calls(tmp_path):
    ScriptedJudge.answer = staticmethod(_by_prompt)
    whole = run_from_config(_cfg(tmp_path / "w"), tmp_path / "whole", backend=_model()).to_dict()
    cfg = _cfg(tmp_path)
    cfg.judge.backend.batch_size = 2
    ScriptedJudge.calls, ScriptedJudge.stop_after = 0, 4
    with pytest.raises(KeyboardInterrupt):
        run_from_config(cfg, tmp_path / "run", backend=_model())
    assert len(judge_records(tmp_path / "run")["smollm2-pointwise"].records) == 4  # answered ones are kept
    ScriptedJudge.calls, ScriptedJudge.stop_after = 0, None
    m = run_from_config(cfg, tmp_path / "run", backend=_model()).to_dict()
    assert ScriptedJudge.calls == 2 and m["extra"]["judge"]["this_invocation"]["backend_calls"] == 2
    for a in ASPECTS:
        assert m["metrics"][f"judge_{a}"] == whole["metrics"][f"judge_{a}"]


def test_plan_counts_judge_requests_apart(tmp_path):
    from recbench.run.plan import plan_from_config

    p = plan_from_config(_cfg(tmp_path, "mode=plan", "judge.repeats=2"), tmp_path / "run")
    assert p.judge["requests"] == 18 and list(p.judge["judges"]) == [
        "smollm2-pointwise", "smollm2-pointwise-repeat1", "smollm2-pointwise-repeat2"]
    assert p.requests == 6 and p.judge["prompt_tokens"] > 0  # the model's own requests are counted apart
    run_from_config(_cfg(tmp_path, "judge=none"), tmp_path / "ref", backend=_model())
    p = plan_from_config(_cfg(tmp_path, "mode=plan", "judge.protocol=pairwise", f"judge.reference={tmp_path / 'ref'}"),
                         tmp_path / "run")
    assert p.judge["requests"] == 12 and p.judge["unique_requests"] == 12


def test_repeats_and_panel_get_their_own_records(tmp_path):
    cfg = _cfg(tmp_path, "judge.repeats=1", "judge.temperature=0.7")
    m = run_from_config(cfg, tmp_path / "run", backend=_model()).to_dict()
    assert ScriptedJudge.calls == 12 and m["extra"]["judge"]["repeats"] == ["smollm2-pointwise-repeat1"]
    dirs = judge_records(tmp_path / "run")
    assert {t: d.role for t, d in dirs.items()} == {"smollm2-pointwise": "judge", "smollm2-pointwise-repeat1": "repeat"}
    assert dirs["smollm2-pointwise"].manifest["self_judged"] is False


def test_shards_judge_their_own_examples_and_the_merge_joins_them(tmp_path):
    from recbench.run.merge import merge_shards

    whole = run_from_config(_cfg(tmp_path), tmp_path / "whole", backend=_model()).to_dict()
    dirs = []
    for i in range(2):
        d = tmp_path / f"run.shard={i},run.shards=2"
        run_from_config(_cfg(tmp_path, f"run.shard={i}", "run.shards=2"), d, backend=_model())
        dirs.append(d)
    merged = merge_shards(dirs, out=tmp_path / "merged", merge_caches=False).result.to_dict()
    assert merged["metrics"]["judge_satisfaction"] == whole["metrics"]["judge_satisfaction"]
    assert merged["extra"]["judge"]["judged"] == 6
    assert len(judge_records(tmp_path / "merged")["smollm2-pointwise"].records) == 6


def test_a_yaml_task_opts_in_with_judge_rubric(tmp_path):
    from recbench.api.task import Task
    from recbench.run.construct import build_task

    cfg = compose_cfg(["task=generic_yesno"])
    assert build_task(cfg).rubric() == {} and Task.judge_rubric == {}
    OmegaConf.set_struct(cfg, False)
    cfg.task.judge_rubric = {"clarity": "easy to read"}
    task = build_task(cfg)
    assert "judge_clarity" in task.declared_metrics() and task.rubric() == {"clarity": "easy to read"}
    ex = task.load()[0]
    assert task.judge_context(ex) == task.prompt(ex)


def test_a_stub_openai_judge_always_answering_a_through_the_real_backend(tmp_path):
    """judge=openai-server against the stub OpenAI-compatible server, which answers {"winner": "A"} to everything:
    each pair is asked in both orders through the real openai backend, every verdict is a tie, and a rerun pays 0."""
    from recbench.testing.openai_stub import StubServer

    run_from_config(_cfg(tmp_path, "judge=none"), tmp_path / "ref", backend=_model("It suits the user."))
    with StubServer(answer_fn=lambda messages: '{"winner": "A", "reason": "x"}') as stub:
        overrides = ["judge=openai-server", "judge.protocol=pairwise", f"judge.reference={tmp_path / 'ref'}",
                     f"judge.backend.base_url={stub.base_url}", "judge.backend.max_retries=0"]
        cfg = compose_cfg(["task=llmrec_explanation", "method=zero_shot", "limit=6", "run.bootstrap_resamples=50",
                           "run.progress=false", f"cache.path={tmp_path / 'cache.sqlite'}", *overrides])
        m = run_from_config(cfg, tmp_path / "run", backend=_model()).to_dict()
        assert stub.answered == 12 and m["extra"]["judge"]["tag"] == "openai-server-pairwise"
        assert m["metrics"]["judge_win_rate"]["mean"] == 0.5
        recs = judge_records(tmp_path / "run")["openai-server-pairwise"].records
        assert {r.prediction for r in recs} == {"tie"}
        assert all([o["winner"] for o in r.details["orders"]] == ["A", "A"] for r in recs)
        m2 = run_from_config(cfg, tmp_path / "run", backend=_model()).to_dict()
        assert stub.answered == 12 and m2["extra"]["judge"]["this_invocation"]["backend_calls"] == 0
